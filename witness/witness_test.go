package witness_test

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/adpnode/adpnode/adp/tlogproof"
	"github.com/adpnode/adpnode/adp/tlogwitness"
	"github.com/adpnode/adpnode/internal/testwait"
	"github.com/adpnode/adpnode/node"
	"github.com/adpnode/adpnode/witness"
)

// memLog is an RFC 6962 log in memory, signed like an adpnode host's.
type memLog struct {
	origin string
	priv   ed25519.PrivateKey
	hashes []tlog.Hash
	n      int64
}

func newLog(origin string, priv ed25519.PrivateKey) *memLog {
	if priv == nil {
		_, priv, _ = ed25519.GenerateKey(rand.Reader)
	}
	return &memLog{origin: origin, priv: priv}
}

func (l *memLog) ReadHashes(idx []int64) ([]tlog.Hash, error) {
	out := make([]tlog.Hash, len(idx))
	for i, x := range idx {
		out[i] = l.hashes[x]
	}
	return out, nil
}

func (l *memLog) add(t testing.TB, n int, prefix string) {
	for i := 0; i < n; i++ {
		hs, err := tlog.StoredHashes(l.n, []byte(fmt.Sprint(prefix, i)), l)
		if err != nil {
			t.Fatal(err)
		}
		l.hashes = append(l.hashes, hs...)
		l.n++
	}
}

