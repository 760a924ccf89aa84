package witness_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"net/http"
	"net/http/httptest"
	"runtime"
	"sync"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/adpnode/adpnode/adp/tlogproof"
	"github.com/adpnode/adpnode/adp/tlogwitness"
	"github.com/adpnode/adpnode/internal/testwait"
	"github.com/adpnode/adpnode/witness"
)

// hostLog adapts memLog to witness.HostLog, safe for the submitter's
// goroutines.
type hostLog struct {
	mu sync.Mutex
	l  *memLog
	t  testing.TB
}

func (h *hostLog) grow(n int, prefix string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.l.add(h.t, n, prefix)
}

func (h *hostLog) Checkpoint(context.Context) ([]byte, tlogproof.Checkpoint, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	raw := h.l.checkpoint(h.t)
	cp, _, err := tlogproof.Open(raw, h.l.info().Verifier)
	return raw, cp, err
}

func (h *hostLog) Consistency(_ context.Context, a, b uint64) (tlogproof.ConsistencyProof, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	p, err := tlog.ProveTree(int64(b), int64(a), h.l)
	var hs [][]byte
	for _, x := range p {
		hs = append(hs, append([]byte{}, x[:]...))
	}
	return tlogproof.ConsistencyProof{Size1: a, Size2: b, Hashes: tlogproof.EncodeHashes(hs)}, err
}

func (h *hostLog) Verifier() note.Verifier { return h.l.info().Verifier }

func (h *hostLog) size() uint64 { h.mu.Lock(); defer h.mu.Unlock(); return uint64(h.l.n) }

func target(t *testing.T, f *fixture) witness.Target {
	tg, err := witness.ParseTarget(f.srv.URL + "=" + f.w.VerifierKey())
	if err != nil {
		t.Fatal(err)
	}
	return tg
}

func cosignedBy(t *testing.T, s *witness.Submitter, h *hostLog, size uint64, vs ...note.Verifier) bool {
	raw, n := s.Cosigned()
	if n < len(vs) {
		return false
	}
	nt, err := note.Open(raw, note.VerifierList(append([]note.Verifier{h.Verifier()}, vs...)...))
	if err != nil {
		t.Fatalf("published checkpoint does not open: %v", err)
	}
	cp, err := tlogproof.ParseCheckpoint([]byte(nt.Text))
	return err == nil && cp.Size == size && len(nt.Sigs) == 1+len(vs)
}

func TestSubmitterCollectsCosignatures(t *testing.T) {
	before := runtime.NumGoroutine()
	_, k1, _ := ed25519.GenerateKey(rand.Reader)
	_, k2, _ := ed25519.GenerateKey(rand.Reader)
	h := &hostLog{l: newLog("host.test/adp-log", nil), t: t}
	w1 := newFixture(t, t.TempDir(), k1, h.l)
	w2 := newFixture(t, t.TempDir(), k2, h.l)
	w1.real, w2.real = true, true
	dead := httptest.NewServer(http.NotFoundHandler())
	dead.Close() // connection refused
	liar := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Write([]byte("— witness.test/w AAAA\n"))
	}))
	deadT, _ := witness.ParseTarget(dead.URL + "=" + w1.w.VerifierKey())
	liarT, _ := witness.ParseTarget(liar.URL + "=" + w2.w.VerifierKey())

	h.grow(5, "a")
	cfg := witness.SubmitterConfig{Log: h, Targets: []witness.Target{target(t, w1), deadT, target(t, w2), liarT},
		Poll: 10 * time.Millisecond, MinBackoff: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond}
	s, err := witness.NewSubmitter(cfg)
	if err != nil {
		t.Fatal(err)
	}
	v1, v2 := w1.verifier(), w2.verifier()
	for i := 0; i < 4; i++ {
		testwait.Until(t, 10*time.Second, "both witnesses cosign", func() bool { return cosignedBy(t, s, h, h.size(), v1, v2) })
		h.grow(3+i*7, "b")
	}
	testwait.Until(t, 10*time.Second, "the last checkpoint cosigned", func() bool { return cosignedBy(t, s, h, h.size(), v1, v2) })
	st := s.Stats()
	if st[0].Size != h.size() || st[2].Size != h.size() || st[1].Failures == 0 || st[3].Failures == 0 {
		t.Fatalf("stats %+v", st)
	}
	if _, n := s.Cosigned(); n != 2 {
		t.Fatalf("%d cosignatures, want 2 (the dead and the lying witness give none)", n)
	}
	s.Close()

	// A restarted host does not know what the witnesses hold: their 409
	// tells it, and it proves consistency from there.
	h.grow(4, "c")
	s, err = witness.NewSubmitter(cfg)
	if err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, 10*time.Second, "cosigned after the host's restart", func() bool { return cosignedBy(t, s, h, h.size(), v1, v2) })
	s.Close()

	// A witness restarted on its data keeps its state and the host goes
	// on from it.
	w1.close()
	w1.open()
	cfg.Targets[0] = target(t, w1)
	h.grow(2, "d")
	s, _ = witness.NewSubmitter(cfg)
	testwait.Until(t, 10*time.Second, "cosigned after the witness's restart", func() bool { return cosignedBy(t, s, h, h.size(), w1.verifier(), v2) })
	s.Close()

	w1.close()
	w2.close()
	liar.Close()
	http.DefaultClient.CloseIdleConnections()
	testwait.Until(t, 10*time.Second, "goroutines to end", func() bool { return runtime.NumGoroutine() <= before+2 })
}

