package main

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"

	"github.com/adpnode/adpnode/adp/identity"
	"github.com/adpnode/adpnode/federation"
	"github.com/adpnode/adpnode/hostapi"
	"github.com/adpnode/adpnode/index"
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
		Message int `yaml:"message"`
		Signal  int `yaml:"signal"`
		Control int `yaml:"control"`
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
	var cfgPath, listen, publicURL, data, logLevel string
	var allowPrivatePacks, noFederation, mdnsOn bool
	var p2pListen, peers []string
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run an ADP host (embedded Badger in the data dir; no other services)",
		Example: `  adpnode serve
  adpnode serve --listen 127.0.0.1:9000 --data ./data2
  adpnode serve --config configs/single.yaml`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var fc fileConfig
			if cfgPath != "" {
				b, err := os.ReadFile(cfgPath)
				if err != nil {
					return err
				}
				dec := yaml.NewDecoder(strings.NewReader(string(b)))
				dec.KnownFields(true)
				if err := dec.Decode(&fc); err != nil {
					return fmt.Errorf("%s: %w", cfgPath, err)
				}
			}
			pick := func(flag, file string) string {
				v, _ := cmd.Flags().GetString(flag)
				if cmd.Flags().Changed(flag) || file == "" {
					return v
				}
				return file
			}
			listen = pick("listen", fc.Listen)
			data = pick("data", fc.Data)
			logLevel = pick("log-level", fc.LogLevel)
			if publicURL = pick("public-url", fc.PublicURL); publicURL == "" {
				publicURL = "http://" + listen
			}
			var lvl slog.Level
			if err := lvl.UnmarshalText([]byte(logLevel)); err != nil {
				return err
			}
			log := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: lvl}))
			cfg := node.Config{PublicURL: publicURL, DataDir: data, Log: log, MaxBodyBytes: fc.MaxBodyBytes}
			cfg.Packs.AllowPrivate = allowPrivatePacks || fc.AllowPrivatePacks
			if fc.Rates != nil {
				cfg.Rates = node.DefaultRates()
				cfg.Rates.Message, cfg.Rates.Signal, cfg.Rates.Control = fc.Rates.Message, fc.Rates.Signal, fc.Rates.Control
			}
			fed := fedSettings{enabled: !noFederation, listen: p2pListen, peers: peers, mdns: mdnsOn, interval: 30 * time.Second}
			if fc.Federation != nil {
				ff := fc.Federation
				if ff.Enabled != nil && !cmd.Flags().Changed("no-federation") {
					fed.enabled = *ff.Enabled
				}
				if !cmd.Flags().Changed("p2p-listen") && len(ff.Listen) > 0 {
					fed.listen = ff.Listen
				}
				fed.peers = append(fed.peers, ff.Peers...)
				fed.mdns = fed.mdns || ff.MDNS
				if ff.Announce != "" {
					d, err := time.ParseDuration(ff.Announce)
					if err != nil {
						return fmt.Errorf("federation.announce_interval: %w", err)
					}
					fed.interval = d
				}
			}
			return serve(cmd.Context(), cfg, listen, fed, log)
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfgPath, "config", "", "YAML configuration file (flags override it)")
	f.StringVar(&listen, "listen", "127.0.0.1:8080", "HTTP listen address")
	f.StringVar(&publicURL, "public-url", "", "service origin: JWT audience and Room URL host (default http://<listen>)")
	f.StringVar(&data, "data", "./data", "data directory (Badger)")
	f.StringVar(&logLevel, "log-level", "info", "debug, info, warn or error")
	f.BoolVar(&allowPrivatePacks, "allow-private-packs", false, "allow external packs from loopback/private addresses and plain HTTP")
	f.BoolVar(&noFederation, "no-federation", false, "run without libp2p federation")
	f.StringArrayVar(&p2pListen, "p2p-listen", []string{"/ip4/127.0.0.1/tcp/4001", "/ip4/127.0.0.1/udp/4001/quic-v1"},
		"libp2p listen multiaddr (repeatable)")
	f.StringArrayVar(&peers, "peer", nil, "static peer multiaddr ending in /p2p/<peer id> (repeatable)")
	f.BoolVar(&mdnsOn, "mdns", false, "discover peers on the local network with mDNS")
	return cmd
}

// fedSettings are the federation settings of serve.
type fedSettings struct {
	enabled  bool
	listen   []string
	peers    []string
	mdns     bool
	interval time.Duration
}

func serve(ctx context.Context, cfg node.Config, listen string, fs fedSettings, log *slog.Logger) error {
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return err
	}
	n, err := node.Open(cfg)
	if err != nil {
		return err
	}
	opts := hostapi.Options{Log: log}
	var fed *federation.Federation
	var mir *mirror.Mirror
	if fs.enabled {
		key, err := federation.LoadOrCreateKey(cfg.DataDir)
		if err != nil {
			n.Close()
			return err
		}
		idx, err := index.Open(n.DB(), identity.AgentIDFromKey(key.Public().(ed25519.PublicKey)), n.NowMs())
		if err != nil {
			n.Close()
			return err
		}
		fed, err = federation.Start(federation.Config{Key: key, ListenAddrs: fs.listen, Peers: fs.peers, MDNS: fs.mdns,
			AnnounceInterval: fs.interval, AllowPrivateOrigins: cfg.Packs.AllowPrivate, Log: log}, n, idx)
		if err != nil {
			n.Close()
			return err
		}
		opts.Federation = fed
		mir, err = mirror.Open(mirror.Config{Log: log}, n, fed, idx)
		if err != nil {
			fed.Close()
			n.Close()
			return err
		}
		opts.Mirror = mir
		for _, a := range fed.Addrs() {
			fmt.Fprintf(os.Stderr, "adpnode: libp2p %s\n", a)
		}
	}
	api := hostapi.New(n, opts)
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		if fed != nil {
			fed.Close()
		}
		n.Close()
		return err
	}
	srv := &http.Server{Handler: api.Handler(), ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	log.Info("adpnode serving", "listen", ln.Addr().String(), "public_url", n.Origin(), "data", cfg.DataDir)
	fmt.Fprintf(os.Stderr, "adpnode: serving %s (public URL %s, data %s)\n", ln.Addr(), n.Origin(), cfg.DataDir)

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sig)
	select {
	case s := <-sig:
		log.Info("shutting down", "signal", s.String())
	case err := <-errc:
		if !errors.Is(err, http.ErrServerClosed) {
			if fed != nil {
				fed.Close()
			}
			n.Close()
			return err
		}
	case <-ctx.Done():
	}
	// Drain: end live streams first (they never finish on their own), stop
	// taking requests, let writes in flight finish, then flush storage.
	n.DrainStreams()
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		log.Warn("http shutdown", "err", err)
	}
	if mir != nil {
		mir.Close()
	}
	if fed != nil {
		fed.Close()
	}
	return n.Close()
}
