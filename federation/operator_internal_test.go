package federation

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/adpnode/adpnode/adp/identity"
	"github.com/adpnode/adpnode/index"
	"github.com/adpnode/adpnode/internal/testwait"
	"github.com/adpnode/adpnode/node"
)

// logCapture is a slog handler that keeps every record.
type logCapture struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (c *logCapture) Enabled(context.Context, slog.Level) bool { return true }
func (c *logCapture) Handle(_ context.Context, r slog.Record) error {
	c.mu.Lock()
	c.recs = append(c.recs, r.Clone())
	c.mu.Unlock()
	return nil
}
func (c *logCapture) WithAttrs([]slog.Attr) slog.Handler { return c }
func (c *logCapture) WithGroup(string) slog.Handler      { return c }

// find returns the records with this message (and level, unless 0 is
// not the level wanted: pass the level to match).
func (c *logCapture) find(msg string, level slog.Level) []slog.Record {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []slog.Record
	for _, r := range c.recs {
		if r.Message == msg && r.Level == level {
			out = append(out, r)
		}
	}
	return out
}

func attr(r slog.Record, key string) (slog.Value, bool) {
	var v slog.Value
	found := false
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == key {
			v, found = a.Value, true
			return false
		}
		return true
	})
	return v, found
}

// opened is a node and index a federation runs over, closed in t.Cleanup.
type opened struct {
	dir string
	n   *node.Node
	idx *index.Index
	key ed25519.PrivateKey
}

