package main

import (
	"fmt"

	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"

	"github.com/adpnode/adpnode/cmd/adpnode/internal/settings"
	"github.com/adpnode/adpnode/federation"
)

func configCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "config", Short: "Work with configuration files"}
	check := &cobra.Command{
		Use:   "check --config FILE [serve flags]",
		Short: "Parse and validate a configuration, then print the effective settings",
		Long: `check reads the configuration exactly as serve would (flags, then ADPNODE_
environment variables, then the file, then defaults), validates it and prints
every setting's effective value (the value the node runs with) as YAML, each
with its source as a comment: flag, env, file, default, or derived (from
other settings). It adds what follows from them: the TLS mode, whether
libp2p listens on all interfaces, AutoNAT, the DHT mode
the node will run in. Unknown keys in the file are
errors. It opens nothing: no data directory, no ports. Exit 0 when valid, 2
when not. docs/settings.md lists the settings.`,
		Example: "  adpnode config check --config configs/single.yaml --listen 127.0.0.1:18401",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ss, err := resolveServe(cmd)
			if err != nil {
				return err
			}
			doc := serveTable.Document(ss.vals)
			derived := func(key string, v any) {
				n := &yaml.Node{}
				if err := n.Encode(v); err != nil {
					panic(err)
				}
				if n.Kind != yaml.ScalarNode {
					n.Style = yaml.FlowStyle
				}
				n.LineComment = "derived"
				settings.Put(doc, key, n)
			}
			derived("tls", tlsOut(ss.tls))
			derived("federation.listen_all_interfaces", ss.fed.listenAll)
			derived("federation.nat.autonat", true)
			derived("federation.dht_effective", federation.ExpectedDHT(ss.fed.dht, ss.fed.nat.Reachability))
			b, err := yaml.Marshal(doc)
			if err != nil {
				return err
			}
			fmt.Fprint(cmd.OutOrStdout(), string(b))
			return nil
		},
	}
	addServeFlags(check)
	cmd.AddCommand(check)
	return cmd
}

// tlsOut is the tls: section of config check's output.
func tlsOut(t tlsSettings) map[string]any {
	out := map[string]any{"mode": t.mode()}
	switch t.mode() {
	case "static":
		out["cert"], out["key"] = t.certFile, t.keyFile
	case "acme":
		out["domains"], out["email"], out["directory"] = t.acmeDomains, t.acmeEmail, t.acmeDirectory
		out["ca_root"], out["http"] = t.acmeCARoot, t.acmeHTTP
	}
	return out
}
