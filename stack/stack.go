// Package stack is the composition root: it builds one running adpnode —
// node, gossiped index, federation peer, mirror, attention, metrics, the
// host log with its witness submitter, and the HTTP API server with the
// production wiring (timeouts, connection cap,
// stream draining) — from one Config, and closes it in order. serve, the
// devnet command and every multi-node test run it, so tests exercise the
// wiring production runs. It is the only package besides the commands that
// knows the concrete types; the layers it wires take interfaces
// (federation.Host, mirror.Host, attention.Host, metrics.Source,
// hostapi.Mirror, hostapi.HostLog, metrics.Federation, ...), wired here.
package stack

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/adpnode/adpnode/adp/identity"
	"github.com/adpnode/adpnode/adp/record"
	"github.com/adpnode/adpnode/attention"
	"github.com/adpnode/adpnode/federation"
	"github.com/adpnode/adpnode/hostapi"
	"github.com/adpnode/adpnode/hostlog"
	"github.com/adpnode/adpnode/index"
	"github.com/adpnode/adpnode/internal/optoken"
	"github.com/adpnode/adpnode/internal/safehttp"
	"github.com/adpnode/adpnode/metrics"
	"github.com/adpnode/adpnode/mirror"
	"github.com/adpnode/adpnode/node"
	"github.com/adpnode/adpnode/profilecache"
	"github.com/adpnode/adpnode/witness"
)

// NodeConfig is the host's configuration (package node's Config) and
// Rates its write quotas: test helpers and tools build a stack from them
// here, so that the concrete host stays known to this package and the
// commands alone.
type (
	NodeConfig = node.Config
	Rates      = node.Rates
)

// DefaultRates are the host's default write quotas (node.DefaultRates).
func DefaultRates() Rates { return node.DefaultRates() }

// Config is what one running adpnode is built from.
type Config struct {
	Node NodeConfig
	// Federation, if set, starts a federation peer; its Key is loaded
	// from (or created in) KeyDir when nil.
	Federation *federation.Config
	// KeyDir holds the federation key (node.key); "" is Node.DataDir.
	KeyDir string
	// Mirror, if set, opens a mirror (it needs Federation). Its
	// OnVerified, if any, runs after the stack's own hook (mirror lag,
	// attention).
	Mirror *mirror.Config
	// TokenDir holds the operator token (operator.token), created if
	// missing; "" is Node.DataDir, and with neither (an in-memory node)
	// there is no operator token.
	TokenDir string
	// API are the HTTP API's options; the stack fills in Federation,
	// Mirror, Attention, Metrics, OperatorToken, HTTP and Log.
	API hostapi.Options
	// HTTP are the HTTP edge's timeouts and caps.
	HTTP hostapi.HTTPOptions
	// HostLog, if set, keeps the host log and runs its witness submitter
	// (it needs Node.DataDir).
	HostLog *HostLogConfig
	// ShutdownTimeout bounds Close's wait for requests in flight (zero:
	// 10 s).
	ShutdownTimeout time.Duration
	Log             *slog.Logger
}

// Stack is one running adpnode.
type Stack struct {
	Node  *node.Node
	Index *index.Index // nil without federation
	Fed   *federation.Federation
	Mir   *mirror.Mirror
	Att   *attention.Attention
	Met   *metrics.Metrics
	API   *hostapi.Server
	// Server is the HTTP server of the API (hostapi.NewHTTPServer); Serve
	// runs it, or a caller runs it on a listener of its own.
	Server *http.Server
	// OperatorToken is the operator credential ("" without a TokenDir).
	OperatorToken string
	// Listener is what Serve serves on: the caller's listener with the
	// connection cap.
	Listener net.Listener
	// HostLog and Witness are the host log and its witness submitter
	// (nil without Config.HostLog).
	HostLog *hostlog.Log
	Witness *witness.Submitter
	// Profiles resolves the profiles of agents in rooms this node
	// mirrors or lists (nil without federation).
	Profiles *profilecache.Cache

	cfg     Config
	log     *slog.Logger
	fedKey  ed25519.PrivateKey
	errc    chan error
	serving bool
	once    sync.Once
	err     error
}

