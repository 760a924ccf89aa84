package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"go.yaml.in/yaml/v3"

	"github.com/adpnode/adpnode/federation"
	"github.com/adpnode/adpnode/hostapi"
	"github.com/adpnode/adpnode/index"
	istack "github.com/adpnode/adpnode/internal/stack"
	"github.com/adpnode/adpnode/mirror"
	"github.com/adpnode/adpnode/node"
	"github.com/adpnode/adpnode/tlog"
	"github.com/adpnode/adpnode/witness"
)

// fileConfig is the YAML configuration file; flags override it.
type fileConfig struct {
	Listen    string `yaml:"listen"`
	PublicURL string `yaml:"public_url"`
	Data      string `yaml:"data"`
	LogLevel  string `yaml:"log_level"`
	// Rates: a name left out keeps its default; 0 must be written to
	// disable that limit.
	Rates             *fileRates `yaml:"rates"`
	MaxConnections    int        `yaml:"max_connections"`
	MaxBodyBytes      string     `yaml:"max_body_bytes"` // bytes, or a size such as 4MiB
	DiskReserve       string     `yaml:"disk_reserve"`
	AllowPrivatePacks bool       `yaml:"allow_private_packs"`
	// AllowPrivatePeers lets federation's binding cross-checks reach
	// loopback and private origins (nil: unset; an old file's
	// allow_private_packs then stands in for it, with a deprecation note).
	AllowPrivatePeers *bool `yaml:"allow_private_peers"`
	// MaxConnectionsPerAddress caps one client address (IPv6: one /64).
	MaxConnectionsPerAddress int `yaml:"max_connections_per_address"`
	// Mirror caps (0: the defaults, 1000 rooms and 10GiB).
	MirrorMaxRooms int    `yaml:"mirror_max_rooms"`
	MirrorMaxBytes string `yaml:"mirror_max_bytes"`
	// TLS: a static certificate, or ACME (exclusive).
	TLSCert       string   `yaml:"tls_cert"`
	TLSKey        string   `yaml:"tls_key"`
	ACMEDomains   []string `yaml:"acme_domains"`
	ACMEEmail     string   `yaml:"acme_email"`
	ACMEDirectory string   `yaml:"acme_directory"`
	ACMECARoot    string   `yaml:"acme_ca_root"`
	ACMEHTTP      string   `yaml:"acme_http"`
	// JoinRequestTTL is how long a join request stays valid (Go duration;
	// default 1h, and never past the room's end_time).
	JoinRequestTTL string `yaml:"join_request_ttl"`
	Federation     *struct {
		Enabled  *bool    `yaml:"enabled"`
		Listen   []string `yaml:"listen"`
		Peers    []string `yaml:"peers"`
		MDNS     bool     `yaml:"mdns"`
		Announce string   `yaml:"announce_interval"`
		// Limits against hostile peers (0: the defaults).
		MaxEntriesPerHost int `yaml:"max_entries_per_host"`
		MaxConns          int `yaml:"max_conns"`
		MaxConnsPerPeer   int `yaml:"max_conns_per_peer"`
		// Discovery (README "Finding peers").
		Bootstrap []string `yaml:"bootstrap"`
		DHT       string   `yaml:"dht"`
		ConnLow   int      `yaml:"conn_low"`
		ConnHigh  int      `yaml:"conn_high"`
		NAT       *struct {
			HolePunching   *bool  `yaml:"hole_punching"`
			RelayClient    *bool  `yaml:"relay_client"`
			RelayService   bool   `yaml:"relay_service"`
			AutoNATService bool   `yaml:"autonat_service"`
			PortMap        bool   `yaml:"port_map"`
			Reachability   string `yaml:"reachability"`
		} `yaml:"nat"`
	} `yaml:"federation"`
}

