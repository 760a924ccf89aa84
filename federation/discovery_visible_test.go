//go:build e2e

package federation_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/adpnode/adpnode/federation"
	"github.com/adpnode/adpnode/internal/adptest"
	"github.com/adpnode/adpnode/internal/fedtest"
	"github.com/adpnode/adpnode/internal/testwait"
)

// recorder is a slog handler that keeps every record (with its attrs).
type recorder struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (r *recorder) Enabled(context.Context, slog.Level) bool { return true }
func (r *recorder) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	r.recs = append(r.recs, rec.Clone())
	r.mu.Unlock()
	return nil
}
func (r *recorder) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *recorder) WithGroup(string) slog.Handler      { return r }

// find returns the attrs of the first record at level with msg.
func (r *recorder) find(level slog.Level, msg string) (map[string]slog.Value, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rec := range r.recs {
		if rec.Level == level && rec.Message == msg {
			m := map[string]slog.Value{}
			rec.Attrs(func(a slog.Attr) bool { m[a.Key] = a.Value; return true })
			return m, true
		}
	}
	return nil, false
}

func get(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %s", url, resp.StatusCode, b)
	}
	return string(b)
}

type readyz struct {
	Status     string `json:"status"`
	Federation struct {
		Peers  int    `json:"peers"`
		Status string `json:"status"`
		Reason string `json:"reason"`
		DHT    string `json:"dht"`
	} `json:"federation"`
}

func ready(t *testing.T, p *fedtest.Peer) readyz {
	t.Helper()
	var r readyz
	if err := json.Unmarshal([]byte(get(t, p.URL+"/readyz")), &r); err != nil {
		t.Fatal(err)
	}
	return r
}

// TestBootstrapFailureVisible: a node whose only bootstrap peer is down
// says so at warn with the reason and a human-readable retry delay,
// reports federation degraded on /readyz and /metrics, and recovers on
// its own (backoff retries) once the peer is back on its address.
// Property: a dead bootstrap peer is visible to the operator, and
// retried.
func TestBootstrapFailureVisible(t *testing.T) {
	clock := adptest.NewClock()
	bootDir := t.TempDir()
	listen := []string{"/ip4/127.0.0.1/tcp/" + freePort(t)}
	boot := fedtest.Start(t, "boot", bootDir, clock, 0, fedtest.Options{P2PListen: listen, Configure: func(string, *federation.Config) {}})
	addr := boot.Fed.Addrs()[0]
	boot.Stop()

	rec := &recorder{}
	o := fedtest.Options{Log: slog.New(rec), Configure: func(dir string, c *federation.Config) {
		c.Bootstrap = []string{addr}
		c.AllowPrivateAddrs = true
		c.DiscoveryInterval = 2 * time.Second
	}}
	n := fedtest.Start(t, "N", t.TempDir(), clock, 0, o)
	var attrs map[string]slog.Value
	testwait.Until(t, 20*time.Second, "a warning that no bootstrap peer answers", func() bool {
		var ok bool
		attrs, ok = rec.find(slog.LevelWarn, "no bootstrap peer reachable; retrying with backoff")
		return ok
	})
	if attrs["err"].String() == "" {
		t.Fatalf("warning without the reason: %v", attrs)
	}
	retry := attrs["retry_in"]
	if retry.Kind() != slog.KindString {
		t.Fatalf("retry_in is %v (%s), want a human-readable duration", retry.Kind(), retry)
	}
	if _, err := time.ParseDuration(retry.String()); err != nil {
		t.Fatalf("retry_in %q: %v", retry, err)
	}
	r := ready(t, n)
	if r.Status != "degraded" || r.Federation.Status != "degraded" || r.Federation.Reason == "" || r.Federation.Peers != 0 {
		t.Fatalf("/readyz with the bootstrap peer down: %+v", r)
	}
	if r.Federation.DHT != "server" {
		t.Fatalf("/readyz DHT %q, want the effective mode server", r.Federation.DHT)
	}
	m := get(t, n.URL+"/metrics")
	for _, want := range []string{"adp_federation_degraded 1", `adp_dht_mode{mode="server"} 1`, `adp_dht_mode{mode="client"} 0`,
		"adp_dht_routing_table_peers 0", `adp_p2p_peers_by_source{source="bootstrap"} 0`, "adp_discovery_rounds_total"} {
		if !strings.Contains(m, want) {
			t.Fatalf("/metrics lacks %q", want)
		}
	}
	if !strings.Contains(m, `adp_discovery_total{outcome="bootstrap_failed"}`) || strings.Contains(m, `adp_discovery_total{outcome="bootstrap_failed"} 0`) {
		t.Fatal("/metrics does not count the failed bootstrap rounds")
	}

	// The bootstrap peer comes back on its address: N finds it by itself.
	boot = fedtest.Start(t, "boot", bootDir, clock, 0, fedtest.Options{P2PListen: listen, Configure: func(string, *federation.Config) {}})
	testwait.Until(t, 60*time.Second, "N reconnected to its bootstrap peer", func() bool { return connectedTo(n, boot) })
	if got := sourceOf(n, boot); got != federation.SourceBootstrap {
		t.Fatalf("source %q, want bootstrap", got)
	}
	testwait.Until(t, 10*time.Second, "N logged the recovery", func() bool {
		_, ok := rec.find(slog.LevelInfo, "bootstrap peer reached")
		return ok
	})
	if r := ready(t, n); r.Status != "ready" || r.Federation.Status != "ok" || r.Federation.Peers != 1 {
		t.Fatalf("/readyz after recovery: %+v", r)
	}
	m = get(t, n.URL+"/metrics")
	for _, want := range []string{"adp_federation_degraded 0", `adp_p2p_peers_by_source{source="bootstrap"} 1`} {
		if !strings.Contains(m, want) {
			t.Fatalf("/metrics after recovery lacks %q", want)
		}
	}
}

