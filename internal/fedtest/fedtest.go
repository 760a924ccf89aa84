// Package fedtest runs federated adpnode peers in one test process, on
// 127.0.0.1 only: node, index, federation, optional mirror, and the HTTP
// API, with helpers to connect them, write and wait.
package fedtest

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/adpnode/adpnode/federation"
	"github.com/adpnode/adpnode/hostport"
	"github.com/adpnode/adpnode/internal/adptest"
	"github.com/adpnode/adpnode/internal/testwait"
	"github.com/adpnode/adpnode/mirror"
	"github.com/adpnode/adpnode/stack"
)

// Options tune a peer. The zero value is the default test peer.
type Options struct {
	Rates            stack.Rates   // zero: node defaults
	AnnounceInterval time.Duration // zero: 2 s
	// P2PListen are the libp2p listen addresses (zero: a free TCP port).
	P2PListen []string
	// ReconcileInterval is the anti-entropy period (zero: the default).
	ReconcileInterval time.Duration
	Log               *slog.Logger
	Mirror            bool // run a mirror
	MirrorConfig      mirror.Config
	// HostLog, if set, keeps the host log and runs its witness submitter
	// (p.HostLog, p.Witness). Off by default: its integration costs CPU
	// that multi-peer tests under -race can ill afford.
	HostLog *stack.HostLogConfig
	// Configure, when set, adjusts the federation config last (dir is
	// the peer's directory).
	Configure func(dir string, c *federation.Config)
}

// Peer is one federated node, built by the composition root serve runs
// (stack), whose parts it carries: p.Node, p.Index, p.Fed,
// p.Mir, p.Att, p.Met and p.OperatorToken (dir/operator.token) are the
// stack's.
type Peer struct {
	*stack.Stack
	Name  string
	Dir   string
	Port  int
	URL   string
	Clock *adptest.Clock
	opts  Options
}

// Start starts a peer with a durable store in dir and its HTTP API on
// 127.0.0.1:port (0 picks one). It is stopped in t.Cleanup.
func Start(t testing.TB, name, dir string, clock *adptest.Clock, port int, o Options) *Peer {
	t.Helper()
	if o.AnnounceInterval == 0 {
		o.AnnounceInterval = 2 * time.Second
	}
	ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		t.Fatal(err)
	}
	port = ln.Addr().(*net.TCPAddr).Port
	origin := fmt.Sprintf("http://127.0.0.1:%d", port)
	listen := o.P2PListen
	if len(listen) == 0 {
		listen = []string{"/ip4/127.0.0.1/tcp/0"}
	}
	cfg := stack.Config{
		Node: stack.NodeConfig{PublicURL: origin, DataDir: filepath.Join(dir, "db"), Now: clock.Now, Rates: adptest.TestRates(o.Rates), Log: o.Log},
		Federation: &federation.Config{ListenAddrs: listen, AnnounceInterval: o.AnnounceInterval,
			ReconcileInterval: o.ReconcileInterval, AllowPrivateOrigins: true, Log: o.Log},
		KeyDir: dir, TokenDir: dir, Log: o.Log, HostLog: o.HostLog,
		// A mirror's live streams end only with the mirror, after the
		// HTTP shutdown: tests that stop with one open wait this long.
		ShutdownTimeout: time.Second,
	}
	if o.Configure != nil {
		key, err := federation.LoadOrCreateKey(dir)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Federation.Key = key
		o.Configure(dir, cfg.Federation)
	}
	if o.Mirror {
		mc := o.MirrorConfig
		cfg.Mirror = &mc
	}
	st, err := stack.Open(cfg)
	if err != nil {
		ln.Close()
		t.Fatal(err)
	}
	st.Serve(ln)
	p := &Peer{Stack: st, Name: name, Dir: dir, Port: port, URL: origin, Clock: clock, opts: o}
	t.Cleanup(p.Stop)
	return p
}

// Stop stops the peer (idempotent): stack.Close drains streams, shuts the
// HTTP server down, stops mirror, federation and attention, closes the
// node.
func (p *Peer) Stop() {
	if p.Stack == nil {
		return
	}
	p.Stack.Close()
	p.Stack = nil
}

// Restart stops the peer and starts it again on the same directory, port
// and clock.
func (p *Peer) Restart(t testing.TB) *Peer {
	t.Helper()
	p.Stop()
	return Start(t, p.Name, p.Dir, p.Clock, p.Port, p.opts)
}

// Network starts k peers connected by edges (nil: full mesh) and waits for
// gossip meshes to form.
func Network(t testing.TB, k int, edges [][2]int, o Options) []*Peer {
	t.Helper()
	clock := adptest.NewClock()
	peers := make([]*Peer, k)
	for i := range peers {
		peers[i] = Start(t, string(rune('A'+i)), t.TempDir(), clock, 0, o)
	}
	if edges == nil {
		for i := 0; i < k; i++ {
			for j := i + 1; j < k; j++ {
				edges = append(edges, [2]int{i, j})
			}
		}
	}
	degree := make([]int, k)
	for _, e := range edges {
		Connect(t, peers[e[0]], peers[e[1]])
		degree[e[0]]++
		degree[e[1]]++
	}
	testwait.Until(t, 10*time.Second, "index topic subscriptions known", func() bool {
		for i, p := range peers {
			if p.Fed.IndexPeers() < degree[i] {
				return false
			}
		}
		return true
	})
	time.Sleep(1100 * time.Millisecond) // one gossipsub heartbeat grafts the meshes
	return peers
}

// Connect dials b from a.
func Connect(t testing.TB, a, b *Peer) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := a.Fed.Connect(ctx, b.Fed.Addrs()[0]); err != nil {
		t.Fatalf("connect %s-%s: %v", a.Name, b.Name, err)
	}
}

// Submit signs an event on the room's head and submits it to the node.
func Submit(t testing.TB, p *Peer, a *adptest.Agent, typ, roomID string, payload any) (*hostport.Result, error) {
	t.Helper()
	var seq int64
	var hash string
	if roomID != "" {
		r, err := p.Node.Room(roomID, a.ID)
		if err != nil {
			return nil, err
		}
		seq, hash = r.Head.Seq, r.Head.Hash
	}
	return p.Node.Submit(context.Background(), a.Envelope(p.Clock.Ms(), typ, roomID, seq, hash, payload), roomID)
}

// MustSubmit is Submit that fails the test on error.
func MustSubmit(t testing.TB, p *Peer, a *adptest.Agent, typ, roomID string, payload any) *hostport.Result {
	t.Helper()
	res, err := Submit(t, p, a, typ, roomID, payload)
	if err != nil {
		t.Fatalf("%s: %v", typ, err)
	}
	return res
}

// CreateRoom creates a room lasting an hour and returns its ID.
func CreateRoom(t testing.TB, p *Peer, a *adptest.Agent, vis, topic string, tags ...string) string {
	t.Helper()
	now := p.Clock.Ms()
	if tags == nil {
		tags = []string{}
	}
	return MustSubmit(t, p, a, "room.create", "", map[string]any{"topic": topic, "visibility": vis, "start_time": now,
		"end_time": now + 3_600_000, "tags": tags}).Record.RoomID
}