// fileRates is the rates: block. Every field is a pointer so that a name
// left out keeps its default and only a written 0 disables a limit.
type fileRates struct {
	Message        *int `yaml:"message"`
	Signal         *int `yaml:"signal"`
	Control        *int `yaml:"control"`
	MessageCeiling *int `yaml:"message_ceiling"`
	SignalCeiling  *int `yaml:"signal_ceiling"`
	ControlCeiling *int `yaml:"control_ceiling"`
	AgentStatus    *int `yaml:"agent_status"`
	Create         *int `yaml:"room_create"`
	JoinRequests   *int `yaml:"join_requests_per_hour"`
}

// rates returns the defaults overridden by what the block names.
func (fr *fileRates) rates() (node.Rates, error) {
	r := node.DefaultRates()
	if fr == nil {
		return r, nil
	}
	for _, f := range []struct {
		name string
		from *int
		to   *int
	}{{"message", fr.Message, &r.Message}, {"signal", fr.Signal, &r.Signal}, {"control", fr.Control, &r.Control},
		{"message_ceiling", fr.MessageCeiling, &r.MessageCeiling}, {"signal_ceiling", fr.SignalCeiling, &r.SignalCeiling},
		{"control_ceiling", fr.ControlCeiling, &r.ControlCeiling}, {"agent_status", fr.AgentStatus, &r.AgentStatus},
		{"room_create", fr.Create, &r.Create}, {"join_requests_per_hour", fr.JoinRequests, &r.JoinRequests}} {
		if f.from == nil {
			continue
		}
		if *f.from < 0 {
			return r, fmt.Errorf("rates.%s: %d is not a limit (0 disables it)", f.name, *f.from)
		}
		*f.to = *f.from
	}
	if r == (node.Rates{}) {
		// Config.Defaults reads an all-zero Rates as unset; every limit
		// spelled out as 0 means no limit at all.
		r = node.NoRates()
	}
	return r, nil
}

func serveCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run an ADP host (embedded Badger in the data dir; no other services)",
		Example: `  adpnode serve
  adpnode serve --listen 127.0.0.1:9000 --data ./data2
  adpnode serve --config configs/single.yaml`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ss, err := resolveServe(cmd)
			if err != nil {
				return err
			}
			log := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: ss.level}))
			ss.cfg.Log = log
			stop, err := startCPUProfile(os.Getenv("ADPNODE_CPUPROFILE"), log)
			if err != nil {
				return err
			}
			defer stop()
			return serve(cmd.Context(), ss.cfg, ss.listen, ss.fed, log)
		},
	}
	addServeFlags(cmd)
	return cmd
}