func TestParseTarget(t *testing.T) {
	_, k, _ := ed25519.GenerateKey(rand.Reader)
	cs, _ := tlogwitness.NewCosigner("w.example", k)
	if _, err := witness.ParseTarget("https://w.example/witness=" + cs.VerifierKey()); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{
		"https://w.example",
		"ftp://w.example=" + cs.VerifierKey(),
		"https://w.example?x=1=" + cs.VerifierKey(),
		"https://w.example=w.example+00000000+AAAA",
	} {
		if _, err := witness.ParseTarget(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	// An Ed25519 note key is not a cosignature/v1 key.
	vk, _ := tlogproof.VerifierKey("w.example", k.Public().(ed25519.PublicKey))
	if _, err := witness.ParseTarget("https://w.example=" + vk); err == nil {
		t.Error("a plain Ed25519 note key accepted as a witness key")
	}
}

// notifyingLog is a hostLog that tells when a round began, as
// hostlog.Log does (witness.RoundNotifier).
type notifyingLog struct {
	*hostLog
	fmu sync.Mutex
	fn  func()
}

func (n *notifyingLog) OnRound(fn func()) { n.fmu.Lock(); n.fn = fn; n.fmu.Unlock() }

func (n *notifyingLog) round() {
	n.fmu.Lock()
	fn := n.fn
	n.fmu.Unlock()
	if fn != nil {
		fn()
	}
}

// Property: the submitter reads a log that says when it begins a round
// only in the few polls after a start or a round: between rounds, over
// fifty of its poll intervals, it reads the checkpoint at most once (a
// poller reads it fifty times), and a round is cosigned at once. The
// same after a restart of the submitter.
func TestSubmitterSleepsBetweenRounds(t *testing.T) {
	_, k1, _ := ed25519.GenerateKey(rand.Reader)
	h := &notifyingLog{hostLog: &hostLog{l: newLog("host.test/adp-log", nil), t: t}}
	w1 := newFixture(t, t.TempDir(), k1, h.l)
	w1.real = true
	defer w1.close()
	const poll = 10 * time.Millisecond
	cfg := witness.SubmitterConfig{Log: h, Targets: []witness.Target{target(t, w1)},
		Poll: poll, MinBackoff: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond}
	v1 := w1.verifier()
	idle := func(s *witness.Submitter, from int64, what string) {
		t.Helper()
		// A start or a round is followed by 1 + 8 reads, one per poll.
		testwait.Until(t, 10*time.Second, what+": the reads after a round done", func() bool { return s.Polls() >= from+9 })
		before := s.Polls()
		tick := time.NewTicker(poll)
		defer tick.Stop()
		for range 50 {
			<-tick.C
		}
		if n := s.Polls() - before; n > 1 {
			t.Fatalf("%s: %d reads of an idle log's checkpoint in fifty poll intervals", what, n)
		}
	}

	h.grow(5, "a")
	s, err := witness.NewSubmitter(cfg)
	if err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, 10*time.Second, "the first checkpoint cosigned", func() bool { return cosignedBy(t, s, h.hostLog, h.size(), v1) })
	idle(s, 0, "after the start")

	for i := range 3 {
		p := s.Polls()
		h.grow(3+i, "b")
		h.round()
		testwait.Until(t, 10*time.Second, "a round's checkpoint cosigned", func() bool { return cosignedBy(t, s, h.hostLog, h.size(), v1) })
		idle(s, p, "after a round")
	}
	s.Close()

	h.grow(2, "c")
	s, err = witness.NewSubmitter(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	testwait.Until(t, 10*time.Second, "cosigned after a restart", func() bool { return cosignedBy(t, s, h.hostLog, h.size(), v1) })
	idle(s, 0, "after a restart")
}
