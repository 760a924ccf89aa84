package witness_test

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
	"golang.org/x/mod/sumdb/note"

	"github.com/adpnode/adpnode/adp/tlogwitness"
	"github.com/adpnode/adpnode/internal/storelayout"
	"github.com/adpnode/adpnode/internal/testwait"
	"github.com/adpnode/adpnode/node"
	"github.com/adpnode/adpnode/witness"
)

// mirrorSite is what a mirror serves: its discovery document naming its
// witness, and the witness under /v1/witness (doc overrides the document).
type mirrorSite struct {
	srv       *httptest.Server
	f         *fixture
	docHits   atomic.Int64
	doc       func(w http.ResponseWriter) // nil: the true document
	witnessFn http.Handler                // nil: the fixture's witness
}

func newMirrorSite(t *testing.T, f *fixture) *mirrorSite {
	m := &mirrorSite{f: f}
	m.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/.well-known/agent-discourse":
			m.docHits.Add(1)
			if m.doc != nil {
				m.doc(w)
				return
			}
			json.NewEncoder(w).Encode(map[string]any{"witness": map[string]string{"vkey": f.w.VerifierKey(), "url": m.url()}})
		case "/v1/witness/add-checkpoint":
			if m.witnessFn != nil {
				m.witnessFn.ServeHTTP(w, r)
				return
			}
			f.w.ServeHTTP(w, r)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(m.srv.Close)
	return m
}

func (m *mirrorSite) url() string { return m.srv.URL + witness.DiscoveredPath }

func pubOf(k ed25519.PrivateKey) ed25519.PublicKey { return k.Public().(ed25519.PublicKey) }