// addServeFlags adds the node settings flags (serve, config check).
func addServeFlags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.String("config", "", "YAML configuration file (flags override it)")
	f.String("listen", "127.0.0.1:8080", "HTTP listen address")
	f.String("public-url", "", "service origin: JWT audience and Room URL host (default http://<listen>)")
	f.String("data", "./data", "data directory (Badger)")
	f.String("log-level", "info", "debug, info, warn or error (debug adds an HTTP access log)")
	f.Bool("allow-private-packs", false, "allow external packs from loopback/private addresses and plain HTTP")
	f.Bool("allow-private-peers", false, "let federation's host binding checks reach loopback/private origins (devnets, closed networks)")
	f.String("max-body-bytes", "1MiB", "cap on a request body (bytes, or a size such as 4MiB)")
	f.Int("mirror-max-rooms", 1000, "cap on the rooms this node mirrors")
	f.String("mirror-max-bytes", "10GiB", "cap on the records this node stores as mirrors")
	f.String("tls-cert", "", "serve HTTPS on --listen with this certificate chain (PEM; needs --tls-key)")
	f.String("tls-key", "", "private key (PEM) of --tls-cert")
	f.StringArray("acme-domain", nil, "serve HTTPS with certificates from ACME for this domain (repeatable or comma list; cache in DATA/acme)")
	f.String("acme-email", "", "contact e-mail of the ACME account")
	f.String("acme-directory", defaultACMEDirectory, "ACME directory URL")
	f.String("acme-ca-root", "", "PEM root certificate to trust for the ACME directory (private ACME CA)")
	f.String("acme-http", "", "also answer ACME http-01 challenges on this address (e.g. :80); tls-alpn-01 on --listen always works")
	f.Bool("no-federation", false, "run without libp2p federation")
	f.StringArray("p2p-listen", []string{"/ip4/127.0.0.1/tcp/4001", "/ip4/127.0.0.1/udp/4001/quic-v1"},
		"libp2p listen multiaddr (repeatable)")
	f.StringArray("peer", nil, "static peer multiaddr ending in /p2p/<peer id> (repeatable; replaces the file's peers)")
	f.StringArray("bootstrap", nil, "bootstrap peer multiaddr ending in /p2p/<peer id>: dialled to join the federation and its DHT, not kept connected (repeatable; replaces the file's bootstrap)")
	f.String("dht", "auto", "ADP DHT mode: auto (server once AutoNAT finds this node public), server, client or off")
	f.Bool("mdns", false, "discover peers on the local network with mDNS (--mdns=false turns the file's setting off)")
	f.String("disk-reserve", "256MiB", fmt.Sprintf("refuse writes (503, reason disk_full) while the data dir's file system has less free space than this; at least %dMiB (what the store may grow by at once), or 0 to disable", node.MinDiskReserve(node.BadgerOptions(""))>>20))
	f.Int("max-connections", hostapi.DefaultMaxConnections, "cap on concurrently open HTTP client connections; at the cap a new one closes the longest-idle keep-alive connection")
	f.Int("max-connections-per-address", hostapi.DefaultMaxConnectionsPerAddress, "cap on open HTTP connections from one client address (IPv6: one /64); at the cap a new one closes that address's longest-idle connection")
	f.StringArray("witness", nil, "submit each host log checkpoint to this C2SP tlog-witness, URL=vkey (its submission URL and cosignature/v1 key; a mirror's are in its discovery \"witness\"); repeatable")
}

// serveSettings are the effective settings of serve: flags, then
// environment, then config file, then defaults.
type serveSettings struct {
	cfg      node.Config
	listen   string
	logLevel string
	level    slog.Level
	fed      fedSettings
	tls      tlsSettings

	allowPrivatePeers    bool
	deprecatedPeersAllow bool // allowPrivatePeers comes from allow_private_packs
	mirrorMaxRooms       int
	mirrorMaxBytes       int64
}

// pickSize resolves a size setting: the flag when given, else the file's
// value, else the flag's default. Sizes are bytes or a number with KiB,
// MiB or GiB; a negative or malformed size is a usage error.
func pickSize(fl *pflag.FlagSet, flag, file string) (int64, error) {
	v, _ := fl.GetString(flag)
	if !fl.Changed(flag) && file != "" {
		v = file
	}
	n, err := parseSize(v)
	if err != nil {
		return 0, withCode(exitUsage, fmt.Errorf("%s: %w", strings.ReplaceAll(flag, "-", "_"), err))
	}
	return n, nil
}