// freePort is a TCP port on 127.0.0.1 free a moment ago.
func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
}

// TestDeadBootstrapAmongLiveOnesLogged: of two bootstrap peers, one
// answers and one is down: the node joins through the first and names
// the second at warn, with the reason, once.
// Property: a wrong or dead bootstrap address is visible even when
// another bootstrap peer works.
func TestDeadBootstrapAmongLiveOnesLogged(t *testing.T) {
	clock := adptest.NewClock()
	live := fedtest.Start(t, "live", t.TempDir(), clock, 0, fedtest.Options{Configure: func(string, *federation.Config) {}})
	dead := fedtest.Start(t, "dead", t.TempDir(), clock, 0, fedtest.Options{Configure: func(string, *federation.Config) {}})
	deadAddr, deadID := dead.Fed.Addrs()[0], dead.Fed.PeerID().String()
	dead.Stop()
	rec := &recorder{}
	n := fedtest.Start(t, "N", t.TempDir(), clock, 0, fedtest.Options{Log: slog.New(rec), Configure: func(dir string, c *federation.Config) {
		c.Bootstrap = []string{live.Fed.Addrs()[0], deadAddr}
		c.AllowPrivateAddrs = true
		c.DiscoveryInterval = time.Second
	}})
	const msg = "bootstrap peer unreachable; retrying with backoff"
	var attrs map[string]slog.Value
	testwait.Until(t, 20*time.Second, "the dead bootstrap peer named at warn", func() bool {
		var ok bool
		attrs, ok = rec.find(slog.LevelWarn, msg)
		return ok
	})
	if attrs["peer"].String() != deadID || attrs["err"].String() == "" {
		t.Fatalf("warning %v, want peer %s with the reason", attrs, deadID)
	}
	if !connectedTo(n, live) {
		t.Fatal("not connected to the live bootstrap peer")
	}
	if r := ready(t, n); r.Status != "ready" {
		t.Fatalf("/readyz %+v with a bootstrap peer connected", r)
	}
	// Once per streak: later rounds (while under two connections) stay
	// at debug.
	rounds := n.Fed.Stats().Discovery.Rounds.Load()
	testwait.Until(t, 30*time.Second, "two more rounds", func() bool { return n.Fed.Stats().Discovery.Rounds.Load() >= rounds+2 })
	rec.mu.Lock()
	count := 0
	for _, r := range rec.recs {
		if r.Message == msg {
			count++
		}
	}
	rec.mu.Unlock()
	if count != 1 {
		t.Fatalf("%d warnings for one dead bootstrap peer, want 1", count)
	}
}
