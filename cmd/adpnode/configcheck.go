package main

import (
	"fmt"

	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"
)

func configCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "config", Short: "Work with configuration files"}
	check := &cobra.Command{
		Use:   "check --config FILE [serve flags]",
		Short: "Parse and validate a configuration, then print the effective settings",
		Long: `check reads the configuration exactly as serve would (flags, then ADPNODE_
environment variables, then the file, then defaults), validates it and prints
the effective settings as YAML. Unknown keys in the file are errors. It opens
nothing: no data directory, no ports. Exit 0 when valid, 2 when not.`,
		Example: "  adpnode config check --config configs/single.yaml --listen 127.0.0.1:18401",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ss, err := resolveServe(cmd)
			if err != nil {
				return err
			}
			cfg := ss.cfg
			cfg.Defaults()
			out := map[string]any{
				"listen":              ss.listen,
				"public_url":          cfg.PublicURL,
				"data":                cfg.DataDir,
				"log_level":           ss.logLevel,
				"max_body_bytes":      cfg.MaxBodyBytes,
				"allow_private_packs": cfg.Packs.AllowPrivate,
				"allow_private_peers": ss.allowPrivatePeers,
				"mirror_max_rooms":    ss.mirrorMaxRooms,
				"mirror_max_bytes":    ss.mirrorMaxBytes,
				"tls":                 tlsOut(ss.tls),
				"rates": map[string]int{"message": cfg.Rates.Message, "signal": cfg.Rates.Signal,
					"control": cfg.Rates.Control, "room_create": cfg.Rates.Create},
				"federation": map[string]any{"enabled": ss.fed.enabled, "listen": ss.fed.listen, "peers": nonNil(ss.fed.peers),
					"mdns": ss.fed.mdns, "announce_interval": ss.fed.interval.String(), "bootstrap": nonNil(ss.fed.bootstrap),
					"dht": string(ss.fed.dht), "listen_all_interfaces": ss.fed.listenAll,
					"conn_low": ss.fed.limits.ConnLow, "conn_high": ss.fed.limits.ConnHigh,
					"nat": map[string]bool{"autonat": true, "hole_punching": !ss.fed.nat.NoHolePunching, "relay_client": !ss.fed.nat.NoRelayClient,
						"relay_service": ss.fed.nat.RelayService, "autonat_service": ss.fed.nat.AutoNATService, "port_map": ss.fed.nat.PortMap}},
			}
			out["max_connections"], out["max_connections_per_address"] = ss.fed.http.MaxConnections, ss.fed.http.MaxConnectionsPerAddress
			out["disk_reserve"] = cfg.DiskReserveBytes
			b, err := yaml.Marshal(out)
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

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
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