// resolveServe computes the effective settings from the flags,
// environment and config file. Rules: a flag (or its ADPNODE_ variable)
// wins over the file; repeatable flags replace the file's lists; public_url
// is derived from the effective listen address unless given by flag or
// written in the file as something other than http://<file's listen>.
func resolveServe(cmd *cobra.Command) (*serveSettings, error) {
	if err := applyEnv(cmd); err != nil {
		return nil, withCode(exitUsage, err)
	}
	fl := cmd.Flags()
	var fc fileConfig
	if cfgPath, _ := fl.GetString("config"); cfgPath != "" {
		b, err := os.ReadFile(cfgPath)
		if err != nil {
			return nil, err
		}
		dec := yaml.NewDecoder(strings.NewReader(string(b)))
		dec.KnownFields(true)
		if err := dec.Decode(&fc); err != nil && !errors.Is(err, io.EOF) {
			return nil, withCode(exitUsage, fmt.Errorf("%s: %w", cfgPath, err))
		}
	}
	pick := func(flag, file string) string {
		v, _ := fl.GetString(flag)
		if fl.Changed(flag) || file == "" {
			return v
		}
		return file
	}
	ss := &serveSettings{}
	ss.listen = pick("listen", fc.Listen)
	if _, port, err := net.SplitHostPort(ss.listen); err != nil {
		return nil, withCode(exitUsage, fmt.Errorf("listen %q: %w", ss.listen, err))
	} else if p, err := strconv.Atoi(port); err != nil || p < 0 || p > 65535 {
		return nil, withCode(exitUsage, fmt.Errorf("listen %q: the port must be a number from 0 to 65535, as in 127.0.0.1:8080", ss.listen))
	}
	ts := tlsSettings{certFile: pick("tls-cert", fc.TLSCert), keyFile: pick("tls-key", fc.TLSKey),
		acmeDomains: fc.ACMEDomains, acmeEmail: pick("acme-email", fc.ACMEEmail),
		acmeDirectory: pick("acme-directory", fc.ACMEDirectory), acmeCARoot: pick("acme-ca-root", fc.ACMECARoot),
		acmeHTTP: pick("acme-http", fc.ACMEHTTP)}
	if fl.Changed("acme-domain") {
		ts.acmeDomains, _ = fl.GetStringArray("acme-domain")
	}
	var err error
	if ss.tls, err = resolveTLS(ts); err != nil {
		return nil, withCode(exitUsage, err)
	}
	publicURL, _ := fl.GetString("public-url")
	fileDerived := strings.TrimSuffix(fc.PublicURL, "/") == "http://"+fc.Listen || strings.TrimSuffix(fc.PublicURL, "/") == "https://"+fc.Listen
	switch {
	case fl.Changed("public-url"):
	case fc.PublicURL != "" && !(fl.Changed("listen") && fileDerived):
		publicURL = fc.PublicURL
	default:
		publicURL = ss.tls.defaultPublicURL(ss.listen)
	}
	if u, err := url.Parse(publicURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, withCode(exitUsage, fmt.Errorf("public_url %q must be an origin like https://adp.example.org", publicURL))
	}
	ss.logLevel = pick("log-level", fc.LogLevel)
	if err := ss.level.UnmarshalText([]byte(ss.logLevel)); err != nil {
		return nil, withCode(exitUsage, fmt.Errorf("log_level: %w", err))
	}
	maxBody, err := pickSize(fl, "max-body-bytes", fc.MaxBodyBytes)
	if err != nil {
		return nil, err
	}
	ss.cfg = node.Config{PublicURL: publicURL, DataDir: pick("data", fc.Data), MaxBodyBytes: maxBody}
	allow, _ := fl.GetBool("allow-private-packs")
	if fl.Changed("allow-private-packs") {
		ss.cfg.Packs.AllowPrivate = allow
	} else {
		ss.cfg.Packs.AllowPrivate = allow || fc.AllowPrivatePacks
	}
	peersAllow, _ := fl.GetBool("allow-private-peers")
	switch {
	case fl.Changed("allow-private-peers"):
		ss.allowPrivatePeers = peersAllow
	case fc.AllowPrivatePeers != nil:
		ss.allowPrivatePeers = *fc.AllowPrivatePeers
	case ss.cfg.Packs.AllowPrivate:
		// Before allow_private_peers existed, allow_private_packs also
		// opened federation's binding checks; an old config keeps working.
		ss.allowPrivatePeers = true
		ss.deprecatedPeersAllow = true
	}
	if ss.mirrorMaxRooms, _ = fl.GetInt("mirror-max-rooms"); !fl.Changed("mirror-max-rooms") && fc.MirrorMaxRooms != 0 {
		ss.mirrorMaxRooms = fc.MirrorMaxRooms
	}
	if ss.mirrorMaxRooms < 0 {
		return nil, withCode(exitUsage, fmt.Errorf("mirror_max_rooms %d: must not be negative", ss.mirrorMaxRooms))
	}
	if ss.mirrorMaxBytes, err = pickSize(fl, "mirror-max-bytes", fc.MirrorMaxBytes); err != nil {
		return nil, err
	}
	rates, err := fc.Rates.rates()
	if err != nil {
		return nil, withCode(exitUsage, err)
	}
	ss.cfg.Rates = rates
	if fc.JoinRequestTTL != "" {
		d, err := time.ParseDuration(fc.JoinRequestTTL)
		if err != nil || d <= 0 {
			return nil, withCode(exitUsage, fmt.Errorf("join_request_ttl %q: need a positive duration such as 30m", fc.JoinRequestTTL))
		}
		ss.cfg.JoinRequestTTL = d
	}
	if ss.cfg.DiskReserveBytes, err = parseSize(pick("disk-reserve", fc.DiskReserve)); err != nil {
		return nil, withCode(exitUsage, fmt.Errorf("disk reserve: %w", err))
	}
	if err := node.CheckDiskReserve(ss.cfg.DiskReserveBytes); err != nil {
		return nil, withCode(exitUsage, err)
	}
	if fc.MaxConnections < 0 {
		return nil, withCode(exitUsage, fmt.Errorf("max_connections must be positive (0 keeps the default %d)", hostapi.DefaultMaxConnections))
	}
	httpOpts := hostapi.HTTPOptions{MaxConnections: fc.MaxConnections}
	if v, _ := fl.GetInt("max-connections"); fl.Changed("max-connections") || fc.MaxConnections == 0 {
		httpOpts.MaxConnections = v
	}
	if fc.MaxConnectionsPerAddress < 0 {
		return nil, withCode(exitUsage, fmt.Errorf("max_connections_per_address must be positive (0 keeps the default %d)", hostapi.DefaultMaxConnectionsPerAddress))
	}
	httpOpts.MaxConnectionsPerAddress = fc.MaxConnectionsPerAddress
	if v, _ := fl.GetInt("max-connections-per-address"); fl.Changed("max-connections-per-address") || fc.MaxConnectionsPerAddress == 0 {
		httpOpts.MaxConnectionsPerAddress = v
	}
	if httpOpts.MaxConnections <= 0 || httpOpts.MaxConnectionsPerAddress <= 0 {
		return nil, withCode(exitUsage, fmt.Errorf("--max-connections %d / --max-connections-per-address %d: must be positive",
			httpOpts.MaxConnections, httpOpts.MaxConnectionsPerAddress))
	}
	noFed, _ := fl.GetBool("no-federation")
	p2pListen, _ := fl.GetStringArray("p2p-listen")
	peers, _ := fl.GetStringArray("peer")
	mdnsOn, _ := fl.GetBool("mdns")
	boot, _ := fl.GetStringArray("bootstrap")
	dhtMode, _ := fl.GetString("dht")
	ss.fed = fedSettings{enabled: !noFed, listen: p2pListen, peers: peers, mdns: mdnsOn, interval: 30 * time.Second, bootstrap: boot}
	listenGiven := fl.Changed("p2p-listen")
	wflags, _ := fl.GetStringArray("witness")
	if len(wflags) > witness.MaxTargets {
		return nil, withCode(exitUsage, fmt.Errorf("at most %d --witness", witness.MaxTargets))
	}
	for _, w := range wflags {
		tg, err := witness.ParseTarget(w)
		if err != nil {
			return nil, withCode(exitUsage, fmt.Errorf("--witness %q: %w", w, err))
		}
		ss.fed.witnesses = append(ss.fed.witnesses, tg)
	}
	if ff := fc.Federation; ff != nil {
		if ff.Enabled != nil && !fl.Changed("no-federation") {
			ss.fed.enabled = *ff.Enabled
		}
		if !fl.Changed("p2p-listen") && len(ff.Listen) > 0 {
			ss.fed.listen, listenGiven = ff.Listen, true
		}
		if !fl.Changed("bootstrap") && len(ff.Bootstrap) > 0 {
			ss.fed.bootstrap = ff.Bootstrap
		}
		if !fl.Changed("dht") && ff.DHT != "" {
			dhtMode = ff.DHT
		}
		if ff.ConnLow < 0 || ff.ConnHigh < 0 || ff.ConnHigh > 0 && ff.ConnLow > ff.ConnHigh {
			return nil, withCode(exitUsage, fmt.Errorf("federation.conn_low %d / conn_high %d: want 0 ≤ low ≤ high (0: the defaults 64 and 128)", ff.ConnLow, ff.ConnHigh))
		}
		ss.fed.limits.ConnLow, ss.fed.limits.ConnHigh = ff.ConnLow, ff.ConnHigh
		if nat := ff.NAT; nat != nil {
			ss.fed.nat = federation.NATOptions{RelayService: nat.RelayService, AutoNATService: nat.AutoNATService, PortMap: nat.PortMap}
			ss.fed.nat.NoHolePunching = nat.HolePunching != nil && !*nat.HolePunching
			ss.fed.nat.NoRelayClient = nat.RelayClient != nil && !*nat.RelayClient
			switch nat.Reachability {
			case "", "public", "private":
				ss.fed.nat.Reachability = nat.Reachability
			default:
				return nil, withCode(exitUsage, fmt.Errorf("federation.nat.reachability %q: want public or private (absent: AutoNAT decides)", nat.Reachability))
			}
		}
		if !fl.Changed("peer") {
			ss.fed.peers = ff.Peers
		}
		if !fl.Changed("mdns") {
			ss.fed.mdns = ff.MDNS
		}
		ss.fed.index.MaxPerHost = ff.MaxEntriesPerHost
		ss.fed.limits.Conns, ss.fed.limits.PeerConns = ff.MaxConns, ff.MaxConnsPerPeer
		if ff.Announce != "" {
			d, err := time.ParseDuration(ff.Announce)
			if err != nil || d <= 0 {
				return nil, withCode(exitUsage, fmt.Errorf("federation.announce_interval %q: want a positive duration like 30s", ff.Announce))
			}
			ss.fed.interval = d
		}
	}
	ss.fed.http = httpOpts
	ss.fed.tls = ss.tls
	ss.fed.allowPrivatePeers, ss.fed.deprecatedPeersAllow = ss.allowPrivatePeers, ss.deprecatedPeersAllow
	ss.fed.mirrorMaxRooms, ss.fed.mirrorMaxBytes = ss.mirrorMaxRooms, ss.mirrorMaxBytes
	for _, p := range ss.fed.peers {
		if strings.ContainsAny(p, "<>") || !strings.Contains(p, "/p2p/") {
			return nil, withCode(exitUsage, fmt.Errorf("peer %q: want a multiaddr ending in /p2p/<peer id>", p))
		}
	}
	for _, p := range ss.fed.bootstrap {
		if _, err := peer.AddrInfoFromString(p); err != nil || strings.ContainsAny(p, "<>") {
			return nil, withCode(exitUsage, fmt.Errorf("bootstrap %q: want a multiaddr ending in /p2p/<peer id>", p))
		}
	}
	if ss.fed.dht, err = federation.ParseDHTMode(dhtMode); err != nil {
		return nil, withCode(exitUsage, err)
	}
	// A node with a public URL listens on every interface unless told
	// where to listen (startStack says so).
	if !listenGiven && !loopbackURL(publicURL) {
		ss.fed.listen, ss.fed.listenAll = publicListen, true
	}
	return ss, nil
}

