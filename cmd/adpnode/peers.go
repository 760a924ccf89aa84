package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/adpnode/adpnode/federation"
	"github.com/adpnode/adpnode/fedport"
)

func peersCmd() *cobra.Command {
	var nodeURL string
	var asJSON bool
	var op operatorFlags
	cmd := &cobra.Command{
		Use:     "peers",
		Short:   "List a node's libp2p peers (connected and configured), and why a peer's rooms are not listed",
		Example: "  adpnode peers --node http://127.0.0.1:8080",
		RunE: func(cmd *cobra.Command, _ []string) error {
			nodeURL = nodeOfData(cmd, nodeURL, op.data)
			tok, _ := op.token() // listing peers is public; the token is sent when there is one
			b, err := callAs(http.MethodGet, strings.TrimSuffix(nodeURL, "/")+"/v1/federation/peers", tok, nil)
			if err != nil {
				return err
			}
			if asJSON {
				os.Stdout.Write(b)
				return nil
			}
			var out struct {
				Result    []federation.PeerInfo    `json:"result"`
				Discovery *fedport.DiscoveryStatus `json:"discovery"`
			}
			if err := json.Unmarshal(b, &out); err != nil {
				return err
			}
			if d := out.Discovery; d != nil {
				printDiscovery(os.Stdout, d)
			}
			w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "PEER ID\tHOST KEY\tCONNECTED\tSTATIC\tSOURCE\tADDRESSES")
			for _, p := range out.Result {
				fmt.Fprintf(w, "%s\t%s\t%v\t%v\t%s\t%s\n", p.PeerID, p.HostKey, p.Connected, p.Static, p.Source, strings.Join(p.Addrs, " "))
			}
			if err := w.Flush(); err != nil {
				return err
			}
			printNotListed(nodeURL, tok, out.Result)
			return nil
		},
	}
	cmd.Flags().StringVar(&nodeURL, "node", "http://127.0.0.1:8080", "the node's HTTP origin")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the raw JSON")
	op.register(cmd)
	return cmd
}

// printNotListed says, for each peer and each other known host whose rooms
// the node's directory leaves out, why (the node's not_listed): a newcomer
// whose directory stays empty learns what to change.
func printNotListed(nodeURL, tok string, peers []federation.PeerInfo) {
	seen := map[string]bool{}
	for _, p := range peers {
		if p.NotListed != "" {
			fmt.Printf("rooms of peer %s not listed: %s\n", p.PeerID, termSafe(p.NotListed))
			seen[string(p.HostKey)] = true
		}
	}
	b, err := callAs(http.MethodGet, strings.TrimSuffix(nodeURL, "/")+"/v1/federation/hosts", tok, nil)
	if err != nil {
		return
	}
	var hosts struct {
		Result []federation.HostInfo `json:"result"`
	}
	if json.Unmarshal(b, &hosts) != nil {
		return
	}
	for _, h := range hosts.Result {
		if h.NotListed != "" && !seen[string(h.Key)] {
			fmt.Printf("rooms of host %s (%s) not listed: %s\n", h.Key, termSafe(h.Origin), termSafe(h.NotListed))
		}
	}
}

// printDiscovery prints the effective discovery state above the peers:
// the DHT mode in effect (and the one configured), the routing table,
// connections by source, and why federation is degraded.
func printDiscovery(w io.Writer, d *fedport.DiscoveryStatus) {
	srcs := make([]string, 0, len(d.BySource))
	for s, n := range d.BySource {
		srcs = append(srcs, fmt.Sprintf("%s %d", s, n))
	}
	sort.Strings(srcs)
	by := ""
	if len(srcs) > 0 {
		by = " (" + strings.Join(srcs, ", ") + ")"
	}
	fmt.Fprintf(w, "DHT %s (configured %s), routing table %d; connected %d%s; bootstrap %d, static %d\n",
		d.DHT, d.DHTConfigured, d.RoutingTable, d.Connected, by, d.Bootstrap, d.Static)
	if d.Degraded {
		fmt.Fprintf(w, "federation degraded: %s\n", d.Reason)
	}
}
