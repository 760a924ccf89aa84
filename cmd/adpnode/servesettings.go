package main

import (
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strconv"
	"strings"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/adpnode/adpnode/cmd/adpnode/internal/settings"
	"github.com/adpnode/adpnode/federation"
	"github.com/adpnode/adpnode/hostapi"
	"github.com/adpnode/adpnode/node"
	"github.com/adpnode/adpnode/witness"
)

// serveTable declares every setting of serve (and config check) once:
// flags, the YAML reader, ADPNODE_ variables, validation,
// configs/reference.yaml and docs/settings.md come from it.
var serveTable = settings.Table{
	{Key: "listen", Flag: "listen", Kind: settings.String, Default: "127.0.0.1:8080", Validate: validListen,
		Help: "HTTP listen address."},
	{Key: "public_url", Flag: "public-url", Kind: settings.String, Example: "https://adp.example.org", Validate: validOrigin,
		Help: "The service origin: the only accepted JWT audience and the host part of Room URLs. Default: http://<listen> " +
			"(https://<the first ACME domain or listen> with TLS). Behind a TLS proxy set it to the public https origin."},
	{Key: "data", Flag: "data", Kind: settings.String, Default: "./data",
		Help: "Data directory: the Badger database, node.key, the host log and the ACME cache."},
	{Key: "log_level", Flag: "log-level", Kind: settings.String, Default: "info", Validate: validLogLevel,
		Help: "debug, info, warn or error (debug adds an HTTP access log). Logs are JSON on stderr; they never contain private keys or bearer tokens."},
	{Key: "rates", Kind: settings.Group,
		Help: "Per-agent, per-room write quotas per minute by kind (ADP §21). A name left out keeps its default; write 0 to disable " +
			"that limit (all 0: no quotas at all). Type rate_hint values may raise them up to the ceilings."},
	rate("message", "messages per minute", node.DefaultRates().Message),
	rate("signal", "signals per minute", node.DefaultRates().Signal),
	rate("control", "control events per minute", node.DefaultRates().Control),
	rate("message_ceiling", "the most a type's rate_hint may raise the message quota to", node.DefaultRates().MessageCeiling),
	rate("signal_ceiling", "the most a type's rate_hint may raise the signal quota to", node.DefaultRates().SignalCeiling),
	rate("control_ceiling", "the most a type's rate_hint may raise the control quota to", node.DefaultRates().ControlCeiling),
	rate("agent_status", "agent status updates per minute", node.DefaultRates().AgentStatus),
	rate("room_create", "rooms one agent may create (or external packs it may make this node fetch) per minute", node.DefaultRates().Create),
	rate("join_requests_per_hour", "join requests per agent per room per hour", node.DefaultRates().JoinRequests),
	{Key: "max_connections", Flag: "max-connections", Kind: settings.Int, Default: strconv.Itoa(hostapi.DefaultMaxConnections), Validate: settings.AtLeast(1),
		Help: "Concurrently open HTTP client connections. At the cap a new connection closes the longest-idle keep-alive connection; when none is idle it is closed on accept."},
	{Key: "max_connections_per_address", Flag: "max-connections-per-address", Kind: settings.Int,
		Default: strconv.Itoa(hostapi.DefaultMaxConnectionsPerAddress), Validate: settings.AtLeast(1),
		Help: "Concurrently open HTTP connections from one client address, an IPv4 address or an IPv6 /64. At the cap a new connection " +
			"closes that address's longest-idle connection; when none is idle it is closed on accept. At or above max_connections only the total cap applies."},
	{Key: "max_body_bytes", Flag: "max-body-bytes", Kind: settings.Size, Default: "1MiB", ZeroIsDefault: true,
		Help: "Cap on an HTTP request body, enforced before parsing."},
	{Key: "disk_reserve", Flag: "disk-reserve", Kind: settings.Size, Default: "256MiB", Validate: validDiskReserve,
		Help: fmt.Sprintf("Writes are refused (503 unavailable, data.reason disk_full, Retry-After) while the data dir's file system has "+
			"less free space than this; 0 disables the check. At least %dMiB, what the store may grow by at once (docs/operations.md has the formula).",
			node.MinDiskReserve(node.BadgerOptions(""))>>20)},
	{Key: "allow_private_packs", Flag: "allow-private-packs", Kind: settings.Bool, Default: "false",
		Help: "Fetch external type packs from loopback, private and link-local addresses and over plain HTTP (closed networks, tests); otherwise HTTPS to public addresses only."},
	{Key: "allow_private_peers", Flag: "allow-private-peers", Kind: settings.Bool, Default: "false",
		Help: "Let federation's host binding checks reach loopback and private origins (devnets, closed networks). " +
			"If left out, allow_private_packs: true still opens it (deprecated)."},
	{Key: "mirror_max_rooms", Flag: "mirror-max-rooms", Kind: settings.Int, Default: "1000", ZeroIsDefault: true, Validate: settings.AtLeast(0),
		Help: "Cap on the rooms this node mirrors (0: the default)."},
	{Key: "mirror_max_bytes", Flag: "mirror-max-bytes", Kind: settings.Size, Default: "10GiB", ZeroIsDefault: true,
		Help: "Cap on the records this node stores as mirrors (0: the default)."},
	{Key: "tls_cert", Flag: "tls-cert", Kind: settings.String, Example: "/etc/adpnode/fullchain.pem",
		Help: "Serve HTTPS on listen with this certificate chain (PEM; needs tls_key). Default: plain HTTP, e.g. behind a proxy."},
	{Key: "tls_key", Flag: "tls-key", Kind: settings.String, Example: "/etc/adpnode/privkey.pem",
		Help: "The private key (PEM) of tls_cert."},
	{Key: "acme_domains", Flag: "acme-domain", Kind: settings.List, Example: "[adp.example.org]",
		Help: "Serve HTTPS with certificates from ACME for these domains, cached in DATA/acme (exclusive with tls_cert; the flag is repeatable and takes comma lists)."},
	{Key: "acme_email", Flag: "acme-email", Kind: settings.String, Example: "ops@example.org",
		Help: "Contact e-mail of the ACME account."},
	{Key: "acme_directory", Flag: "acme-directory", Kind: settings.String, Default: defaultACMEDirectory,
		Help: "ACME directory URL."},
	{Key: "acme_ca_root", Flag: "acme-ca-root", Kind: settings.String, Example: "/etc/adpnode/acme-root.pem",
		Help: "PEM root certificate to trust for the ACME directory (a private ACME CA)."},
	{Key: "acme_http", Flag: "acme-http", Kind: settings.String, Example: `":80"`,
		Help: "Also answer ACME http-01 challenges on this address; tls-alpn-01 on listen always works."},
	{Key: "join_request_ttl", Kind: settings.Duration, Default: "1h", Validate: settings.PositiveDuration,
		Help: "How long a join request stays valid (never past the room's end_time)."},
	{Key: "witnesses", Flag: "witness", Kind: settings.List, Default: "", Validate: validWitnesses,
		Help: fmt.Sprintf("Submit each host log checkpoint to these C2SP tlog-witnesses, each URL=vkey: its submission URL and cosignature/v1 key "+
			"(a mirror's are in its discovery \"witness\"); at most %d. Mirrors announcing a witness on federation are found without this.", witness.MaxTargets)},
	{Key: "federation", Kind: settings.Group, Help: "The libp2p federation peer: index gossip, mirrors, discovery (docs/operations.md)."},
	{Key: "federation.enabled", Flag: "no-federation", Invert: true, Kind: settings.Bool, Default: "true",
		Help: "Run the libp2p federation peer (false: the node runs alone)."},
	{Key: "federation.listen", Flag: "p2p-listen", Kind: settings.List, Default: "/ip4/127.0.0.1/tcp/4001,/ip4/127.0.0.1/udp/4001/quic-v1",
		Help: "libp2p listen multiaddrs. Left unset while public_url is not loopback, libp2p listens on every interface, TCP and QUIC, IPv4 and IPv6."},
	{Key: "federation.peers", Flag: "peer", Kind: settings.List, Validate: validPeers,
		Help: "Static peers, multiaddrs ending in /p2p/<peer id>, kept connected with backoff (flags replace the file's list)."},
	{Key: "federation.mdns", Flag: "mdns", Kind: settings.Bool, Default: "false",
		Help: "Discover peers on the local network with mDNS."},
	{Key: "federation.bootstrap", Flag: "bootstrap", Kind: settings.List, Validate: validBootstrap,
		Help: "Bootstrap peers, multiaddrs ending in /p2p/<peer id>: dialled to join the federation and its DHT, not kept connected (flags replace the file's list)."},
	{Key: "federation.dht", Flag: "dht", Kind: settings.String, Default: "auto", Validate: validDHT,
		Help: "ADP DHT mode: auto (server unless AutoNAT finds this node private: closed networks get DHT servers without AutoNAT), server, client or off."},
	{Key: "federation.conn_low", Kind: settings.Int, Default: "64", ZeroIsDefault: true, Validate: settings.AtLeast(0),
		Help: "Connection manager low watermark: above conn_high it trims down to this, keeping static peers (0: the default)."},
	{Key: "federation.conn_high", Kind: settings.Int, Default: "128", ZeroIsDefault: true, Validate: settings.AtLeast(0),
		Help: "Connection manager high watermark (0: the default); conn_low ≤ conn_high."},
	{Key: "federation.nat", Kind: settings.Group, Help: "NAT traversal; AutoNAT always runs."},
	{Key: "federation.nat.hole_punching", Kind: settings.Bool, Default: "true", Help: "Hole punching (DCUtR)."},
	{Key: "federation.nat.relay_client", Kind: settings.Bool, Default: "true", Help: "Reach and be reached through circuit relays."},
	{Key: "federation.nat.relay_service", Kind: settings.Bool, Default: "false", Help: "Act as a circuit relay for other peers."},
	{Key: "federation.nat.autonat_service", Kind: settings.Bool, Default: "false", Help: "Answer other peers' AutoNAT reachability probes."},
	{Key: "federation.nat.port_map", Kind: settings.Bool, Default: "false", Help: "Map the listen ports on the router with UPnP or NAT-PMP."},
	{Key: "federation.nat.reachability", Kind: settings.String, Validate: settings.OneOf("", "public", "private"),
		Help: "Force the reachability: public or private (empty: AutoNAT decides)."},
	{Key: "federation.announce_interval", Kind: settings.Duration, Default: "30s", Validate: settings.PositiveDuration,
		Help: "Paces the re-checks of peers' host bindings and the announcements taken from one host (4 × 10,000 per interval, bursts of 2,048). " +
			"Rooms are announced when they change, not every interval; an unchanged room's announcement is valid 6 h and refreshed after 1–3 h."},
	{Key: "federation.max_entries_per_host", Kind: settings.Int, Default: "10000", ZeroIsDefault: true, Validate: settings.AtLeast(0),
		Help: "Index entries one verified host may hold (unverified hosts: 1,000 each, 20,000 in all) (0: the default)."},
	{Key: "federation.max_conns", Kind: settings.Int, Default: "512", ZeroIsDefault: true, Validate: settings.AtLeast(0),
		Help: "libp2p connections in all (resource manager) (0: the default)."},
	{Key: "federation.max_conns_per_peer", Kind: settings.Int, Default: "8", ZeroIsDefault: true, Validate: settings.AtLeast(0),
		Help: "libp2p connections per peer (resource manager) (0: the default)."},
}