// applyEnv sets every flag not given on the command line from its
// ADPNODE_<FLAG> environment variable (dashes become underscores), so the
// precedence is: flag, environment, config file, default. Repeatable flags
// take comma-separated values.
func applyEnv(cmd *cobra.Command) error {
	var err error
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if f.Changed || err != nil {
			return
		}
		name := "ADPNODE_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		v, ok := os.LookupEnv(name)
		if !ok {
			return
		}
		if sv, isSlice := f.Value.(pflag.SliceValue); isSlice {
			err = sv.Replace(strings.Split(v, ","))
			f.Changed = true
			return
		}
		if e := cmd.Flags().Set(f.Name, v); e != nil {
			err = fmt.Errorf("%s: %w", name, e)
		}
	})
	return err
}

// fedSettings are the federation settings of serve.
type fedSettings struct {
	enabled   bool
	listen    []string
	listenAll bool // listen is publicListen because public_url is not loopback
	peers     []string
	bootstrap []string
	dht       federation.DHTMode
	nat       federation.NATOptions
	mdns      bool
	interval  time.Duration
	// http are the HTTP edge's timeouts and caps (not federation, but
	// carried with the other serve settings).
	http   hostapi.HTTPOptions
	tls    tlsSettings
	limits federation.Limits
	index  index.Limits

	allowPrivatePeers    bool
	deprecatedPeersAllow bool
	mirrorMaxRooms       int
	mirrorMaxBytes       int64
	// witnesses receive the host log's checkpoints (--witness).
	witnesses []witness.Target
	// witnessAnnounce is how often the mirror announces its witness
	// (zero: mirror's default; tests shorten it).
	witnessAnnounce time.Duration
}

