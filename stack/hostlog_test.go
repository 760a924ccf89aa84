//go:build e2e

package stack_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
	"golang.org/x/mod/sumdb/note"

	"github.com/adpnode/adpnode/adp/tlogproof"
	"github.com/adpnode/adpnode/adp/tlogwitness"
	"github.com/adpnode/adpnode/federation"
	"github.com/adpnode/adpnode/internal/adptest"
	"github.com/adpnode/adpnode/internal/testwait"
	"github.com/adpnode/adpnode/node"
	"github.com/adpnode/adpnode/stack"
	"github.com/adpnode/adpnode/witness"
)

// testWitness is an in-process C2SP tlog-witness over HTTP that vouches
// for the logs of one host key under the origins it is told, and records
// every split view and refused submission it sees.
type testWitness struct {
	t   *testing.T
	srv *httptest.Server
	w   *witness.Witness
	db  *badger.DB

	mu      sync.Mutex
	host    ed25519.PublicKey
	origins map[string]bool
	splits  int
	refused []int // statuses other than 200 and 409
}

func newTestWitness(t *testing.T, host ed25519.PublicKey, origins ...string) *testWitness {
	t.Helper()
	db, err := badger.Open(node.BadgerOptions(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	_, key, _ := ed25519.GenerateKey(rand.Reader)
	cs, err := tlogwitness.NewCosigner("witness.test/w", key)
	if err != nil {
		t.Fatal(err)
	}
	tw := &testWitness{t: t, db: db, host: host, origins: map[string]bool{}}
	for _, o := range origins {
		tw.origins[o] = true
	}
	tw.w, err = witness.New(witness.Config{DB: db, Cosigner: cs, PerOrigin: time.Millisecond, Burst: 1000,
		Logs: func(origin string) (tlogwitness.Log, bool) {
			tw.mu.Lock()
			defer tw.mu.Unlock()
			if !tw.origins[origin] {
				return tlogwitness.Log{}, false
			}
			v, err := tlogproof.Verifier(origin, tw.host)
			return tlogwitness.Log{Origin: origin, Verifier: v}, err == nil
		},
		OnSplitView: func(tlogwitness.Log, *tlogwitness.SplitView, string) {
			tw.mu.Lock()
			tw.splits++
			tw.mu.Unlock()
		}})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/add-checkpoint", func(w http.ResponseWriter, r *http.Request) {
		rec := httptest.NewRecorder()
		tw.w.ServeHTTP(rec, r)
		if rec.Code != http.StatusOK && rec.Code != http.StatusConflict {
			tw.mu.Lock()
			tw.refused = append(tw.refused, rec.Code)
			tw.mu.Unlock()
		}
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		w.Write(rec.Body.Bytes())
	})
	tw.srv = httptest.NewServer(mux)
	t.Cleanup(func() { tw.srv.Close(); db.Close() })
	return tw
}

func (tw *testWitness) target(t *testing.T) witness.Target {
	tg, err := witness.ParseTarget(tw.srv.URL + "=" + tw.w.VerifierKey())
	if err != nil {
		t.Fatal(err)
	}
	return tg
}

// size is the size of origin's tree the witness last cosigned.
func (tw *testWitness) size(origin string) uint64 {
	st, err := tw.w.State(origin)
	if err != nil || st == nil {
		return 0
	}
	return st.Size
}

func (tw *testWitness) faults() (splits int, refused []int) {
	tw.mu.Lock()
	defer tw.mu.Unlock()
	return tw.splits, slices.Clone(tw.refused)
}

// openHost runs a stack with the host log under publicURL on dir, key in
// dir, submitting to the given witnesses.
func openHost(t *testing.T, dir, publicURL string, clock *adptest.Clock, ws ...witness.Target) (*stack.Stack, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s, err := stack.Open(stack.Config{
		Node: node.Config{PublicURL: publicURL, DataDir: filepath.Join(dir, "db"), Now: clock.Now, Rates: node.NoRates()},
		HostLog: &stack.HostLogConfig{CheckpointInterval: 100 * time.Millisecond, Witnesses: ws,
			MinBackoff: 20 * time.Millisecond, MaxBackoff: 100 * time.Millisecond},
		KeyDir: dir, TokenDir: dir, ShutdownTimeout: time.Second,
	})
	if err != nil {
		ln.Close()
		t.Fatal(err)
	}
	s.Serve(ln)
	return s, "http://" + ln.Addr().String()
}

