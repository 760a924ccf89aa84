package profilecache_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/adpnode/adpnode/adp/identity"
	"github.com/adpnode/adpnode/internal/adptest"
	"github.com/adpnode/adpnode/internal/safehttp"
	"github.com/adpnode/adpnode/profilecache"
)

// fakeHost serves /v1/profiles?ids=… from a table of envelopes per agent,
// or whatever answer the test sets.
type fakeHost struct {
	mu       sync.Mutex
	envs     map[identity.AgentID][]byte
	override func(w http.ResponseWriter, ids []string) bool
	hits     atomic.Int64
}

func (f *fakeHost) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.hits.Add(1)
	ids := strings.Split(r.URL.Query().Get("ids"), ",")
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.override != nil && f.override(w, ids) {
		return
	}
	out := []map[string]any{}
	for _, id := range ids {
		if env, ok := f.envs[identity.AgentID(id)]; ok {
			out = append(out, map[string]any{"agent_id": id, "name": "wrapper names are ignored", "envelope": json.RawMessage(env)})
		}
	}
	_ = json.NewEncoder(w).Encode(map[string]any{"result": out})
}

type clock struct{ ms atomic.Int64 }

func (c *clock) now() time.Time { return time.UnixMilli(c.ms.Load()) }

func setup(t *testing.T, cfg profilecache.Config) (*profilecache.Cache, *fakeHost, *clock) {
	t.Helper()
	f := &fakeHost{envs: map[identity.AgentID][]byte{}}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	clk := &clock{}
	clk.ms.Store(1_800_000_000_000)
	cfg.Origins = func(room string) []string {
		if room == "known" {
			return []string{srv.URL}
		}
		return nil
	}
	cfg.Client = safehttp.Client(safehttp.Options{Timeout: 5 * time.Second, AllowPrivate: true})
	cfg.Now = clk.now
	return profilecache.New(cfg), f, clk
}

func (f *fakeHost) set(a *adptest.Agent, env []byte) {
	f.mu.Lock()
	f.envs[a.ID] = env
	f.mu.Unlock()
}

// Property: a remote profile is fetched from the room's host only, verified,
// served from the cache while fresh and asked again lazily once aged; an
// older update never replaces a newer one.
func TestCacheResolves(t *testing.T) {
	c, f, clk := setup(t, profilecache.Config{TTL: time.Minute, MissTTL: time.Minute})
	ctx := context.Background()
	a, b := adptest.NewAgent("a"), adptest.NewAgent("b")
	older := a.ProfileEnvelope(clk.ms.Load(), "Old A")
	f.set(a, a.ProfileEnvelope(clk.ms.Load(), "A"))

	if got := c.Resolve(ctx, "unknown", []identity.AgentID{a.ID}); len(got) != 0 || f.hits.Load() != 0 {
		t.Fatalf("a room without a known host fetched: %v", got)
	}
	got := c.Resolve(ctx, "known", []identity.AgentID{a.ID, b.ID})
	if got[a.ID] == nil || got[a.ID].Name != "A" || got[a.ID].Source == "" || got[b.ID] != nil {
		t.Fatalf("resolve: %+v", got)
	}
	// Fresh: answered from the cache, also without a room.
	for _, room := range []string{"known", ""} {
		if got := c.Resolve(ctx, room, []identity.AgentID{a.ID, b.ID}); got[a.ID].Name != "A" {
			t.Fatalf("cached: %+v", got)
		}
	}
	if h := f.hits.Load(); h != 1 {
		t.Fatalf("%d fetches, want 1", h)
	}
	// Aged: asked again; the host now serves an older update, which does
	// not replace the newer one; then a newer one, which does.
	f.set(a, older)
	clk.ms.Add(61_000)
	if got := c.Resolve(ctx, "known", []identity.AgentID{a.ID}); got[a.ID].Name != "A" || f.hits.Load() != 2 {
		t.Fatalf("older update replaced a newer one: %+v (%d fetches)", got[a.ID], f.hits.Load())
	}
	f.set(a, a.ProfileEnvelope(clk.ms.Load(), "A2"))
	f.set(b, b.ProfileEnvelope(clk.ms.Load(), "B"))
	clk.ms.Add(61_000)
	got = c.Resolve(ctx, "known", []identity.AgentID{a.ID, b.ID})
	if got[a.ID].Name != "A2" || got[b.ID] == nil || got[b.ID].Name != "B" {
		t.Fatalf("refresh: %+v", got)
	}
}

