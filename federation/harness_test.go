package federation_test

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"github.com/adpnode/adpnode/hostapi"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/adpnode/adpnode/adp/identity"
	"github.com/adpnode/adpnode/federation"
	"github.com/adpnode/adpnode/index"
	"github.com/adpnode/adpnode/internal/adptest"
	"github.com/adpnode/adpnode/node"
)

// peerNode is one federated node in a test: a node, its index and its
// federation peer, on 127.0.0.1 only.
type peerNode struct {
	name  string
	dir   string
	n     *node.Node
	idx   *index.Index
	fed   *federation.Federation
	clock *adptest.Clock
	port  int
	url   string
	srv   *http.Server
}

// startPeer starts a node with a durable store in dir, its HTTP API on
// 127.0.0.1:port (0 picks one) and its federation peer.
func startPeer(t testing.TB, name, dir string, clock *adptest.Clock, port int) *peerNode {
	t.Helper()
	return startPeerWith(t, name, dir, clock, port, peerOptions{})
}

// peerOptions tunes a test peer beyond startPeer's defaults (benchmarks).
// The zero value is startPeer's configuration.
type peerOptions struct {
	rates            node.Rates    // zero: the node defaults
	announceInterval time.Duration // zero: 2 s
	log              *slog.Logger  // node and federation logger; nil: slog.Default()
}

// startPeerWith is startPeer with options.
func startPeerWith(t testing.TB, name, dir string, clock *adptest.Clock, port int, o peerOptions) *peerNode {
	t.Helper()
	if o.announceInterval == 0 {
		o.announceInterval = 2 * time.Second
	}
	ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		t.Fatal(err)
	}
	port = ln.Addr().(*net.TCPAddr).Port
	origin := fmt.Sprintf("http://127.0.0.1:%d", port)
	n, err := node.Open(node.Config{PublicURL: origin, DataDir: filepath.Join(dir, "db"), Now: clock.Now, Rates: o.rates, Log: o.log})
	if err != nil {
		t.Fatal(err)
	}
	key, err := federation.LoadOrCreateKey(dir)
	if err != nil {
		t.Fatal(err)
	}
	idx, err := index.Open(n.DB(), identity.AgentIDFromKey(key.Public().(ed25519.PublicKey)), clock.Ms())
	if err != nil {
		t.Fatal(err)
	}
	fed, err := federation.Start(federation.Config{Key: key, ListenAddrs: []string{"/ip4/127.0.0.1/tcp/0"},
		AnnounceInterval: o.announceInterval, AllowPrivateOrigins: true, Log: o.log}, n, idx)
	if err != nil {
		t.Fatal(err)
	}
	api := hostapi.New(n, hostapi.Options{Federation: fed})
	srv := &http.Server{Handler: api.Handler()}
	go srv.Serve(ln)
	p := &peerNode{name: name, dir: dir, n: n, idx: idx, fed: fed, clock: clock, port: port, url: origin, srv: srv}
	t.Cleanup(p.stop)
	return p
}

func (p *peerNode) stop() {
	if p.srv != nil {
		p.n.DrainStreams()
		p.srv.Close()
		p.srv = nil
	}
	if p.fed != nil {
		p.fed.Close()
		p.fed = nil
	}
	if p.n != nil {
		p.n.Close()
		p.n = nil
	}
}

// network starts k peers connected as described by edges (pairs of
// indexes); nil edges means a full mesh.
func network(t testing.TB, k int, edges [][2]int) []*peerNode {
	t.Helper()
	return networkWith(t, k, edges, peerOptions{})
}

// networkWith is network with options for every peer.
func networkWith(t testing.TB, k int, edges [][2]int, o peerOptions) []*peerNode {
	t.Helper()
	clock := adptest.NewClock()
	peers := make([]*peerNode, k)
	for i := range peers {
		peers[i] = startPeerWith(t, string(rune('A'+i)), t.TempDir(), clock, 0, o)
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
		connect(t, peers[e[0]], peers[e[1]])
		degree[e[0]]++
		degree[e[1]]++
	}
	// Steady state: every node knows its neighbours' subscriptions, and one
	// gossipsub heartbeat (1 s) has grafted the meshes.
	eventually(t, 10*time.Second, "index topic subscriptions known", func() bool {
		for i, p := range peers {
			if p.fed.IndexPeers() < degree[i] {
				return false
			}
		}
		return true
	})
	time.Sleep(1100 * time.Millisecond)
	return peers
}

func connect(t testing.TB, a, b *peerNode) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := a.fed.Connect(ctx, b.fed.Addrs()[0]); err != nil {
		t.Fatalf("connect %s-%s: %v", a.name, b.name, err)
	}
}

// submit signs and submits an event directly to a node.
func submit(t testing.TB, p *peerNode, a *adptest.Agent, typ, roomID string, payload any) *node.Result {
	t.Helper()
	var seq int64
	var hash string
	if roomID != "" {
		r, err := p.n.Room(roomID, a.ID)
		if err != nil {
			t.Fatal(err)
		}
		seq, hash = r.Head.Seq, r.Head.Hash
	}
	res, err := p.n.Submit(context.Background(), a.Envelope(p.clock.Ms(), typ, roomID, seq, hash, payload), roomID)
	if err != nil {
		t.Fatalf("%s: %v", typ, err)
	}
	return res
}

func createRoom(t testing.TB, p *peerNode, a *adptest.Agent, vis, topic string) string {
	t.Helper()
	now := p.clock.Ms()
	res := submit(t, p, a, "room.create", "", map[string]any{"topic": topic, "visibility": vis, "start_time": now,
		"end_time": now + 3_600_000, "tags": []string{"fed"}})
	return res.Record.RoomID
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t testing.TB, within time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for time.Since(start) < within {
		if cond() {
			return time.Since(start)
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("not within %v: %s", within, what)
	return 0
}

// listed returns the directory entry for roomID at p, if any.
func listed(p *peerNode, roomID string) (node.RoomSummary, bool) {
	for _, s := range p.fed.Directory() {
		if s.ID == roomID {
			return s, true
		}
	}
	return node.RoomSummary{}, false
}

var _ = http.StatusOK