// hostKey loads (or creates) the node key a stack on dir signs with.
func hostKey(t *testing.T, dir string) ed25519.PublicKey {
	t.Helper()
	k, err := federation.LoadOrCreateKey(dir)
	if err != nil {
		t.Fatal(err)
	}
	return k.Public().(ed25519.PublicKey)
}

// poster writes records into one room of a stack.
type poster struct {
	t          *testing.T
	clock      *adptest.Clock
	alice      *adptest.Agent
	room, hash string
	head       int64
	hashes     []string
}

func newPoster(t *testing.T, s *stack.Stack, clock *adptest.Clock, agent string) *poster {
	p := &poster{t: t, clock: clock, alice: adptest.NewAgent(agent)}
	now := clock.Ms()
	res, err := s.Node.Submit(context.Background(), p.alice.Envelope(now, "room.create", "", 0, "",
		map[string]any{"topic": "logged", "visibility": "private", "start_time": now, "end_time": now + 3_600_000}), "")
	if err != nil {
		t.Fatal(err)
	}
	p.room, p.head, p.hash = res.Record.RoomID, res.Record.Seq, res.Record.Hash
	p.hashes = append(p.hashes, p.hash)
	return p
}

func (p *poster) post(s *stack.Stack, k int) {
	p.t.Helper()
	for range k {
		p.clock.Advance(time.Millisecond)
		r, err := s.Node.Submit(context.Background(), p.alice.Envelope(p.clock.Ms(), "message.create", p.room, p.head, p.hash,
			map[string]any{"content_type": "text/plain", "content": "hi"}), p.room)
		if err != nil {
			p.t.Fatal(err)
		}
		p.head, p.hash = r.Record.Seq, r.Record.Hash
		p.hashes = append(p.hashes, p.hash)
	}
}

// Property: after the public URL (so the log origin) changes, every proof
// the host serves — the inclusion answer and an archive's host_log —
// verifies with the verifier key it names, and lists no witness that
// cosigned only the old origin; a witness of the new origin is listed
// once it cosigns, on restart too.
func TestHostLogOriginChangeProofsVerify(t *testing.T) {
	dir, clock := t.TempDir(), adptest.NewClock()
	pub := hostKey(t, dir)
	oldOrigin, newOrigin := tlogproof.Origin("old.adp.test"), tlogproof.Origin("new.adp.test")
	wOld := newTestWitness(t, pub, oldOrigin) // vouches for the old origin only
	wNew := newTestWitness(t, pub, newOrigin)

	s, _ := openHost(t, dir, "http://old.adp.test", clock, wOld.target(t))
	p := newPoster(t, s, clock, "alice")
	p.post(s, 9)
	testwait.Until(t, 30*time.Second, "the old origin's witness cosigns all 10 records", func() bool {
		_, size, _ := s.Witness.Witnessed()
		return size == 10
	})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	check := func(s *stack.Stack, url string, wantWitness string) {
		t.Helper()
		for _, h := range []string{p.hashes[0], p.hashes[len(p.hashes)-1]} {
			r := adptest.Do(t, http.MethodGet, url+"/v1/log/inclusion?record_hash="+h, "", nil)
			var f tlogproof.File
			if r.Status != http.StatusOK || json.Unmarshal(r.Body, &f) != nil {
				t.Fatalf("inclusion of %s: %s", h, r)
			}
			files := []tlogproof.File{f}
			if a := s.HostLog.ArchiveProof(h); a != nil {
				files = append(files, *a)
			} else {
				t.Fatalf("no archive proof for %s", h)
			}
			for _, f := range files {
				cp, _, err := tlogproof.VerifyFile(f)
				if err != nil || cp.Origin != newOrigin || f.VerifierKey != s.HostLog.VerifierKey() {
					t.Fatalf("a proof served under the new origin does not verify with the key it names: %v (origin %q)", err, cp.Origin)
				}
				if slices.Contains(f.Witnesses, wOld.w.VerifierKey()) {
					t.Fatalf("the old origin's witness is listed under the new origin: %v", f.Witnesses)
				}
				if wantWitness != "" && !slices.Contains(f.Witnesses, wantWitness) {
					t.Fatalf("witnesses %v, want %s", f.Witnesses, wantWitness)
				}
				if wantWitness != "" {
					v, _ := note.NewVerifier(f.VerifierKey)
					if _, err := tlogwitness.VerifyCosigned([]byte(f.Checkpoint), v, []string{wantWitness}); err != nil {
						t.Fatalf("the new origin's witness line does not verify: %v", err)
					}
				}
			}
		}
	}

	// Restart under the new URL with the old witness still configured
	// (it refuses the new origin) and no witness of the new origin yet.
	s, url := openHost(t, dir, "http://new.adp.test", clock, wOld.target(t))
	testwait.Until(t, 30*time.Second, "a checkpoint of the new origin", func() bool {
		_, cp, err := s.HostLog.Checkpoint(context.Background())
		return err == nil && cp.Origin == newOrigin && cp.Size == 10
	})
	check(s, url, "")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// With a witness of the new origin: its line is served, across a
	// restart on the same data dir.
	s, url = openHost(t, dir, "http://new.adp.test", clock, wNew.target(t))
	p.post(s, 1)
	testwait.Until(t, 30*time.Second, "the new origin's witness cosigns", func() bool { return wNew.size(newOrigin) == 11 })
	testwait.Until(t, 30*time.Second, "the host keeps the cosignature", func() bool { _, size, _ := s.Witness.Witnessed(); return size == 11 })
	check(s, url, wNew.w.VerifierKey())
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, url = openHost(t, dir, "http://new.adp.test", clock)
	defer s.Close()
	check(s, url, wNew.w.VerifierKey())
}

