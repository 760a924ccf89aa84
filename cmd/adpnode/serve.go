package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/adpnode/adpnode/cmd/adpnode/internal/settings"
	"github.com/adpnode/adpnode/federation"
	"github.com/adpnode/adpnode/hostapi"
	"github.com/adpnode/adpnode/hostlog"
	"github.com/adpnode/adpnode/index"
	"github.com/adpnode/adpnode/mirror"
	"github.com/adpnode/adpnode/node"
	istack "github.com/adpnode/adpnode/stack"
	"github.com/adpnode/adpnode/witness"
)

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
			routeLibraryLogs(log)
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
	cmd.Flags().String("config", "", "YAML configuration file (flags override it; ADPNODE_CONFIG)")
	serveTable.Register(cmd.Flags())
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

	// vals are the effective values with their sources (config check).
	vals *settings.Values

	allowPrivatePeers    bool
	deprecatedPeersAllow bool // allowPrivatePeers comes from allow_private_packs
	mirrorMaxRooms       int
	mirrorMaxBytes       int64
}

// resolveServe computes the effective settings from the flags, the
// ADPNODE_ environment variables, the config file and the defaults
// (serveTable), then what depends on several of them: public_url is
// derived from the effective listen address unless given by flag or
// written in the file as something other than http://<file's listen>.
func resolveServe(cmd *cobra.Command) (*serveSettings, error) {
	fl := cmd.Flags()
	cfgPath, _ := fl.GetString("config")
	if env, ok := os.LookupEnv("ADPNODE_CONFIG"); ok && !fl.Changed("config") {
		cfgPath = env
	}
	var file []byte
	if cfgPath != "" {
		b, err := os.ReadFile(cfgPath)
		if err != nil {
			return nil, err
		}
		file = b
	}
	v, err := serveTable.Resolve(fl, os.LookupEnv, file)
	if err != nil {
		if cfgPath != "" {
			err = fmt.Errorf("%s: %w", cfgPath, err)
		}
		return nil, withCode(exitUsage, err)
	}
	ss, err := settingsFrom(v)
	if err != nil {
		return nil, withCode(exitUsage, err)
	}
	return ss, nil
}

// settingsFrom maps the effective values into the structs the node and
// the stack take, with the checks that span several settings.
func settingsFrom(v *settings.Values) (*serveSettings, error) {
	ss := &serveSettings{vals: v, listen: v.String("listen"), logLevel: v.String("log_level")}
	// log_level's own validation (validLogLevel) has already accepted it.
	if err := ss.level.UnmarshalText([]byte(ss.logLevel)); err != nil {
		return nil, fmt.Errorf("log_level: %w", err)
	}
	var err error
	if ss.tls, err = resolveTLS(tlsSettings{certFile: v.String("tls_cert"), keyFile: v.String("tls_key"),
		acmeDomains: v.List("acme_domains"), acmeEmail: v.String("acme_email"), acmeDirectory: v.String("acme_directory"),
		acmeCARoot: v.String("acme_ca_root"), acmeHTTP: v.String("acme_http")}); err != nil {
		return nil, err
	}
	publicURL := derivePublicURL(v, ss.tls)
	if err := validOrigin(publicURL); err != nil {
		return nil, fmt.Errorf("public_url: %w", err)
	}
	ss.cfg = node.Config{PublicURL: publicURL, DataDir: v.String("data"), MaxBodyBytes: v.Size("max_body_bytes"),
		Rates: ratesOf(v), JoinRequestTTL: v.Duration("join_request_ttl"), DiskReserveBytes: v.Size("disk_reserve")}
	ss.cfg.Packs.AllowPrivate = v.Bool("allow_private_packs")
	ss.allowPrivatePeers = v.Bool("allow_private_peers")
	if !v.Given("allow_private_peers") && ss.cfg.Packs.AllowPrivate {
		// Before allow_private_peers existed, allow_private_packs also
		// opened federation's binding checks; an old config keeps working.
		ss.allowPrivatePeers, ss.deprecatedPeersAllow = true, true
		v.Set("allow_private_peers", true, settings.FromDerived)
	}
	ss.mirrorMaxRooms, ss.mirrorMaxBytes = v.Int("mirror_max_rooms"), v.Size("mirror_max_bytes")
	if ss.fed, err = fedFrom(v); err != nil {
		return nil, err
	}
	ss.fed.http = hostapi.HTTPOptions{MaxConnections: v.Int("max_connections"), MaxConnectionsPerAddress: v.Int("max_connections_per_address")}
	ss.fed.tls = ss.tls
	ss.fed.allowPrivatePeers, ss.fed.deprecatedPeersAllow = ss.allowPrivatePeers, ss.deprecatedPeersAllow
	ss.fed.mirrorMaxRooms, ss.fed.mirrorMaxBytes = ss.mirrorMaxRooms, ss.mirrorMaxBytes
	// A node with a public URL listens on every interface unless told
	// where to listen (startStack says so).
	if !v.Given("federation.listen") && !loopbackURL(publicURL) {
		ss.fed.listen, ss.fed.listenAll = publicListen, true
		v.Set("federation.listen", publicListen, settings.FromDerived)
	}
	return ss, nil
}