func (l *memLog) checkpoint(t testing.TB) []byte {
	h, err := tlog.TreeHash(l.n, l)
	if err != nil {
		t.Fatal(err)
	}
	b, err := tlogproof.Sign(tlogproof.Checkpoint{Origin: l.origin, Size: uint64(l.n), Hash: h}, l.priv)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func (l *memLog) proof(t testing.TB, old int64) []tlog.Hash {
	if old == 0 || old == l.n {
		return nil
	}
	p, err := tlog.ProveTree(l.n, old, l)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func (l *memLog) info() tlogwitness.Log {
	v, _ := tlogproof.Verifier(l.origin, l.priv.Public().(ed25519.PublicKey))
	return tlogwitness.Log{Origin: l.origin, Verifier: v}
}

type fixture struct {
	t      testing.TB
	dir    string
	db     *badger.DB
	w      *witness.Witness
	srv    *httptest.Server
	key    ed25519.PrivateKey
	logs   map[string]*memLog
	now    time.Time
	real   bool // Now is the wall clock
	mu     sync.Mutex
	splits []*tlogwitness.SplitView
}

func newFixture(t *testing.T, dir string, key ed25519.PrivateKey, logs ...*memLog) *fixture {
	f := &fixture{t: t, dir: dir, key: key, logs: map[string]*memLog{}, now: time.Unix(1_780_000_000, 0)}
	for _, l := range logs {
		f.logs[l.origin] = l
	}
	f.open()
	return f
}

func (f *fixture) open() {
	db, err := badger.Open(node.BadgerOptions(f.dir))
	if err != nil {
		f.t.Fatal(err)
	}
	cs, err := tlogwitness.NewCosigner("witness.test/w", f.key)
	if err != nil {
		f.t.Fatal(err)
	}
	w, err := witness.New(witness.Config{DB: db, Cosigner: cs,
		Logs: func(o string) (tlogwitness.Log, bool) {
			l, ok := f.logs[o]
			if !ok {
				return tlogwitness.Log{}, false
			}
			return l.info(), true
		},
		OnSplitView: func(_ tlogwitness.Log, sv *tlogwitness.SplitView, _ string) {
			f.mu.Lock()
			f.splits = append(f.splits, sv)
			f.mu.Unlock()
		},
		Now: func() time.Time {
			f.mu.Lock()
			defer f.mu.Unlock()
			if f.real {
				return time.Now()
			}
			return f.now
		},
	})
	if err != nil {
		f.t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/add-checkpoint", w)
	f.db, f.w, f.srv = db, w, httptest.NewServer(mux)
}

// witnessT is the witness type (for helpers).
type witnessT = witness.Witness

// unlimited returns a witness on the fixture's database with another
// rate limit.
func (f *fixture) unlimited(tb testing.TB, per time.Duration, burst int) *witness.Witness {
	cs, _ := tlogwitness.NewCosigner("witness.test/w", f.key)
	w, err := witness.New(witness.Config{DB: f.db, Cosigner: cs, PerOrigin: per, Burst: burst,
		Logs: func(o string) (tlogwitness.Log, bool) {
			l, ok := f.logs[o]
			if !ok {
				return tlogwitness.Log{}, false
			}
			return l.info(), true
		}})
	if err != nil {
		tb.Fatal(err)
	}
	return w
}

func (f *fixture) close() {
	f.srv.Close()
	if err := f.db.Close(); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) advance(d time.Duration) { f.mu.Lock(); f.now = f.now.Add(d); f.mu.Unlock() }

func (f *fixture) post(body []byte) (int, string, http.Header) {
	f.t.Helper()
	resp, err := http.Post(f.srv.URL+"/add-checkpoint", "text/plain", bytes.NewReader(body))
	if err != nil {
		f.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

func (f *fixture) submit(l *memLog, old int64) (int, string, http.Header) {
	f.t.Helper()
	f.advance(time.Second)
	return f.post(tlogwitness.FormatRequest(uint64(old), l.proof(f.t, old), l.checkpoint(f.t)))
}

func (f *fixture) verifier() note.Verifier {
	v, err := tlogwitness.NewCosignatureVerifier(f.w.VerifierKey())
	if err != nil {
		f.t.Fatal(err)
	}
	return v
}

func errCode(t *testing.T, body string) string {
	t.Helper()
	var e struct {
		Error struct {
			Code string         `json:"code"`
			Data map[string]any `json:"data"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(body), &e); err != nil {
		t.Fatalf("error body is not the ADP error shape: %q", body)
	}
	return e.Error.Code
}

func TestAddCheckpointAndRestart(t *testing.T) {
	_, key, _ := ed25519.GenerateKey(rand.Reader)
	lg := newLog("host.test/adp-log", nil)
	dir := t.TempDir()
	f := newFixture(t, dir, key, lg)

	lg.add(t, 7, "a")
	code, line, _ := f.submit(lg, 0)
	if code != 200 {
		t.Fatalf("first checkpoint: %d %s", code, line)
	}
	cosigned := append(lg.checkpoint(t), line...)
	n, err := note.Open(cosigned, note.VerifierList(lg.info().Verifier, f.verifier()))
	if err != nil || len(n.Sigs) != 2 {
		t.Fatalf("cosigned checkpoint: %v", err)
	}
	for i := 0; i < 5; i++ {
		old := lg.n
		lg.add(t, 3+i*11, "b")
		if code, body, _ := f.submit(lg, old); code != 200 {
			t.Fatalf("growth %d: %d %s", i, code, body)
		}
	}
	size := lg.n
	f.close()

	// Restart on the same data dir: the witness remembers the size.
	f.open()
	defer f.close()
	if st, err := f.w.State(lg.origin); err != nil || st == nil || st.Size != uint64(size) {
		t.Fatalf("state after restart: %+v %v", st, err)
	}
	code, body, h := f.submit(lg, 0)
	if code != 409 || h.Get("Content-Type") != "text/x.tlog.size" || body != fmt.Sprintf("%d\n", size) {
		t.Fatalf("TOFU again after restart: %d %q %q", code, h.Get("Content-Type"), body)
	}
	lg.add(t, 1, "c")
	if code, body, _ := f.submit(lg, size); code != 200 {
		t.Fatalf("after restart: %d %s", code, body)
	}
}

func TestAddCheckpointHostile(t *testing.T) {
	_, key, _ := ed25519.GenerateKey(rand.Reader)
	lg := newLog("host.test/adp-log", nil)
	f := newFixture(t, t.TempDir(), key, lg)
	defer f.close()
	lg.add(t, 10, "a")
	if code, body, _ := f.submit(lg, 0); code != 200 {
		t.Fatal(code, body)
	}
	first := lg.checkpoint(t)
	lg.add(t, 5, "b")
	good := lg.proof(t, 10)
	bad := append([]tlog.Hash{}, good...)
	bad[1][0] ^= 0xff

	impostor := newLog(lg.origin, nil) // the log's origin, another key
	impostor.add(t, 15, "a")
	stranger := newLog("other.test/adp-log", nil)
	stranger.add(t, 1, "x")

	cases := []struct {
		name   string
		body   []byte
		status int
		code   string
	}{
		{"bad proof", tlogwitness.FormatRequest(10, bad, lg.checkpoint(t)), 422, "inconsistent_checkpoint"},
		{"wrong key", tlogwitness.FormatRequest(10, good, impostor.checkpoint(t)), 403, "untrusted_checkpoint"},
		{"unknown log", tlogwitness.FormatRequest(0, nil, stranger.checkpoint(t)), 404, "not_found"},
		{"old size beyond", tlogwitness.FormatRequest(16, good, lg.checkpoint(t)), 400, "invalid_request"},
		{"replayed older checkpoint", tlogwitness.FormatRequest(15, nil, first), 400, "invalid_request"},
		{"garbage", []byte("hello"), 400, "invalid_request"},
		{"huge body", append(tlogwitness.FormatRequest(10, good, lg.checkpoint(t)), bytes.Repeat([]byte("A"), 1<<20)...), 413, "payload_too_large"},
	}
	for _, c := range cases {
		f.advance(time.Second)
		status, body, _ := f.post(c.body)
		if status != c.status || errCode(t, body) != c.code {
			t.Errorf("%s: %d %s, want %d %s", c.name, status, body, c.status, c.code)
		}
	}
	if st, _ := f.w.State(lg.origin); st.Size != 10 {
		t.Fatalf("a refused request moved the state to %d", st.Size)
	}
	if len(f.splits) != 0 {
		t.Fatal("refusals that prove nothing reported a split view")
	}
	// A replay of the cosigned checkpoint is cosigned again (fresh time).
	if status, body, _ := f.submit(lg, 10); status != 200 {
		t.Fatal(status, body)
	}
	if status, body, _ := f.post(tlogwitness.FormatRequest(15, nil, lg.checkpoint(t))); status != 200 {
		t.Fatal(status, body)
	}
}

// TestAddCheckpointBounds: a log's requests are rate-limited (burst, then
// 429 with Retry-After until tokens refill), the body cap holds, and no
// goroutine outlives the witness.
func TestAddCheckpointBounds(t *testing.T) {
	before := runtime.NumGoroutine()
	_, key, _ := ed25519.GenerateKey(rand.Reader)
	lg := newLog("host.test/adp-log", nil)
	f := newFixture(t, t.TempDir(), key, lg)
	lg.add(t, 3, "a")
	body := tlogwitness.FormatRequest(0, nil, lg.checkpoint(t))
	ok, limited := 0, 0
	for i := 0; i < 25; i++ {
		status, resp, h := f.post(body)
		switch {
		case status == 200 || status == 409:
			ok++
		case status == 429:
			limited++
			if h.Get("Retry-After") == "" || errCode(t, resp) != "rate_limited" {
				t.Fatalf("429 without Retry-After: %v %s", h, resp)
			}
		default:
			t.Fatalf("status %d %s", status, resp)
		}
	}
	if ok != 10 || limited != 15 {
		t.Fatalf("burst: %d answered, %d limited; want 10 and 15", ok, limited)
	}
	f.advance(time.Second) // refills the bucket
	if status, resp, _ := f.post(tlogwitness.FormatRequest(3, nil, lg.checkpoint(t))); status != 200 {
		t.Fatal(status, resp)
	}
	if status, _, _ := f.post(bytes.Repeat([]byte("x"), tlogwitness.MaxRequestBytes+1)); status != 413 {
		t.Fatalf("body cap: %d", status)
	}
	f.close()
	http.DefaultClient.CloseIdleConnections()
	testwait.Goroutines(t, 20*time.Second, "the witness's goroutines gone after close", before+2)
}

// TestForkedHostCaught: a host that shows the witness one tree and then a
// fork of it is refused (409 at the same size, 422 for a larger fork's
// proof) and the witness reports a split view that verifies offline.
func TestForkedHostCaught(t *testing.T) {
	_, hostKey, _ := ed25519.GenerateKey(rand.Reader)
	_, key, _ := ed25519.GenerateKey(rand.Reader)
	honest := newLog("host.test/adp-log", hostKey)
	fork := newLog("host.test/adp-log", hostKey)
	f := newFixture(t, t.TempDir(), key, honest)
	defer f.close()
	honest.add(t, 6, "a")
	fork.add(t, 5, "a")
	fork.add(t, 1, "evil")
	if status, body, _ := f.submit(honest, 0); status != 200 {
		t.Fatal(status, body)
	}
	// The same size with another root.
	if status, body, _ := f.submit(fork, 6); status != 409 || body != "6\n" {
		t.Fatalf("same-size fork: %d %s", status, body)
	}
	if len(f.splits) != 1 {
		t.Fatalf("%d split views reported", len(f.splits))
	}
	// A larger fork with its own tree's proof, to a fresh witness of the
	// same honest tree (the first one cosigns nothing more of this log).
	g := newFixture(t, t.TempDir(), key, honest)
	defer g.close()
	if status, body, _ := g.submit(honest, 0); status != 200 {
		t.Fatal(status, body)
	}
	fork.add(t, 9, "f")
	if status, body, _ := g.submit(fork, 6); status != 422 {
		t.Fatalf("growing fork: %d %s", status, body)
	}
	if len(g.splits) != 1 {
		t.Fatalf("%d split views reported", len(g.splits))
	}
	f.splits = append(f.splits, g.splits...)
	for i, sv := range f.splits {
		if err := sv.Verify(honest.info()); err != nil {
			t.Fatalf("split view %d: %v", i, err)
		}
	}
	if st, _ := f.w.State(honest.origin); st.Size != 6 {
		t.Fatal("the fork moved the witness")
	}
}

// TestSameSizeOtherRootIs409 protects C2SP tlog-witness as written: a
// checkpoint of the size the witness cosigned with another root is
// answered 409 Conflict (text/x.tlog.size, the size the witness holds),
// the state is unchanged, and the pair is reported as a split view.
func TestSameSizeOtherRootIs409(t *testing.T) {
	_, hostKey, _ := ed25519.GenerateKey(rand.Reader)
	_, key, _ := ed25519.GenerateKey(rand.Reader)
	honest := newLog("host.test/adp-log", hostKey)
	fork := newLog("host.test/adp-log", hostKey)
	f := newFixture(t, t.TempDir(), key, honest)
	defer f.close()
	honest.add(t, 6, "a")
	fork.add(t, 6, "b")
	if status, body, _ := f.submit(honest, 0); status != 200 {
		t.Fatal(status, body)
	}
	status, body, h := f.submit(fork, 6)
	if status != http.StatusConflict || h.Get("Content-Type") != "text/x.tlog.size" || body != "6\n" {
		t.Fatalf("same size, other root: %d %q %q; want 409 text/x.tlog.size \"6\\n\"", status, h.Get("Content-Type"), body)
	}
	if st, _ := f.w.State(honest.origin); st.Size != 6 || !bytes.Equal(st.Note, honest.checkpoint(t)) {
		t.Fatalf("the conflicting checkpoint moved the witness: %+v", st)
	}
	if len(f.splits) != 1 || f.splits[0].Verify(honest.info()) != nil {
		t.Fatalf("split views: %d", len(f.splits))
	}
}

// TestForkedLogCosignedNoMore protects: a witness that holds split-view
// evidence against a log cosigns nothing more of it, not even a checkpoint
// that extends the tree it cosigned with a valid proof, and it still
// refuses after a restart on the same data dir; other logs are unaffected.
func TestForkedLogCosignedNoMore(t *testing.T) {
	_, hostKey, _ := ed25519.GenerateKey(rand.Reader)
	_, key, _ := ed25519.GenerateKey(rand.Reader)
	honest := newLog("host.test/adp-log", hostKey)
	fork := newLog("host.test/adp-log", hostKey)
	other := newLog("other.test/adp-log", nil)
	dir := t.TempDir()
	f := newFixture(t, dir, key, honest, other)
	honest.add(t, 5, "a")
	fork.add(t, 4, "a")
	fork.add(t, 1, "evil")
	other.add(t, 3, "o")
	if status, body, _ := f.submit(honest, 0); status != 200 {
		t.Fatal(status, body)
	}
	if status, body, _ := f.submit(other, 0); status != 200 {
		t.Fatal(status, body)
	}
	if status, body, _ := f.submit(fork, 5); status != http.StatusConflict {
		t.Fatalf("fork: %d %s", status, body)
	}
	if len(f.splits) != 1 {
		t.Fatalf("%d split views reported", len(f.splits))
	}
	refused := func(f *fixture) {
		t.Helper()
		honest.add(t, 2, "more")
		status, body, _ := f.submit(honest, 5)
		if status != http.StatusForbidden || errCode(t, body) != "untrusted_checkpoint" || !strings.Contains(body, "log_forked") {
			t.Fatalf("a valid extension of a forked log: %d %s; want 403 log_forked", status, body)
		}
		if st, err := f.w.State(honest.origin); err != nil || st.Size != 5 || st.SplitView == nil || st.SplitView.Verify(honest.info()) != nil {
			t.Fatalf("state of the forked log: %+v %v", st, err)
		}
	}
	refused(f)
	f.close()
	f.open() // restart on the same data dir
	defer f.close()
	refused(f)
	old := other.n
	other.add(t, 2, "p")
	if status, body, _ := f.submit(other, old); status != 200 {
		t.Fatalf("another log: %d %s", status, body)
	}
}

// TestRateBudgetSpentAfterSignature protects: a log's request budget is
// spent only by requests whose checkpoint carries the log's signature, so
// a stranger posting forged checkpoints for the log's origin gets 403
// every time and never 429, and the log's own next checkpoint is cosigned.
func TestRateBudgetSpentAfterSignature(t *testing.T) {
	_, key, _ := ed25519.GenerateKey(rand.Reader)
	lg := newLog("host.test/adp-log", nil)
	impostor := newLog(lg.origin, nil) // the origin, another key
	f := newFixture(t, t.TempDir(), key, lg)
	defer f.close()
	lg.add(t, 4, "a")
	impostor.add(t, 4, "a")
	forged := tlogwitness.FormatRequest(0, nil, impostor.checkpoint(t))
	for i := 0; i < 50; i++ { // five times the burst, the clock standing still
		if status, body, _ := f.post(forged); status != http.StatusForbidden {
			t.Fatalf("forged request %d: %d %s; want 403", i, status, body)
		}
	}
	if status, body, _ := f.post(tlogwitness.FormatRequest(0, nil, lg.checkpoint(t))); status != 200 {
		t.Fatalf("the log's checkpoint after forged ones: %d %s", status, body)
	}
}