// hostLogCheckpoint is the host log's checkpoint interval (zero: tlog's
// default, 1 s). Tests shorten it: closing a node waits for a checkpoint
// covering everything logged.
var hostLogCheckpoint time.Duration

// publicListen are the libp2p listen addresses of a node whose public_url
// is not loopback: every interface, TCP and QUIC, IPv4 and IPv6.
var publicListen = []string{"/ip4/0.0.0.0/tcp/4001", "/ip4/0.0.0.0/udp/4001/quic-v1", "/ip6/::/tcp/4001", "/ip6/::/udp/4001/quic-v1"}

// loopbackURL reports whether u's host is localhost or a loopback address
// (an unparsable URL counts as loopback: nothing changes for it).
func loopbackURL(u string) bool {
	pu, err := url.Parse(u)
	if err != nil {
		return true
	}
	host := pu.Hostname()
	ip := net.ParseIP(host)
	return host == "localhost" || strings.HasSuffix(host, ".localhost") || ip != nil && ip.IsLoopback()
}

// privatePeersHint is the switch that lets federation check host bindings
// of loopback and private origins.
const privatePeersHint = "set --allow-private-peers (config: allow_private_peers: true)"

// warnPrivatePeers logs, once at start, what federation will not do on
// a loopback or private network unless private peers are allowed, and the
// deprecation of allow_private_packs standing in for that switch.
func warnPrivatePeers(log *slog.Logger, fs fedSettings, publicURL string) {
	if fs.deprecatedPeersAllow {
		log.Warn("allow_private_packs also allows private peers for now; this is deprecated: " + privatePeersHint +
			" for federation, and keep allow_private_packs only for packs")
	}
	if fs.allowPrivatePeers {
		return
	}
	u, err := url.Parse(publicURL)
	if err != nil {
		return
	}
	host := u.Hostname()
	ip := net.ParseIP(host)
	if host == "localhost" || ip != nil && (ip.IsLoopback() || ip.IsPrivate() || ip.IsLinkLocalUnicast() || ip.IsUnspecified()) {
		log.Warn("public URL is a loopback or private address: peers on such origins cannot have their host bindings checked, "+
			"so their rooms stay unverified; "+privatePeersHint, "public_url", publicURL)
	}
}