// copyKey copies the node key of dir into dir2 (a backup holds the
// database, not the key: the operator keeps node.key).
func copyKey(t *testing.T, dir, dir2 string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, federation.KeyFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir2, federation.KeyFile), b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// waitRefused waits until the restored host's log holds back (fenced)
// and the host learnt that the witness holds a larger tree, or the
// witness saw a fork.
func waitRefused(t *testing.T, s *stack.Stack, w *testWitness) {
	t.Helper()
	testwait.Until(t, 30*time.Second, "the restored log to hold back, or a fork", func() bool {
		if splits, refused := w.faults(); splits > 0 || len(refused) > 0 {
			return true
		}
		f, ok := any(s.HostLog).(interface{ Fenced() (uint64, bool) })
		if !ok {
			return false
		}
		size, fenced := f.Fenced()
		_, cp, err := s.HostLog.Checkpoint(context.Background())
		st := s.Witness.Stats()
		return fenced && err == nil && cp.Size == size && len(st) == 1 && strings.Contains(st[0].LastError, "size 21")
	})
}

// Property: a node restored from a backup never publishes a checkpoint
// its witnesses would call a fork of their own. The restored log is the
// backup's tree; while a witness holds a larger tree of the log (records
// the node accepted after the backup), the log publishes nothing beyond
// the backup's tree, across a restart too, and the records accepted
// meanwhile stay durable; a backup that misses nothing the witnesses saw
// resumes at once and every record, old and new, is logged once.
func TestHostLogRestoreNeverForks(t *testing.T) {
	dir, clock := t.TempDir(), adptest.NewClock()
	pub := hostKey(t, dir)
	origin := tlogproof.Origin("adp.test")
	w := newTestWitness(t, pub, origin)

	s, _ := openHost(t, dir, "http://adp.test", clock, w.target(t))
	p := newPoster(t, s, clock, "alice")
	p.post(s, 10)
	testwait.Until(t, 30*time.Second, "the witness cosigns 11 records", func() bool { return w.size(origin) == 11 })
	var early bytes.Buffer
	if err := s.Node.Backup(&early); err != nil {
		t.Fatal(err)
	}
	p.post(s, 10)
	testwait.Until(t, 30*time.Second, "the witness cosigns 21 records", func() bool { return w.size(origin) == 21 })
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	var late bytes.Buffer // offline, after the node stopped: it misses nothing
	if err := node.BackupDir(filepath.Join(dir, "db"), &late); err != nil {
		t.Fatal(err)
	}

	// The early backup, restored: the node runs, accepts records (more
	// than the witness saw), and its log stays at the backup's tree.
	dir2 := t.TempDir()
	if err := node.RestoreDir(filepath.Join(dir2, "db"), bytes.NewReader(early.Bytes())); err != nil {
		t.Fatal(err)
	}
	copyKey(t, dir, dir2)
	s, _ = openHost(t, dir2, "http://adp.test", clock, w.target(t))
	q := newPoster(t, s, clock, "bob")
	q.post(s, 20)
	waitRefused(t, s, w)
	_, cp, err := s.HostLog.Checkpoint(context.Background())
	if err != nil || cp.Size != 11 {
		t.Fatalf("restored log publishes size %d (%v), want the backup's 11", cp.Size, err)
	}
	if splits, refused := w.faults(); splits != 0 || len(refused) != 0 {
		t.Fatalf("the witness saw a fork: %d split views, refusals %v", splits, refused)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, _ = openHost(t, dir2, "http://adp.test", clock, w.target(t))
	waitRefused(t, s, w)
	if _, cp, err := s.HostLog.Checkpoint(context.Background()); err != nil || cp.Size != 11 {
		t.Fatalf("after a restart the restored log publishes size %d (%v), want 11", cp.Size, err)
	}
	if hs, err := s.Node.RecordHashes(q.room, 0, 100); err != nil || len(hs) != 21 {
		t.Fatalf("records accepted while the log waits: %d (%v)", len(hs), err)
	}
	if splits, refused := w.faults(); splits != 0 || len(refused) != 0 {
		t.Fatalf("the witness saw a fork: %d split views, refusals %v", splits, refused)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// The late backup, restored: the witness confirms the tree, the log
	// resumes, and new records are logged and cosigned.
	dir3 := t.TempDir()
	if err := node.RestoreDir(filepath.Join(dir3, "db"), bytes.NewReader(late.Bytes())); err != nil {
		t.Fatal(err)
	}
	copyKey(t, dir, dir3)
	s, _ = openHost(t, dir3, "http://adp.test", clock, w.target(t))
	defer s.Close()
	p.post(s, 5)
	testwait.Until(t, 30*time.Second, "the witness cosigns the restored log's growth", func() bool { return w.size(origin) == 26 })
	if splits, refused := w.faults(); splits != 0 || len(refused) != 0 {
		t.Fatalf("the witness saw a fork: %d split views, refusals %v", splits, refused)
	}
	_, cp, _ = s.HostLog.Checkpoint(context.Background())
	seen := map[uint64]bool{}
	for _, h := range p.hashes {
		leaf, _ := tlogproof.RecordLeaf(h)
		rp, err := s.HostLog.Inclusion(context.Background(), leaf, cp.Size)
		if err != nil || tlogproof.VerifyInclusion(rp.Inclusion, leaf, cp.Hash) != nil || seen[rp.Inclusion.LeafIndex] {
			t.Fatalf("record %s: %v", h, err)
		}
		seen[rp.Inclusion.LeafIndex] = true
	}

	// A host that never had a witness has nobody to fork against: its
	// restored log resumes at once.
	dir4, dir5 := t.TempDir(), t.TempDir()
	s4, _ := openHost(t, dir4, "http://lone.adp.test", clock)
	r := newPoster(t, s4, clock, "carol")
	r.post(s4, 3)
	var lone bytes.Buffer
	if err := s4.Node.Backup(&lone); err != nil {
		t.Fatal(err)
	}
	if err := s4.Close(); err != nil {
		t.Fatal(err)
	}
	if err := node.RestoreDir(filepath.Join(dir5, "db"), bytes.NewReader(lone.Bytes())); err != nil {
		t.Fatal(err)
	}
	copyKey(t, dir4, dir5)
	s5, _ := openHost(t, dir5, "http://lone.adp.test", clock)
	defer s5.Close()
	r.post(s5, 2)
	testwait.Until(t, 30*time.Second, "the witness-less restored log resumes", func() bool {
		_, cp, err := s5.HostLog.Checkpoint(context.Background())
		return err == nil && cp.Size == 6
	})
}
