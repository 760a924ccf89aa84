package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/adpnode/adpnode/federation"
)

func peersCmd() *cobra.Command {
	var nodeURL string
	var asJSON bool
	var op operatorFlags
	cmd := &cobra.Command{
		Use:     "peers",
		Short:   "List a node's libp2p peers (connected and configured)",
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
				Result []federation.PeerInfo `json:"result"`
			}
			if err := json.Unmarshal(b, &out); err != nil {
				return err
			}
			w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "PEER ID\tHOST KEY\tCONNECTED\tSTATIC\tADDRESSES")
			for _, p := range out.Result {
				fmt.Fprintf(w, "%s\t%s\t%v\t%v\t%s\n", p.PeerID, p.HostKey, p.Connected, p.Static, strings.Join(p.Addrs, " "))
			}
			return w.Flush()
		},
	}
	cmd.Flags().StringVar(&nodeURL, "node", "http://127.0.0.1:8080", "the node's HTTP origin")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the raw JSON")
	op.register(cmd)
	return cmd
}