// Discovery: an announced witness is submitted to only once its origin's
// discovery document names it; hostile offers (another path, another key,
// a document naming another witness or too large) add nothing, repeated
// offers of one key, or of many keys naming one origin, fetch the
// document once, and discovered witnesses are capped. The goroutines end with Close.
func TestSubmitterDiscovery(t *testing.T) {
	noLeaks(t)
	h := &hostLog{l: newLog("host.test/adp-log", nil), t: t}
	h.grow(3, "a")
	_, k1, _ := ed25519.GenerateKey(rand.Reader)
	good := newMirrorSite(t, newFixture(t, t.TempDir(), k1, h.l))
	good.f.real = true
	t.Cleanup(good.f.close)

	s, err := witness.NewSubmitter(witness.SubmitterConfig{Log: h, Discover: &http.Client{Timeout: 2 * time.Second},
		MaxDiscovered: 2, CheckEvery: 10 * time.Millisecond, Poll: 10 * time.Millisecond, MinBackoff: 20 * time.Millisecond, MaxBackoff: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	vk1 := good.f.w.VerifierKey()
	// Refused outright: no request is made.
	for name, c := range map[string]struct {
		pub       ed25519.PublicKey
		vkey, url string
	}{
		"another path":          {pubOf(k1), vk1, good.srv.URL + "/anything"},
		"a query":               {pubOf(k1), vk1, good.url() + "?x=1"},
		"user info":             {pubOf(k1), vk1, strings.Replace(good.url(), "http://", "http://u:p@", 1)},
		"not http":              {pubOf(k1), vk1, strings.Replace(good.url(), "http://", "file://", 1)},
		"the announcer's other": {pubOf(mustKey(t)), vk1, good.url()},
		"a malformed key":       {pubOf(k1), "nokey", good.url()},
	} {
		if err := s.Offer(c.pub, c.vkey, c.url); err == nil {
			t.Errorf("%s: offer accepted", name)
		}
	}
	if n := good.docHits.Load(); n != 0 {
		t.Fatalf("refused offers fetched %d discovery documents", n)
	}

	// Hostile origins: a document naming another witness, one too large.
	lying := newMirrorSite(t, good.f)
	lying.doc = func(w http.ResponseWriter) {
		json.NewEncoder(w).Encode(map[string]any{"witness": map[string]string{"vkey": vk1, "url": "http://elsewhere.test/v1/witness"}})
	}
	_, k2, _ := ed25519.GenerateKey(rand.Reader)
	f2 := newFixture(t, t.TempDir(), k2, h.l)
	t.Cleanup(f2.close)
	huge := newMirrorSite(t, f2)
	huge.doc = func(w http.ResponseWriter) {
		w.Write([]byte(`{"witness":{"vkey":"` + f2.w.VerifierKey() + `","url":"` + huge.url() + `"},"pad":"`))
		w.Write(bytes.Repeat([]byte("x"), 1<<20))
		w.Write([]byte(`"}`))
	}
	if err := s.Offer(pubOf(k1), vk1, lying.url()); err != nil {
		t.Fatal(err)
	}
	if err := s.Offer(pubOf(k2), f2.w.VerifierKey(), huge.url()); err != nil {
		t.Fatal(err)
	}
	// The true one, offered many times (its key was just checked at the
	// lying origin: the next check waits 10 minutes, so offer it under a
	// second key below first).
	_, k3, _ := ed25519.GenerateKey(rand.Reader)
	f3 := newFixture(t, t.TempDir(), k3, h.l)
	f3.real = true
	t.Cleanup(f3.close)
	honest := newMirrorSite(t, f3)
	for i := 0; i < 50; i++ {
		s.Offer(pubOf(k3), f3.w.VerifierKey(), honest.url())
	}
	v3 := f3.verifier()
	testwait.Until(t, 10*time.Second, "the honest discovered witness cosigns", func() bool { return cosignedBy(t, s, h, h.size(), v3) })
	if n := honest.docHits.Load(); n != 1 {
		t.Errorf("50 offers of one witness fetched its discovery document %d times, want 1", n)
	}
	st := s.Stats()
	if len(st) != 1 || !st[0].Discovered || st[0].URL != honest.url() {
		t.Fatalf("witnesses %+v: the lying and the huge origins must not be added", st)
	}
	if lying.docHits.Load() != 1 || huge.docHits.Load() != 1 {
		t.Fatalf("document fetches: lying %d, huge %d", lying.docHits.Load(), huge.docHits.Load())
	}

	// decided waits until the checker has decided every offer made so far:
	// it offers a marker the checker refuses (its origin names another
	// witness) and waits for the marker's fetch. The checker takes offers
	// in order, one at a time, so by then the earlier ones are done.
	decided := func() {
		t.Helper()
		marker := newMirrorSite(t, good.f)
		k := mustKey(t)
		if err := s.Offer(pubOf(k), tlogwitness.CosignatureVerifierKey("marker.test/w", pubOf(k)), marker.url()); err != nil {
			t.Fatal(err)
		}
		testwait.Until(t, 10*time.Second, "the checker reached the marker", func() bool { return marker.docHits.Load() >= 1 })
	}

	// Many keys naming one origin: its document is fetched once.
	crowded := newMirrorSite(t, good.f)
	for i := 0; i < 20; i++ {
		k := mustKey(t)
		vk := tlogwitness.CosignatureVerifierKey("crowd.test/w", pubOf(k))
		s.Offer(pubOf(k), vk, crowded.url())
	}
	decided()
	if n := crowded.docHits.Load(); n != 1 {
		t.Errorf("20 keys naming one origin fetched its document %d times, want 1", n)
	}

	// The cap: MaxDiscovered (2) witnesses; a third is not added while
	// the others are fresh.
	var extra []*fixture
	for i := 0; i < 2; i++ {
		k := mustKey(t)
		f := newFixture(t, t.TempDir(), k, h.l)
		f.real = true
		extra = append(extra, f)
		site := newMirrorSite(t, f)
		if err := s.Offer(pubOf(k), f.w.VerifierKey(), site.url()); err != nil {
			t.Fatal(err)
		}
		testwait.Until(t, 10*time.Second, "the offer checked", func() bool { return site.docHits.Load() == 1 })
	}
	decided()
	if st := s.Stats(); len(st) != 2 {
		t.Fatalf("%d witnesses kept, want the cap of 2: %+v", len(st), st)
	}
	s.Close()
	if err := s.Offer(pubOf(k3), f3.w.VerifierKey(), honest.url()); err == nil {
		t.Error("offer accepted after Close")
	}
	for _, f := range extra {
		f.close()
	}
}

// noLeaks checks, after every other cleanup of the test (servers,
// fixtures), that the goroutines it started have ended.
func noLeaks(t *testing.T) {
	before := runtime.NumGoroutine()
	t.Cleanup(func() {
		http.DefaultClient.CloseIdleConnections()
		testwait.Until(t, 10*time.Second, "goroutines to end", func() bool { return runtime.NumGoroutine() <= before+2 })
	})
}

func mustKey(t *testing.T) ed25519.PrivateKey {
	_, k, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// Hostile witnesses cost bounded time and memory and spoil nothing: one
// that signs with another key than configured, one that answers after the
// submission timeout, and one that streams a huge body each fail, while
// an honest witness beside them cosigns every checkpoint.
func TestSubmitterHostileWitnesses(t *testing.T) {
	noLeaks(t)
	h := &hostLog{l: newLog("host.test/adp-log", nil), t: t}
	h.grow(4, "a")
	honest := newFixture(t, t.TempDir(), mustKey(t), h.l)
	honest.real = true
	t.Cleanup(honest.close)
	imposter := newFixture(t, t.TempDir(), mustKey(t), h.l) // cosigns with its own key
	imposter.real = true
	t.Cleanup(imposter.close)
	claimed := newFixture(t, t.TempDir(), mustKey(t), h.l) // the key the host expects of the imposter
	t.Cleanup(claimed.close)
	release := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(slow.Close)
	var hugeWritten atomic.Int64 // the most written to one request
	huge := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		chunk := bytes.Repeat([]byte("— witness.test/w AAAA\n"), 1<<10)
		written := int64(0)
		defer func() {
			for old := hugeWritten.Load(); written > old && !hugeWritten.CompareAndSwap(old, written); old = hugeWritten.Load() {
			}
		}()
		for i := 0; i < 1<<12; i++ { // up to ~90 MB
			n, err := w.Write(chunk)
			written += int64(n)
			if err != nil {
				return
			}
		}
	}))
	t.Cleanup(huge.Close)
	tg := func(url string, f *fixture) witness.Target {
		t.Helper()
		x, err := witness.ParseTarget(url + "=" + f.w.VerifierKey())
		if err != nil {
			t.Fatal(err)
		}
		return x
	}
	s, err := witness.NewSubmitter(witness.SubmitterConfig{Log: h, Timeout: 300 * time.Millisecond,
		Targets: []witness.Target{target(t, honest), tg(imposter.srv.URL, claimed), tg(slow.URL, claimed), tg(huge.URL, claimed)},
		Poll:    10 * time.Millisecond, MinBackoff: 20 * time.Millisecond, MaxBackoff: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	hv := honest.verifier()
	for i := 0; i < 3; i++ {
		testwait.Until(t, 10*time.Second, "the honest witness cosigns", func() bool { return cosignedBy(t, s, h, h.size(), hv) })
		h.grow(5, "b")
	}
	testwait.Until(t, 10*time.Second, "every hostile witness failed at least twice", func() bool {
		st := s.Stats()
		return st[1].Failures >= 2 && st[2].Failures >= 2 && st[3].Failures >= 2
	})
	raw, n := s.Cosigned()
	if n != 1 {
		t.Fatalf("%d cosignatures kept, want the honest one only", n)
	}
	if nt, err := note.Open(raw, note.VerifierList(h.Verifier(), hv)); err != nil || len(nt.Sigs) != 2 || len(nt.UnverifiedSigs) != 0 {
		t.Fatalf("published checkpoint: %v\n%s", err, raw)
	}
	st := s.Stats()
	if !strings.Contains(st[1].LastError, "no cosignature its key verifies") || !strings.Contains(st[2].LastError, "deadline") {
		t.Errorf("stats %+v", st)
	}
	s.Close()
	close(release)
	// The submitter read at most 4 KiB of each huge answer; what the
	// server wrote to one request is bounded by the socket buffers, not
	// by its 90 MB.
	if w := hugeWritten.Load(); w > 16<<20 {
		t.Errorf("the huge witness wrote %d bytes to one request before the host hung up", w)
	}
	t.Logf("huge witness: at most %d bytes written to one request before the host hung up", hugeWritten.Load())
}

// The newest cosigned checkpoint survives a restart on the same database:
// served (with its line) before any witness answers again. A stored line
// that no longer verifies is not served.
func TestSubmitterCosignaturesSurviveRestart(t *testing.T) {
	h := &hostLog{l: newLog("host.test/adp-log", nil), t: t}
	h.grow(6, "a")
	w := newFixture(t, t.TempDir(), mustKey(t), h.l)
	w.real = true
	db, err := badger.Open(node.BadgerOptions(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	cfg := witness.SubmitterConfig{Log: h, DB: db, Targets: []witness.Target{target(t, w)}, Poll: 10 * time.Millisecond}
	s, err := witness.NewSubmitter(cfg)
	if err != nil {
		t.Fatal(err)
	}
	v := w.verifier()
	testwait.Until(t, 10*time.Second, "cosigned", func() bool { return cosignedBy(t, s, h, 6, v) })
	s.Close()
	w.close() // the witness is gone

	cfg.Targets = nil
	s, err = witness.NewSubmitter(cfg)
	if err != nil {
		t.Fatal(err)
	}
	raw, size, vkeys := s.Witnessed()
	if size != 6 || len(vkeys) != 1 || vkeys[0] != w.w.VerifierKey() {
		t.Fatalf("after restart: size %d, keys %v", size, vkeys)
	}
	cv, _ := tlogwitness.NewCosignatureVerifier(vkeys[0])
	if _, err := tlogwitness.VerifyCosigned(raw, h.Verifier(), vkeys); err != nil {
		t.Fatalf("after restart the stored cosignature does not verify: %v", err)
	}
	if got := s.CosignedFor(h.l.checkpoint(t)); !bytes.Equal(got, raw) {
		t.Fatalf("the checkpoint URL does not serve the stored cosignature")
	}
	s.Close()

	// Damage the stored line: it is dropped at start.
	db.Update(func(txn *badger.Txn) error {
		item, _ := txn.Get([]byte(storelayout.TlogCosigned))
		b, _ := item.ValueCopy(nil)
		var c map[string]any
		json.Unmarshal(b, &c)
		lines := c["lines"].(map[string]any)
		line := lines[cv.Key()].(string)
		lines[cv.Key()] = line[:len(line)-6] + "AAAA=\n"
		b, _ = json.Marshal(c)
		return txn.Set([]byte(storelayout.TlogCosigned), b)
	})
	s, _ = witness.NewSubmitter(cfg)
	defer s.Close()
	if raw, _, _ := s.Witnessed(); raw != nil {
		t.Fatalf("a damaged stored cosignature is served:\n%s", raw)
	}
}