// derivePublicURL is public_url's effective value: the flag or
// environment; else the file's, unless the file only restates
// http(s)://<its listen> and listen was given elsewhere; else derived from
// listen and TLS.
func derivePublicURL(v *settings.Values, ts tlsSettings) string {
	pv := v.Get("public_url")
	fileURL, fileListen := strings.TrimSuffix(v.FileText("public_url"), "/"), v.FileText("listen")
	restated := fileURL == "http://"+fileListen || fileURL == "https://"+fileListen
	listenElsewhere := v.Get("listen").Source == settings.FromFlag || v.Get("listen").Source == settings.FromEnv
	if pv.Source == settings.FromFlag || pv.Source == settings.FromEnv || pv.Source == settings.FromFile && !(restated && listenElsewhere) {
		return pv.V.(string)
	}
	u := ts.defaultPublicURL(v.String("listen"))
	v.Set("public_url", u, settings.FromDerived)
	return u
}

// ratesOf reads the rates: block (every limit spelled out as 0: no
// quotas at all).
func ratesOf(v *settings.Values) node.Rates {
	r := node.Rates{Message: v.Int("rates.message"), Signal: v.Int("rates.signal"), Control: v.Int("rates.control"),
		MessageCeiling: v.Int("rates.message_ceiling"), SignalCeiling: v.Int("rates.signal_ceiling"),
		ControlCeiling: v.Int("rates.control_ceiling"), AgentStatus: v.Int("rates.agent_status"),
		Create: v.Int("rates.room_create"), JoinRequests: v.Int("rates.join_requests_per_hour")}
	if r == (node.Rates{}) {
		// Config.Defaults reads an all-zero Rates as unset.
		return node.NoRates()
	}
	// Profile updates per agent: not a setting (docs/profiles.md).
	r.Profile = node.DefaultRates().Profile
	return r
}

// fedFrom maps the federation: settings and the witnesses.
func fedFrom(v *settings.Values) (fedSettings, error) {
	fs := fedSettings{enabled: v.Bool("federation.enabled"), listen: v.List("federation.listen"), peers: v.List("federation.peers"),
		mdns: v.Bool("federation.mdns"), interval: v.Duration("federation.announce_interval"), bootstrap: v.List("federation.bootstrap")}
	fs.dht, _ = federation.ParseDHTMode(v.String("federation.dht"))
	fs.limits = federation.Limits{ConnLow: v.Int("federation.conn_low"), ConnHigh: v.Int("federation.conn_high"),
		Conns: v.Int("federation.max_conns"), PeerConns: v.Int("federation.max_conns_per_peer")}
	if fs.limits.ConnLow > fs.limits.ConnHigh {
		return fs, fmt.Errorf("federation.conn_low %d / federation.conn_high %d: want conn_low ≤ conn_high", fs.limits.ConnLow, fs.limits.ConnHigh)
	}
	fs.index.MaxPerHost = v.Int("federation.max_entries_per_host")
	fs.nat = federation.NATOptions{NoHolePunching: !v.Bool("federation.nat.hole_punching"), NoRelayClient: !v.Bool("federation.nat.relay_client"),
		RelayService: v.Bool("federation.nat.relay_service"), AutoNATService: v.Bool("federation.nat.autonat_service"),
		PortMap: v.Bool("federation.nat.port_map"), Reachability: v.String("federation.nat.reachability")}
	for _, w := range v.List("witnesses") {
		tg, _ := witness.ParseTarget(w) // validated by the table
		fs.witnesses = append(fs.witnesses, tg)
	}
	return fs, nil
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

// stack is one running node (stack) with what serve adds: the
// address it serves on, TLS and the ACME http-01 challenge server. It is
// what serve runs, and what devnet runs three of.
type stack struct {
	*istack.Stack
	n    *node.Node
	fed  *federation.Federation
	mir  *mirror.Mirror
	tl   *hostlog.Log
	sub  *witness.Submitter
	addr string
	ln   net.Listener // the HTTP(S) listener, with the connection cap
	// scheme is https when the node terminates TLS, else http.
	scheme string
	// challenge answers ACME http-01 challenges (nil unless --acme-http).
	challenge     *http.Server
	challengeAddr string
	// urlFile is DATA/serve.url while the node serves ("" when not
	// written).
	urlFile string
}

// serveURLFile is the file in the data dir that names, while a node
// serves, the URL commands on this machine reach it at (backup --data,
// mirror and peers with --data): written once the node listens, removed
// when it stops cleanly. A node killed leaves it behind; the next start
// rewrites it.
const serveURLFile = "serve.url"

// localURL is the URL a command on this machine reaches the node at: over
// plain HTTP, the address it listens on (an unspecified address is reached
// on loopback); over TLS, the public URL, which its certificate names
// (unless it names port 0: listen's port was chosen at start).
func localURL(scheme, addr, publicURL string) string {
	if u, err := url.Parse(publicURL); scheme == "https" && err == nil && u.Port() != "0" {
		return publicURL
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return scheme + "://" + addr
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
		if ip != nil && ip.To4() == nil {
			host = "::1"
		}
	}
	return scheme + "://" + net.JoinHostPort(host, port)
}

// writeServeURL writes DATA/serve.url (atomically).
func writeServeURL(dataDir, u string) (string, error) {
	path := filepath.Join(dataDir, serveURLFile)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(u+"\n"), 0o644); err != nil {
		return "", err
	}
	return path, os.Rename(tmp, path)
}