func openNode(t *testing.T, dir string) *opened {
	t.Helper()
	n, err := node.Open(node.Config{PublicURL: "http://127.0.0.1:1", DataDir: filepath.Join(dir, "db"), Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	key, err := LoadOrCreateKey(dir)
	if err != nil {
		t.Fatal(err)
	}
	idx, err := index.Open(n.DB(), identity.AgentIDFromKey(key.Public().(ed25519.PublicKey)), n.NowMs())
	if err != nil {
		t.Fatal(err)
	}
	return &opened{dir: dir, n: n, idx: idx, key: key}
}

// reopen closes the node and opens it again on the same directory (a
// restart; the host key stays).
func (o *opened) reopen(t *testing.T) *opened {
	t.Helper()
	o.n.Close()
	return openNode(t, o.dir)
}

func (o *opened) start(cfg Config) (*Federation, error) {
	cfg.Key = o.key
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return Start(cfg, o.n, o.idx)
}

func peerIDOf(t *testing.T, key ed25519.PrivateKey) peer.ID {
	t.Helper()
	sk, err := crypto.UnmarshalEd25519PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	id, err := peer.IDFromPrivateKey(sk)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func freeTCPPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// A second host asked for a libp2p port already in use fails at Start,
// naming the address, instead of sharing it through SO_REUSEPORT (TCP)
// or listening on only some of its addresses (TCP and QUIC); the failed
// start leaves no goroutines behind; once the first host stops, the port
// can be taken again.
func TestListenPortInUse(t *testing.T) {
	port := freeTCPPort(t)
	tcpAddr := fmt.Sprintf("/ip4/127.0.0.1/tcp/%d", port)
	quicAddr := fmt.Sprintf("/ip4/127.0.0.1/udp/%d/quic-v1", port)
	a := openNode(t, t.TempDir())
	fa, err := a.start(Config{ListenAddrs: []string{tcpAddr, quicAddr}})
	if err != nil {
		t.Fatal(err)
	}
	b := openNode(t, t.TempDir())
	before := runtime.NumGoroutine()
	for _, addrs := range [][]string{{tcpAddr}, {quicAddr}, {tcpAddr, quicAddr}, {"/ip4/127.0.0.1/tcp/0", tcpAddr}} {
		fb, err := b.start(Config{ListenAddrs: addrs})
		if err == nil {
			fb.Close()
			t.Fatalf("second host on %v started (first holds them)", addrs)
		}
		if !strings.Contains(err.Error(), fmt.Sprint(port)) || !strings.Contains(err.Error(), "in use") {
			t.Errorf("error for %v does not name the port in use: %v", addrs, err)
		}
	}
	testwait.Until(t, 10*time.Second, "goroutines of failed starts exit", func() bool { return runtime.NumGoroutine() <= before+5 })
	// Hostile: a malformed address is refused before anything starts.
	if _, err := b.start(Config{ListenAddrs: []string{"/ip4/127.0.0.1/tcp/notaport"}}); err == nil || !strings.Contains(err.Error(), "notaport") {
		t.Errorf("malformed listen address: %v", err)
	}
	fa.Close()
	fb, err := b.start(Config{ListenAddrs: []string{tcpAddr, quicAddr}})
	if err != nil {
		t.Fatalf("port not reusable after the first host stopped: %v", err)
	}
	if len(fb.Addrs()) != 2 {
		t.Errorf("listening on %v, want TCP and QUIC", fb.Addrs())
	}
	fb.Close()
}

// An unreachable static peer is logged at info once per failure streak,
// with the next retry time (the retries at debug); a successful dial is
// logged at info, and so is the reconnect after the peer restarts on the
// same data dir.
func TestStaticPeerLogs(t *testing.T) {
	port := freeTCPPort(t)
	b := openNode(t, t.TempDir())
	bAddr := fmt.Sprintf("/ip4/127.0.0.1/tcp/%d", port)
	target := bAddr + "/p2p/" + peerIDOf(t, b.key).String()
	logs := &logCapture{}
	a := openNode(t, t.TempDir())
	fa, err := a.start(Config{Peers: []string{target}, Reconnect: 20 * time.Millisecond, Log: slog.New(logs)})
	if err != nil {
		t.Fatal(err)
	}
	defer fa.Close()
	const unreachable = "static peer unreachable; retrying with backoff"
	testwait.Until(t, 20*time.Second, "three failed dials", func() bool {
		return len(logs.find("static peer dial failed", slog.LevelDebug)) >= 2
	})
	infos := logs.find(unreachable, slog.LevelInfo)
	if len(infos) != 1 {
		t.Fatalf("%d info records for one failure streak, want 1", len(infos))
	}
	next, ok := attr(infos[0], "next_retry")
	if !ok {
		t.Fatal("no next_retry on the unreachable record")
	}
	if at, err := time.Parse(time.RFC3339, next.String()); err != nil || at.Before(infos[0].Time.Add(-time.Second)) {
		t.Errorf("next_retry %q: %v", next.String(), err)
	}
	// Durations read as durations in JSON logs too, not nanoseconds.
	if in, ok := attr(infos[0], "retry_in"); !ok || in.Kind() != slog.KindString {
		t.Errorf("retry_in %v (%v), want a duration string", in, in.Kind())
	} else if _, err := time.ParseDuration(in.String()); err != nil {
		t.Errorf("retry_in %q: %v", in.String(), err)
	}
	for round := 1; round <= 2; round++ {
		if round == 2 {
			b = b.reopen(t)
		}
		fb, err := b.start(Config{ListenAddrs: []string{bAddr}})
		if err != nil {
			t.Fatal(err)
		}
		testwait.Until(t, 20*time.Second, "the dial succeeds and is logged", func() bool {
			return len(logs.find("static peer connected", slog.LevelInfo))+len(logs.find("static peer reconnected", slog.LevelInfo)) == round
		})
		fb.Close()
		testwait.Until(t, 20*time.Second, "a new failure streak is logged once", func() bool {
			return len(logs.find(unreachable, slog.LevelInfo)) == round+1
		})
	}
	if n := len(logs.find("static peer reconnected", slog.LevelInfo)); n != 2 {
		t.Errorf("%d reconnect records, want 2", n)
	}
	// Bound: the streaks stay one info record each, however many retries.
	testwait.Until(t, 20*time.Second, "more retries", func() bool { return len(logs.find("static peer dial failed", slog.LevelDebug)) >= 6 })
	if n := len(logs.find(unreachable, slog.LevelInfo)); n != 3 {
		t.Errorf("%d unreachable records after three streaks, want 3", n)
	}
}

// A binding check refused because the origin is private is logged once
// above debug, with the operator's switch; later ones at debug; other
// failures still warn each time. With private origins allowed the check
// is made.
func TestPrivateOriginCheckLoggedOnce(t *testing.T) {
	logs := &logCapture{}
	o := openNode(t, t.TempDir())
	f, err := o.start(Config{Log: slog.New(logs), PrivateOriginsHint: "set --allow-private-peers"})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := index.Binding{Key: "did:agent:zPeer", PeerID: "12D3KooWPeer", Origin: fmt.Sprintf("http://127.0.0.1:%d", freeTCPPort(t))}
	err = f.CheckBinding(context.Background(), b)
	var po *privateOrigin
	if !errors.As(err, &po) {
		t.Fatalf("check of a loopback origin: %v, want a private-origin refusal", err)
	}
	for i := 0; i < 10; i++ {
		f.logCheckFailure(b, err)
	}
	once := logs.find("host binding not checked: the origin is a loopback or private address (logged once)", slog.LevelInfo)
	if len(once) != 1 {
		t.Fatalf("%d info records for 10 refusals, want 1", len(once))
	}
	if h, _ := attr(once[0], "hint"); h.String() != "set --allow-private-peers" {
		t.Errorf("hint %q", h.String())
	}
	if n := len(logs.find("host binding not checked: private origin", slog.LevelDebug)); n != 9 {
		t.Errorf("%d debug records, want 9", n)
	}
	f.logCheckFailure(b, errors.New("discovery document: HTTP 500"))
	if n := len(logs.find("host binding not confirmed", slog.LevelWarn)); n != 1 {
		t.Errorf("other failure: %d warnings, want 1", n)
	}
	f.Close()

	// Allowed: the check is attempted (the origin does not answer).
	f2, err := openNode(t, t.TempDir()).start(Config{AllowPrivateOrigins: true})
	if err != nil {
		t.Fatal(err)
	}
	defer f2.Close()
	if err := f2.CheckBinding(context.Background(), b); err == nil || errors.As(err, &po) {
		t.Fatalf("with private origins allowed: %v", err)
	}
}