// Open opens the node and builds everything around it. Nothing serves
// HTTP until Serve. On error, whatever was opened is closed.
func Open(cfg Config) (_ *Stack, err error) {
	if cfg.Log == nil {
		cfg.Log = cfg.Node.Log
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.Node.Log == nil {
		cfg.Node.Log = cfg.Log
	}
	if cfg.ShutdownTimeout == 0 {
		cfg.ShutdownTimeout = 10 * time.Second
	}
	if cfg.KeyDir == "" {
		cfg.KeyDir = cfg.Node.DataDir
	}
	if cfg.TokenDir == "" {
		cfg.TokenDir = cfg.Node.DataDir
	}
	if cfg.Mirror != nil && cfg.Federation == nil {
		return nil, errors.New("stack: a mirror needs federation")
	}
	if cfg.HostLog != nil && (cfg.Node.DataDir == "" || cfg.Node.InMemory) {
		return nil, errHostLogInMemory
	}
	n, err := node.Open(cfg.Node)
	if err != nil {
		return nil, err
	}
	s := &Stack{Node: n, cfg: cfg, log: cfg.Log, errc: make(chan error, 2)}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	if cfg.TokenDir != "" {
		if s.OperatorToken, err = optoken.LoadOrCreate(cfg.TokenDir); err != nil {
			return nil, fmt.Errorf("operator token: %w", err)
		}
	}
	s.Met = metrics.New(n)
	directory := n.Summaries
	if cfg.Federation != nil {
		fc := *cfg.Federation
		if fc.Key == nil {
			if fc.Key, err = federation.LoadOrCreateKey(cfg.KeyDir); err != nil {
				return nil, err
			}
		}
		if fc.Log == nil {
			fc.Log = cfg.Log
		}
		s.fedKey = fc.Key
		if s.Index, err = index.Open(n.DB(), identity.AgentIDFromKey(fc.Key.Public().(ed25519.PublicKey)), n.NowMs()); err != nil {
			return nil, err
		}
		if s.Fed, err = federation.Start(fc, n, s.Index); err != nil {
			return nil, err
		}
		s.Met.AttachFederation(s.Fed)
		directory = s.Fed.Directory
	}
	if s.Fed != nil {
		// Profiles of agents in rooms this node mirrors or lists, from
		// their hosts (docs/profiles.md).
		s.Profiles = profilecache.New(profilecache.Config{Origins: s.profileOrigins, Now: cfg.Node.Now, Log: cfg.Log,
			Client: safehttp.Client(safehttp.Options{Timeout: profileFetchTimeout, AllowPrivate: cfg.Federation.AllowPrivateOrigins})})
		pc := s.Profiles
		s.Met.AttachProfiles(func() metrics.ProfileCacheStats {
			st := pc.Stats()
			return metrics.ProfileCacheStats{Entries: st.Entries, Bytes: st.Bytes, Fetches: st.Fetches, Refused: st.Refused}
		})
	}
	if cfg.Mirror != nil {
		mc := *cfg.Mirror
		if mc.Names == nil {
			mc.Names = s.profileNames
		}
		if mc.Log == nil {
			mc.Log = cfg.Log
		}
		// Room targets may name private hosts where peers' origins may.
		mc.AllowPrivateTargets = mc.AllowPrivateTargets || cfg.Federation.AllowPrivateOrigins
		if mc.WitnessKey == nil {
			mc.WitnessKey = s.fedKey // mirrors witness the logs of the hosts they mirror
		}
		user := mc.OnVerified
		// Lag is measured on live records only: a backfilled record's
		// age is how late the mirror was added, not replication lag.
		mc.OnVerified = func(roomID string, rec *record.Record, live bool) {
			if live {
				s.Met.ObserveMirrorLag(time.Duration(n.NowMs()-rec.ReceivedAt) * time.Millisecond)
			}
			if user != nil {
				user(roomID, rec, live)
			}
		}
		if s.Mir, err = mirror.Open(mc, n, s.Fed, s.Index); err != nil {
			return nil, err
		}
		s.Met.AttachMirror(s.Mir)
	}
	// Attention follows the node's change feed, and the mirror's.
	ac := attention.ForNode(n, directory, s.Index)
	if s.Mir != nil {
		ac.Mirror = mirrorSource{s.Mir}
	}
	if s.Att, err = attention.Open(ac); err != nil {
		return nil, err
	}
	s.Att.Attach(s.Index)
	opts := cfg.API
	// Only what runs: the options may be interfaces, and a typed nil
	// is not nil.
	if s.Fed != nil {
		opts.Federation = s.Fed
	}
	if s.Mir != nil {
		opts.Mirror = mirrorPort{s.Mir}
	}
	if s.Profiles != nil && opts.Profiles == nil {
		opts.Profiles = s.Profiles
	}
	opts.Attention, opts.Metrics = s.Att, s.Met
	opts.OperatorToken, opts.HTTP = s.OperatorToken, cfg.HTTP
	if cfg.HostLog != nil {
		if err = s.openHostLog(*cfg.HostLog, &opts); err != nil {
			return nil, err
		}
	}
	if opts.Log == nil {
		opts.Log = cfg.Log
	}
	s.API = hostapi.New(n, opts)
	s.Server = hostapi.NewHTTPServer(s.API.Handler(), cfg.HTTP)
	return s, nil
}

// Serve serves the API on ln (with the connection cap; TLS when
// s.Server.TLSConfig is set) until Close; a failure is sent on Err.
func (s *Stack) Serve(ln net.Listener) {
	ln = hostapi.LimitListener(ln, s.cfg.HTTP)
	s.Listener, s.serving = ln, true
	go func() {
		var err error
		if s.Server.TLSConfig != nil {
			err = s.Server.ServeTLS(ln, "", "")
		} else {
			err = s.Server.Serve(ln)
		}
		if !errors.Is(err, http.ErrServerClosed) {
			s.Fail(err)
		}
	}()
}

// Fail reports err on Err (a server of the caller's that belongs to the
// stack stopped, say); it never blocks.
func (s *Stack) Fail(err error) {
	select {
	case s.errc <- err:
	default:
	}
}

// Err receives the first failure of a server the stack runs.
func (s *Stack) Err() <-chan error { return s.errc }

// Close drains live streams (they never end on their own), stops taking
// requests and lets those in flight finish, then stops the mirror, the
// federation, attention, the witness submitter and the host log (which
// logs what it queued), and closes the node (writes in flight finish,
// storage is flushed). It is idempotent.
func (s *Stack) Close() error {
	s.once.Do(func() {
		s.Node.DrainStreams()
		s.Node.DrainViewers()
		if s.Att != nil {
			s.Att.DrainStreams()
		}
		if s.serving {
			ctx, cancel := context.WithTimeout(context.Background(), s.cfg.ShutdownTimeout)
			if err := s.Server.Shutdown(ctx); err != nil {
				// Requests still running (a mirror's live stream ends
				// only with the mirror): cut them off.
				s.log.Warn("http shutdown", "err", err)
				s.Server.Close()
			}
			cancel()
		}
		if s.Mir != nil {
			s.Mir.Close()
		}
		if s.Fed != nil {
			s.Fed.Close()
		}
		if s.Att != nil {
			s.Att.Close()
		}
		s.closeHostLog()
		s.err = s.Node.Close()
	})
	return s.err
}