// Property: a host's answer that does not verify, names an agent not
// asked for, or is too large is refused and nothing of it is cached.
func TestCacheRefusesHostile(t *testing.T) {
	c, f, clk := setup(t, profilecache.Config{})
	ctx := context.Background()
	a, b, m := adptest.NewAgent("a"), adptest.NewAgent("b"), adptest.NewAgent("m")
	aEnv := a.ProfileEnvelope(clk.ms.Load(), "A")
	forged := strings.Replace(string(aEnv), `"name":"A"`, `"name":"Z"`, 1)
	answers := map[string]func(w http.ResponseWriter, ids []string) bool{
		"forged": func(w http.ResponseWriter, _ []string) bool {
			_ = json.NewEncoder(w).Encode(map[string]any{"result": []any{map[string]any{"agent_id": a.ID, "envelope": json.RawMessage(forged)}}})
			return true
		},
		"another agent's profile as a's": func(w http.ResponseWriter, _ []string) bool {
			_ = json.NewEncoder(w).Encode(map[string]any{"result": []any{map[string]any{"agent_id": a.ID, "envelope": json.RawMessage(m.ProfileEnvelope(clk.ms.Load(), "A"))}}})
			return true
		},
		"an agent not asked for": func(w http.ResponseWriter, _ []string) bool {
			_ = json.NewEncoder(w).Encode(map[string]any{"result": []any{map[string]any{"agent_id": m.ID, "envelope": json.RawMessage(m.ProfileEnvelope(clk.ms.Load(), "M"))}}})
			return true
		},
		"too large": func(w http.ResponseWriter, _ []string) bool {
			_, _ = w.Write([]byte(`{"result":[` + strings.Repeat(" ", 2<<20) + `]}`))
			return true
		},
		"not JSON": func(w http.ResponseWriter, _ []string) bool { _, _ = w.Write([]byte("<html>")); return true },
		"an error": func(w http.ResponseWriter, _ []string) bool {
			w.WriteHeader(http.StatusInternalServerError)
			return true
		},
	}
	for name, ans := range answers {
		f.mu.Lock()
		f.override = ans
		f.mu.Unlock()
		if got := c.Resolve(ctx, "known", []identity.AgentID{a.ID, b.ID}); len(got) != 0 {
			t.Fatalf("%s: resolved %+v", name, got)
		}
		clk.ms.Add(int64(2 * time.Minute / time.Millisecond)) // past MissTTL: ask again
	}
	if got := c.Resolve(ctx, "", []identity.AgentID{a.ID, b.ID, m.ID}); len(got) != 0 {
		t.Fatalf("cached from hostile answers: %+v", got)
	}
	if c.Stats().Refused < 4 {
		t.Fatalf("refusals not counted: %+v", c.Stats())
	}
}

// Property: the cache holds at most MaxEntries agents and MaxBytes bytes,
// the least recently used going first.
func TestCacheBounded(t *testing.T) {
	c, f, clk := setup(t, profilecache.Config{MaxEntries: 5, MaxBytes: 6 << 10})
	ctx := context.Background()
	var ids []identity.AgentID
	for i := range 40 {
		a := adptest.NewAgent("bound" + string(rune('a'+i%26)) + string(rune('a'+i/26)))
		f.set(a, a.ProfileEnvelope(clk.ms.Load(), strings.Repeat("n", 60), strings.Repeat("c", 60)))
		ids = append(ids, a.ID)
	}
	for _, id := range ids {
		c.Resolve(ctx, "known", []identity.AgentID{id})
		if s := c.Stats(); s.Entries > 5 || s.Bytes > 6<<10 {
			t.Fatalf("cache over its bounds: %+v", s)
		}
	}
	got := c.Resolve(ctx, "known", ids)
	if len(got) != 40 {
		t.Fatalf("a lookup beyond the cache's size still answers all: %d", len(got))
	}
	if s := c.Stats(); s.Entries > 5 || s.Bytes > 6<<10 {
		t.Fatalf("cache over its bounds: %+v", s)
	}
}

// Property: lookups cannot make the cache fetch more than
// FetchesPerMinute times a minute, however many agents they name.
func TestCacheFetchRate(t *testing.T) {
	c, f, clk := setup(t, profilecache.Config{FetchesPerMinute: 3})
	ctx := context.Background()
	for i := range 10 {
		c.Resolve(ctx, "known", []identity.AgentID{adptest.NewAgent("rate" + string(rune('a'+i))).ID})
	}
	if h := f.hits.Load(); h != 3 {
		t.Fatalf("%d fetches in a minute, want 3", h)
	}
	clk.ms.Add(60_000)
	c.Resolve(ctx, "known", []identity.AgentID{adptest.NewAgent("rate-late").ID})
	if h := f.hits.Load(); h != 4 {
		t.Fatalf("%d fetches after the minute, want 4", h)
	}
}