func rate(name, help string, def int) settings.Setting {
	return settings.Setting{Key: "rates." + name, Kind: settings.Int, Default: strconv.Itoa(def), Validate: settings.AtLeast(0),
		Help: strings.ToUpper(help[:1]) + help[1:] + " (0: no limit)."}
}

func validListen(v any) error {
	_, port, err := net.SplitHostPort(v.(string))
	if err != nil {
		return fmt.Errorf("%q: want host:port, as in 127.0.0.1:8080", v)
	}
	if p, err := strconv.Atoi(port); err != nil || p < 0 || p > 65535 {
		return fmt.Errorf("%q: the port must be a number from 0 to 65535, as in 127.0.0.1:8080", v)
	}
	return nil
}

func validOrigin(v any) error {
	if u, err := url.Parse(v.(string)); v != "" && (err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "") {
		return fmt.Errorf("%q must be an origin like https://adp.example.org", v)
	}
	return nil
}

func validLogLevel(v any) error {
	var l slog.Level
	return l.UnmarshalText([]byte(v.(string)))
}

func validDiskReserve(v any) error { return node.CheckDiskReserve(v.(int64)) }

func validWitnesses(v any) error {
	l := v.([]string)
	if len(l) > witness.MaxTargets {
		return fmt.Errorf("at most %d witnesses, got %d", witness.MaxTargets, len(l))
	}
	for _, w := range l {
		if _, err := witness.ParseTarget(w); err != nil {
			return fmt.Errorf("%q: %w", w, err)
		}
	}
	return nil
}

func validPeers(v any) error {
	for _, p := range v.([]string) {
		if strings.ContainsAny(p, "<>") || !strings.Contains(p, "/p2p/") {
			return fmt.Errorf("%q: want a multiaddr ending in /p2p/<peer id>", p)
		}
	}
	return nil
}

func validBootstrap(v any) error {
	for _, p := range v.([]string) {
		if _, err := peer.AddrInfoFromString(p); err != nil || strings.ContainsAny(p, "<>") {
			return fmt.Errorf("%q: want a multiaddr ending in /p2p/<peer id>", p)
		}
	}
	return nil
}

func validDHT(v any) error {
	_, err := federation.ParseDHTMode(v.(string))
	return err
}