// startStack opens the node and starts everything around it.
func startStack(cfg node.Config, listen string, fs fedSettings, log *slog.Logger) (*stack, error) {
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, err
	}
	// A public URL naming port 0 (derived from --listen host:0) names the
	// port the system picks: listen first, so that room URLs, the
	// announcements and the host's origin carry a port one can reach.
	var early net.Listener
	if u, err := url.Parse(cfg.PublicURL); err == nil && u.Port() == "0" {
		if _, lport, err := net.SplitHostPort(listen); err == nil && lport == "0" {
			ln, err := net.Listen("tcp", listen)
			if err != nil {
				return nil, err
			}
			_, port, _ := net.SplitHostPort(ln.Addr().String())
			u.Host = net.JoinHostPort(u.Hostname(), port)
			cfg.PublicURL, early = u.String(), ln
		}
	}
	closeEarly := func() {
		if early != nil {
			early.Close()
		}
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
		closeEarly()
		return nil, err
	}
	s := &stack{Stack: st, n: st.Node, fed: st.Fed, mir: st.Mir, tl: st.HostLog, sub: st.Witness}
	if fs.enabled {
		warnPrivatePeers(log, fs, cfg.PublicURL)
	}
	ts, err := setupTLS(fs.tls, cfg.DataDir, fs.http, log)
	if err != nil {
		closeEarly()
		s.close()
		return nil, err
	}
	ln := early
	if ln == nil {
		ln, err = net.Listen("tcp", listen)
	}
	if err != nil {
		if ts != nil && ts.httpLn != nil {
			ts.httpLn.Close()
		}
		s.close()
		return nil, err
	}
	s.addr = ln.Addr().String()
	s.scheme = "http"
	// What net/http reports of a connection (a handler's misuse of the
	// writer, a panic) is a warning in the node's log.
	s.Server.ErrorLog = slog.NewLogLogger(log.Handler(), slog.LevelWarn)
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
	local := localURL(s.scheme, s.addr, s.n.Origin())
	if s.urlFile, err = writeServeURL(cfg.DataDir, local); err != nil {
		log.Warn("cannot record the node's URL in the data dir: backup --data will need --node", "file", serveURLFile, "err", err)
		s.urlFile = ""
	}
	attrs := []any{"listen", s.addr, "scheme", s.scheme, "public_url", s.n.Origin(), "data", cfg.DataDir, "local_url", local}
	if s.fed != nil {
		// The DHT mode in effect, not only the one configured.
		d := s.fed.Discovery()
		attrs = append(attrs, "libp2p", s.fed.Addrs(), "dht", d.DHT, "dht_configured", d.DHTConfigured,
			"bootstrap_peers", d.Bootstrap, "static_peers", d.Static)
	}
	log.Info("adpnode serving", attrs...)
	return s, nil
}

// close stops the ACME challenge server and the stack (stack.Close: drain
// live streams, stop taking requests, let writes in flight finish, flush
// storage).
func (s *stack) close() error {
	if s.urlFile != "" {
		// First: a command reading it must not find a node that is going.
		_ = os.Remove(s.urlFile)
		s.urlFile = ""
	}
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
