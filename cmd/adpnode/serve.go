package main

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"go.yaml.in/yaml/v3"

	"github.com/adpnode/adpnode/adp/identity"
	"github.com/adpnode/adpnode/adp/record"
	"github.com/adpnode/adpnode/federation"
	"github.com/adpnode/adpnode/hostapi"
	"github.com/adpnode/adpnode/index"
	"github.com/adpnode/adpnode/metrics"
	"github.com/adpnode/adpnode/mirror"
	"github.com/adpnode/adpnode/node"
)

// fileConfig is the YAML configuration file; flags override it.
type fileConfig struct {
	Listen    string `yaml:"listen"`
	PublicURL string `yaml:"public_url"`
	Data      string `yaml:"data"`
	LogLevel  string `yaml:"log_level"`
	Rates     *struct {
		Message int  `yaml:"message"`
		Signal  int  `yaml:"signal"`
		Control int  `yaml:"control"`
		Create  *int `yaml:"room_create"`
	} `yaml:"rates"`
	MaxBodyBytes      int64 `yaml:"max_body_bytes"`
	AllowPrivatePacks bool  `yaml:"allow_private_packs"`
	Federation        *struct {
		Enabled  *bool    `yaml:"enabled"`
		Listen   []string `yaml:"listen"`
		Peers    []string `yaml:"peers"`
		MDNS     bool     `yaml:"mdns"`
		Announce string   `yaml:"announce_interval"`
	} `yaml:"federation"`
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
	f.Bool("no-federation", false, "run without libp2p federation")
	f.StringArray("p2p-listen", []string{"/ip4/127.0.0.1/tcp/4001", "/ip4/127.0.0.1/udp/4001/quic-v1"},
		"libp2p listen multiaddr (repeatable)")
	f.StringArray("peer", nil, "static peer multiaddr ending in /p2p/<peer id> (repeatable; replaces the file's peers)")
	f.Bool("mdns", false, "discover peers on the local network with mDNS (--mdns=false turns the file's setting off)")
}