// stack is one running node (internal/stack) with what serve adds: the
// address it serves on, TLS and the ACME http-01 challenge server. It is
// what serve runs, and what devnet runs three of.
type stack struct {
	*istack.Stack
	n    *node.Node
	fed  *federation.Federation
	mir  *mirror.Mirror
	tl   *tlog.Log
	sub  *witness.Submitter
	addr string
	ln   net.Listener // the HTTP(S) listener, with the connection cap
	// scheme is https when the node terminates TLS, else http.
	scheme string
	// challenge answers ACME http-01 challenges (nil unless --acme-http).
	challenge     *http.Server
	challengeAddr string
}

// startStack opens the node and starts everything around it.
func startStack(cfg node.Config, listen string, fs fedSettings, log *slog.Logger) (*stack, error) {
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, err
	}
	sc := istack.Config{Node: cfg, HTTP: fs.http, Log: log}
	if fs.enabled {
		if fs.listenAll {
			log.Info("libp2p listens on all interfaces because public_url is not loopback (set --p2p-listen to choose)",
				"public_url", cfg.PublicURL, "p2p_listen", fs.listen)
		}
		sc.Federation = &federation.Config{ListenAddrs: fs.listen, Peers: fs.peers, MDNS: fs.mdns,
			Bootstrap: fs.bootstrap, DHT: fs.dht, NAT: fs.nat, PeerCache: filepath.Join(cfg.DataDir, "peers.json"),
			AllowPrivateAddrs: fs.allowPrivatePeers, AnnounceInterval: fs.interval, AllowPrivateOrigins: fs.allowPrivatePeers, PrivateOriginsHint: privatePeersHint,
			Limits: fs.limits, Index: fs.index, Log: log}
		sc.Mirror = &mirror.Config{Log: log, MaxRooms: fs.mirrorMaxRooms, MaxBytes: fs.mirrorMaxBytes, AnnounceWitnessEvery: fs.witnessAnnounce}
	}
	// Every node keeps a host log; the submitter always runs: it serves
	// the stored cosignatures and submits to configured (--witness) and
	// discovered witnesses (mirrors announcing on federation).
	sc.HostLog = &istack.HostLogConfig{Witnesses: fs.witnesses, Discover: true, CheckpointInterval: hostLogCheckpoint}
	st, err := istack.Open(sc)
	if err != nil {
		return nil, err
	}
	s := &stack{Stack: st, n: st.Node, fed: st.Fed, mir: st.Mir, tl: st.HostLog, sub: st.Witness}
	if fs.enabled {
		warnPrivatePeers(log, fs, cfg.PublicURL)
	}
	ts, err := setupTLS(fs.tls, cfg.DataDir, fs.http, log)
	if err != nil {
		s.close()
		return nil, err
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		if ts != nil && ts.httpLn != nil {
			ts.httpLn.Close()
		}
		s.close()
		return nil, err
	}
	s.addr = ln.Addr().String()
	s.scheme = "http"
	if ts != nil {
		s.scheme = "https"
		s.Server.TLSConfig = ts.config
		// Failed handshakes (scanners, names outside --acme-domain) are
		// routine on an open port: debug level.
		s.Server.ErrorLog = slog.NewLogLogger(log.Handler(), slog.LevelDebug)
		disableHTTP2(s.Server)
	}
	s.Serve(ln)
	s.ln = s.Listener
	if ts != nil && ts.httpSrv != nil {
		s.challenge = ts.httpSrv
		s.challengeAddr = ts.httpLn.Addr().String()
		go func() {
			if err := ts.httpSrv.Serve(ts.httpLn); !errors.Is(err, http.ErrServerClosed) {
				s.Fail(fmt.Errorf("acme http-01 server: %w", err))
			}
		}()
	}
	log.Info("adpnode serving", "listen", s.addr, "scheme", s.scheme, "public_url", s.n.Origin(), "data", cfg.DataDir)
	return s, nil
}

// close stops the ACME challenge server and the stack (stack.Close: drain
// live streams, stop taking requests, let writes in flight finish, flush
// storage).
func (s *stack) close() error {
	if s.challenge != nil {
		s.challenge.Close()
	}
	return s.Close()
}

func serve(ctx context.Context, cfg node.Config, listen string, fs fedSettings, log *slog.Logger) error {
	s, err := startStack(cfg, listen, fs, log)
	if err != nil {
		return err
	}
	if s.fed != nil {
		for _, a := range s.fed.Addrs() {
			fmt.Fprintf(os.Stderr, "adpnode: libp2p %s\n", a)
		}
	}
	fmt.Fprintf(os.Stderr, "adpnode: serving %s://%s (public URL %s, data %s)\n", s.scheme, s.addr, s.n.Origin(), cfg.DataDir)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sig)
	select {
	case sg := <-sig:
		log.Info("shutting down", "signal", sg.String())
	case err := <-s.Err():
		if !errors.Is(err, http.ErrServerClosed) {
			s.close()
			return err
		}
	case <-ctx.Done():
	}
	return s.close()
}