// serveSettings are the effective settings of serve: flags, then
// environment, then config file, then defaults.
type serveSettings struct {
	cfg      node.Config
	listen   string
	logLevel string
	level    slog.Level
	fed      fedSettings
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
	publicURL, _ := fl.GetString("public-url")
	switch {
	case fl.Changed("public-url"):
	case fc.PublicURL != "" && !(fl.Changed("listen") && strings.TrimSuffix(fc.PublicURL, "/") == "http://"+fc.Listen):
		publicURL = fc.PublicURL
	default:
		publicURL = "http://" + ss.listen
	}
	if u, err := url.Parse(publicURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, withCode(exitUsage, fmt.Errorf("public_url %q must be an origin like https://adp.example.org", publicURL))
	}
	if _, _, err := net.SplitHostPort(ss.listen); err != nil {
		return nil, withCode(exitUsage, fmt.Errorf("listen %q: %w", ss.listen, err))
	}
	ss.logLevel = pick("log-level", fc.LogLevel)
	if err := ss.level.UnmarshalText([]byte(ss.logLevel)); err != nil {
		return nil, withCode(exitUsage, fmt.Errorf("log_level: %w", err))
	}
	if fc.MaxBodyBytes < 0 {
		return nil, withCode(exitUsage, fmt.Errorf("max_body_bytes must not be negative"))
	}
	ss.cfg = node.Config{PublicURL: publicURL, DataDir: pick("data", fc.Data), MaxBodyBytes: fc.MaxBodyBytes}
	allow, _ := fl.GetBool("allow-private-packs")
	if fl.Changed("allow-private-packs") {
		ss.cfg.Packs.AllowPrivate = allow
	} else {
		ss.cfg.Packs.AllowPrivate = allow || fc.AllowPrivatePacks
	}
	if fc.Rates != nil {
		ss.cfg.Rates = node.DefaultRates()
		ss.cfg.Rates.Message, ss.cfg.Rates.Signal, ss.cfg.Rates.Control = fc.Rates.Message, fc.Rates.Signal, fc.Rates.Control
		if fc.Rates.Create != nil {
			ss.cfg.Rates.Create = *fc.Rates.Create
		}
		if ss.cfg.Rates.Message < 0 || ss.cfg.Rates.Signal < 0 || ss.cfg.Rates.Control < 0 || ss.cfg.Rates.Create < 0 {
			return nil, withCode(exitUsage, fmt.Errorf("rates must not be negative"))
		}
	}
	noFed, _ := fl.GetBool("no-federation")
	p2pListen, _ := fl.GetStringArray("p2p-listen")
	peers, _ := fl.GetStringArray("peer")
	mdnsOn, _ := fl.GetBool("mdns")
	ss.fed = fedSettings{enabled: !noFed, listen: p2pListen, peers: peers, mdns: mdnsOn, interval: 30 * time.Second}
	if ff := fc.Federation; ff != nil {
		if ff.Enabled != nil && !fl.Changed("no-federation") {
			ss.fed.enabled = *ff.Enabled
		}
		if !fl.Changed("p2p-listen") && len(ff.Listen) > 0 {
			ss.fed.listen = ff.Listen
		}
		if !fl.Changed("peer") {
			ss.fed.peers = ff.Peers
		}
		if !fl.Changed("mdns") {
			ss.fed.mdns = ff.MDNS
		}
		if ff.Announce != "" {
			d, err := time.ParseDuration(ff.Announce)
			if err != nil || d <= 0 {
				return nil, withCode(exitUsage, fmt.Errorf("federation.announce_interval %q: want a positive duration like 30s", ff.Announce))
			}
			ss.fed.interval = d
		}
	}
	for _, p := range ss.fed.peers {
		if strings.ContainsAny(p, "<>") || !strings.Contains(p, "/p2p/") {
			return nil, withCode(exitUsage, fmt.Errorf("peer %q: want a multiaddr ending in /p2p/<peer id>", p))
		}
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
	enabled  bool
	listen   []string
	peers    []string
	mdns     bool
	interval time.Duration
}

// stack is one running node with its federation peer, mirror and HTTP
// server: what serve runs, and what devnet runs three of.
type stack struct {
	n    *node.Node
	fed  *federation.Federation
	mir  *mirror.Mirror
	srv  *http.Server
	errc chan error
	addr string
	log  *slog.Logger
}

// startStack opens the node and starts everything around it.
func startStack(cfg node.Config, listen string, fs fedSettings, log *slog.Logger) (*stack, error) {
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, err
	}
	n, err := node.Open(cfg)
	if err != nil {
		return nil, err
	}
	s := &stack{n: n, log: log, errc: make(chan error, 1)}
	met := metrics.New(n)
	opts := hostapi.Options{Log: log, Metrics: met}
	if fs.enabled {
		key, err := federation.LoadOrCreateKey(cfg.DataDir)
		if err != nil {
			s.close()
			return nil, err
		}
		idx, err := index.Open(n.DB(), identity.AgentIDFromKey(key.Public().(ed25519.PublicKey)), n.NowMs())
		if err != nil {
			s.close()
			return nil, err
		}
		s.fed, err = federation.Start(federation.Config{Key: key, ListenAddrs: fs.listen, Peers: fs.peers, MDNS: fs.mdns,
			AnnounceInterval: fs.interval, AllowPrivateOrigins: cfg.Packs.AllowPrivate, Log: log}, n, idx)
		if err != nil {
			s.close()
			return nil, err
		}
		opts.Federation = s.fed
		met.AttachFederation(s.fed)
		onVerified := func(_ string, rec *record.Record) {
			met.ObserveMirrorLag(time.Duration(n.NowMs()-rec.ReceivedAt) * time.Millisecond)
		}
		if s.mir, err = mirror.Open(mirror.Config{Log: log, OnVerified: onVerified}, n, s.fed, idx); err != nil {
			s.close()
			return nil, err
		}
		opts.Mirror = s.mir
		met.AttachMirror(s.mir)
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		s.close()
		return nil, err
	}
	s.addr = ln.Addr().String()
	s.srv = &http.Server{Handler: hostapi.New(n, opts).Handler(), ReadHeaderTimeout: 10 * time.Second}
	go func() { s.errc <- s.srv.Serve(ln) }()
	log.Info("adpnode serving", "listen", s.addr, "public_url", n.Origin(), "data", cfg.DataDir)
	return s, nil
}

// close drains live streams (they never end on their own), stops taking
// requests, lets writes in flight finish, then flushes storage.
func (s *stack) close() error {
	s.n.DrainStreams()
	s.n.DrainViewers()
	if s.srv != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.srv.Shutdown(ctx); err != nil {
			s.log.Warn("http shutdown", "err", err)
		}
	}
	if s.mir != nil {
		s.mir.Close()
	}
	if s.fed != nil {
		s.fed.Close()
	}
	return s.n.Close()
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
	fmt.Fprintf(os.Stderr, "adpnode: serving %s (public URL %s, data %s)\n", s.addr, s.n.Origin(), cfg.DataDir)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sig)
	select {
	case sg := <-sig:
		log.Info("shutting down", "signal", sg.String())
	case err := <-s.errc:
		if !errors.Is(err, http.ErrServerClosed) {
			s.close()
			return err
		}
	case <-ctx.Done():
	}
	return s.close()
}
