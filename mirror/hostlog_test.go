//go:build e2e

package mirror_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
	sumtlog "golang.org/x/mod/sumdb/tlog"

	"github.com/adpnode/adpnode/adp/archive"
	"github.com/adpnode/adpnode/adp/assertion"
	"github.com/adpnode/adpnode/adp/identity"
	"github.com/adpnode/adpnode/adp/room"
	"github.com/adpnode/adpnode/adp/tlogproof"
	"github.com/adpnode/adpnode/adp/tlogwitness"
	"github.com/adpnode/adpnode/federation"
	"github.com/adpnode/adpnode/hostlog"
	"github.com/adpnode/adpnode/index"
	"github.com/adpnode/adpnode/internal/adptest"
	"github.com/adpnode/adpnode/internal/fedtest"
	"github.com/adpnode/adpnode/internal/testwait"
	"github.com/adpnode/adpnode/mirror"
	"github.com/adpnode/adpnode/stack"
	"github.com/adpnode/adpnode/witness"
)

// startLogHost starts a host the way fedtest.Start does, with the host log
// of the composition root (checkpoints every 100 ms) and, with witnesses,
// its submitter sending checkpoints to them.
func startLogHost(t *testing.T, clock *adptest.Clock, witnesses ...witness.Target) (*fedtest.Peer, *hostlog.Log) {
	t.Helper()
	dir := t.TempDir()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	origin := fmt.Sprintf("http://127.0.0.1:%d", port)
	cfg := stack.Config{
		Node: stack.NodeConfig{PublicURL: origin, DataDir: filepath.Join(dir, "db"), Now: clock.Now, Rates: adptest.TestRates(noRates)},
		Federation: &federation.Config{ListenAddrs: []string{"/ip4/127.0.0.1/tcp/0"}, AnnounceInterval: 2 * time.Second,
			AllowPrivateOrigins: true},
		KeyDir: dir, TokenDir: dir, ShutdownTimeout: time.Second,
		HostLog: &stack.HostLogConfig{Witnesses: witnesses, CheckpointInterval: 100 * time.Millisecond,
			MinBackoff: 100 * time.Millisecond, MaxBackoff: time.Second},
	}
	st, err := stack.Open(cfg)
	if err != nil {
		ln.Close()
		t.Fatal(err)
	}
	st.Serve(ln)
	p := &fedtest.Peer{Stack: st, Name: "A", Dir: dir, Port: port, URL: origin, Clock: clock}
	t.Cleanup(p.Stop)
	return p, st.HostLog
}

// mirrorOf connects mirror b to host a and makes it mirror a's rooms.
// It connects once a announced the heads of rooms ids: the directory
// reconciliation on connect brings them to b, where an announcement
// gossiped before the mesh formed would be missed until the next change.
func mirrorOf(t *testing.T, b, a *fedtest.Peer, ids ...string) {
	t.Helper()
	alice := adptest.NewAgent("alice")
	testwait.Until(t, 60*time.Second, "A announced its rooms' heads", func() bool {
		own := a.Index.Own()
		for _, id := range ids {
			head, err := a.Node.Room(id, alice.ID)
			if err != nil {
				t.Fatal(err)
			}
			e, err := index.Parse(own[id])
			if err != nil || e.Room.Seq != head.Head.Seq {
				return false
			}
		}
		return true
	})
	fedtest.Connect(t, a, b)
	if _, err := b.Mir.AddTarget(mirror.TargetHost, string(a.Fed.HostKey())); err != nil {
		t.Fatal(err)
	}
}

// mirrored waits until b verified room id up to a's head and returns the
// head's hash.
func mirrored(t *testing.T, a, b *fedtest.Peer, id string) string {
	t.Helper()
	alice := adptest.NewAgent("alice")
	head, err := a.Node.Room(id, alice.ID)
	if err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, 60*time.Second, "B mirrors "+id, func() bool {
		r, ok := b.Mir.Room(id, a.Fed.HostKey())
		return ok && r.Tip() == head.Head.Seq
	})
	return head.Head.Hash
}

// covered waits until a's host log proves the record with this hash and
// returns its proof file.
func covered(t *testing.T, l *hostlog.Log, hash string) tlogproof.File {
	t.Helper()
	leaf, err := tlogproof.RecordLeaf(hash)
	if err != nil {
		t.Fatal(err)
	}
	var f tlogproof.File
	testwait.Until(t, 30*time.Second, "the host log covers "+hash, func() bool {
		f, err = l.ProofFile(context.Background(), leaf)
		return err == nil
	})
	return f
}

func getBody(t *testing.T, url string) []byte {
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
	return b
}

// scansPass waits until the mirror's proof fetcher ran n more scan
// passes, waking the scan for each (it sleeps while no room needs
// looking at).
func scansPass(t *testing.T, b *fedtest.Peer, n int64) {
	t.Helper()
	for range n {
		from, _ := b.Mir.HostLogForTest()
		b.Mir.WakeProofScanForTest()
		testwait.Until(t, 30*time.Second, "proof scans run", func() bool {
			s, _ := b.Mir.HostLogForTest()
			return s > from
		})
	}
}

// TestMirrorArchiveHostLog: host A keeps a host log whose checkpoints its
// submitter sends to mirror B's witness. Once A's room ends, B fetches A's
// proof of the last record and embeds it: B's archive, JSON and JSONL,
// passes archive.Verify with the embedded proof, which B's own witness
// cosigned; a tampered proof fails verification. B restarted with A
// stopped still embeds the same proof and fetches nothing.
func TestMirrorArchiveHostLog(t *testing.T) {
	clock := adptest.NewClock()
	b := fedtest.Start(t, "B", t.TempDir(), clock, 0, fedtest.Options{Rates: noRates, Mirror: true})
	bv, err := tlogwitness.NewCosignatureVerifier(b.Mir.Witness().VerifierKey())
	if err != nil {
		t.Fatal(err)
	}
	a, _ := startLogHost(t, clock, witness.Target{URL: b.URL + mirror.WitnessPath, Verifier: bv})
	alice := adptest.NewAgent("alice")
	id := fedtest.CreateRoom(t, a, alice, room.Public, "logged")
	for i := range 3 {
		fedtest.MustSubmit(t, a, alice, "message.create", id, msg(fmt.Sprint("m", i)))
	}
	mirrorOf(t, b, a, id)
	last := mirrored(t, a, b, id)
	hk := a.Fed.HostKey()
	r, _ := b.Mir.Room(id, hk)
	if _, err := r.Archive(clock.Ms()); err == nil {
		t.Fatal("an archive of a room still open")
	}
	scansPass(t, b, 2)
	if n := b.Mir.Stats().ProofsFetched.Load(); n != 0 {
		t.Fatalf("%d proof fetches for a room still open", n)
	}

	clock.Advance(61 * time.Minute) // the room ends
	base := b.URL + "/v1/mirrors/rooms/" + id
	var doc *archive.Archive
	testwait.Until(t, 90*time.Second, "B's archive embeds a proof B's witness cosigned", func() bool {
		resp, err := http.Get(base + "/archive")
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return false
		}
		if doc, err = archive.ParseJSON(raw); err != nil {
			t.Fatal(err)
		}
		rep, err := archive.Verify(doc, archive.Options{})
		if err != nil {
			t.Fatalf("B's archive: %v", err)
		}
		for _, w := range rep.Witnesses {
			if w.VKey == bv.Key() {
				return true
			}
		}
		return false
	})
	if doc.Manifest.LastHash != last || doc.Manifest.Extra["host_log"] == nil {
		t.Fatalf("archive of %s, host_log %v", doc.Manifest.LastHash, doc.Manifest.Extra["host_log"])
	}
	proofJSON, _ := json.Marshal(doc.Manifest.Extra["host_log"])

	// The JSONL form carries the same proof and verifies.
	m, packs, recs, err := archive.ParseJSONL(getBody(t, base+"/archive.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	rep, err := archive.VerifyRecords(m, packs, recs, archive.Options{})
	if err != nil || len(rep.Witnesses) == 0 {
		t.Fatalf("JSONL archive: %v, %d witnesses", err, len(rep.Witnesses))
	}
	if j, _ := json.Marshal(m.Extra["host_log"]); string(j) != string(proofJSON) {
		t.Fatalf("JSONL host_log differs:\n%s\n%s", j, proofJSON)
	}

	// Tampered proofs fail verification.
	var f tlogproof.File
	if err := json.Unmarshal(proofJSON, &f); err != nil {
		t.Fatal(err)
	}
	tampers := map[string]func(f *tlogproof.File){
		"a proof hash": func(f *tlogproof.File) {
			h, _ := base64.StdEncoding.DecodeString(f.Inclusion.Hashes[0])
			h[0] ^= 1
			f.Inclusion.Hashes[0] = base64.StdEncoding.EncodeToString(h)
		},
		"the leaf index": func(f *tlogproof.File) { f.Inclusion.LeafIndex ^= 1 },
		"a witness line": func(f *tlogproof.File) {
			f.Checkpoint = strings.Replace(f.Checkpoint, "\n— "+bv.Name(), "\n— x"+bv.Name(), 1)
		},
	}
	if len(f.Inclusion.Hashes) == 0 {
		t.Fatal("the proof has no hashes to tamper with")
	}
	for what, tamper := range tampers {
		g := f
		g.Inclusion.Hashes = append([]string(nil), f.Inclusion.Hashes...)
		tamper(&g)
		d := *doc
		d.Manifest.Extra = map[string]any{}
		for k, v := range doc.Manifest.Extra {
			d.Manifest.Extra[k] = v
		}
		d.Manifest.Extra["host_log"] = g
		if _, err := archive.Verify(&d, archive.Options{}); err == nil {
			t.Errorf("an archive whose proof has %s changed verifies", what)
		}
	}
	stats := b.Mir.Stats()
	if stats.ProofsStored.Load() < 1 || stats.ProofsRefused.Load() != 0 {
		t.Fatalf("stored %d, refused %d", stats.ProofsStored.Load(), stats.ProofsRefused.Load())
	}
	if !strings.Contains(string(getBody(t, b.URL+"/metrics")), "adp_mirror_hostlog_proofs_stored_total") {
		t.Fatal("no proof counters in /metrics")
	}

	// Restart B with A gone: the proof stays, nothing is fetched.
	a.Stop()
	b = b.Restart(t)
	d2, err := archive.ParseJSON(getBody(t, base+"/archive"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := archive.Verify(d2, archive.Options{}); err != nil {
		t.Fatalf("after restart: %v", err)
	}
	if j, _ := json.Marshal(d2.Manifest.Extra["host_log"]); string(j) != string(proofJSON) {
		t.Fatalf("after restart host_log is\n%s\nnot\n%s", j, proofJSON)
	}
	scansPass(t, b, 3)
	if n := b.Mir.Stats().ProofsFetched.Load(); n != 0 {
		t.Fatalf("%d proof fetches after restart for a room whose witnessed proof is stored", n)
	}

	// Purging the room drops its proof with it.
	key := mirror.HostLogKeyForTest(hk, id)
	if err := b.Node.DB().View(func(txn *badger.Txn) error { _, err := txn.Get(key); return err }); err != nil {
		t.Fatalf("stored proof: %v", err)
	}
	if err := b.Mir.RemoveTarget(mirror.TargetHost+":"+string(hk), true); err != nil {
		t.Fatal(err)
	}
	if err := b.Node.DB().View(func(txn *badger.Txn) error { _, err := txn.Get(key); return err }); !errors.Is(err, badger.ErrKeyNotFound) {
		t.Fatalf("after purge the proof is still stored (%v)", err)
	}
}

// fakeProof builds a proof file of leaf data recordHash in a one-leaf-plus
// tree under origin, signed by key: well formed and valid on its own.
func fakeProof(t *testing.T, recordHash, origin string, key ed25519.PrivateKey) tlogproof.File {
	t.Helper()
	raw, err := identity.DecodeB64Len(recordHash, 32)
	if err != nil {
		t.Fatal(err)
	}
	var l fakeLog
	l.add(t, "other", string(raw), "more")
	p, err := sumtlog.ProveRecord(l.n, 1, &l)
	if err != nil {
		t.Fatal(err)
	}
	hs := make([]string, len(p))
	for i, h := range p {
		hs[i] = base64.StdEncoding.EncodeToString(h[:])
	}
	vkey, err := tlogproof.VerifierKey(origin, key.Public().(ed25519.PublicKey))
	if err != nil {
		t.Fatal(err)
	}
	f := tlogproof.File{Type: tlogproof.FileType, VerifierKey: vkey}
	f.RecordProof = tlogproof.RecordProof{RecordHash: recordHash, Checkpoint: string(l.signed(t, origin, key)),
		Inclusion: tlogproof.InclusionProof{LeafIndex: 1, TreeSize: uint64(l.n), Hashes: hs}}
	if _, _, err := tlogproof.VerifyFile(f); err != nil {
		t.Fatalf("fake proof does not verify on its own: %v", err)
	}
	return f
}

// TestMirrorHostLogHostile: the room's host answers 404, garbage, an
// oversized body (a valid proof padded past 64 KiB), a proof of another
// record, one signed by another key, one for another log origin. Each is
// refused, nothing is stored or embedded, and the room's backoff doubles
// from 5 s (no fetch happens while it runs). The honest proof then is
// stored.
func TestMirrorHostLogHostile(t *testing.T) {
	clock := adptest.NewClock()
	b := fedtest.Start(t, "B", t.TempDir(), clock, 0, fedtest.Options{Rates: noRates, Mirror: true})
	a, tl := startLogHost(t, clock)
	alice := adptest.NewAgent("alice")
	id := fedtest.CreateRoom(t, a, alice, room.Public, "hostile")
	first := fedtest.MustSubmit(t, a, alice, "message.create", id, msg("one")).Record.Hash
	fedtest.MustSubmit(t, a, alice, "message.create", id, msg("two"))
	mirrorOf(t, b, a, id)
	last := mirrored(t, a, b, id)
	honest := covered(t, tl, last)
	other := covered(t, tl, first)
	hk := a.Fed.HostKey()
	aKey, err := federation.LoadOrCreateKey(a.Dir)
	if err != nil {
		t.Fatal(err)
	}
	_, stranger, _ := ed25519.GenerateKey(rand.Reader)
	_, wKey, _ := ed25519.GenerateKey(rand.Reader) // a witness B does not know yet
	origin := tlogproof.Origin(a.Node.Host())
	asJSON := func(f tlogproof.File) []byte { b, _ := json.Marshal(f); return b }
	oversized := append(asJSON(honest), []byte(strings.Repeat(" ", 64<<10))...)
	answers := []struct {
		what   string
		status int
		body   []byte
	}{
		{"404", http.StatusNotFound, []byte(`{"error":{"code":"not_found"}}`)},
		{"garbage", http.StatusOK, []byte("\x00not json{")},
		{"an oversized body", http.StatusOK, oversized},
		{"a proof of another record", http.StatusOK, asJSON(other)},
		{"a proof signed by another key", http.StatusOK, asJSON(fakeProof(t, last, origin, stranger))},
		{"a proof for another log origin", http.StatusOK, asJSON(fakeProof(t, last, "evil.example/adp-log", aKey))},
		{"the honest proof", http.StatusOK, asJSON(honest)},
		{"the honest proof with a witness", http.StatusOK, asJSON(cosigned(t, honest, wKey))},
	}
	var mode atomic.Int64
	fake := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ans := answers[mode.Load()]
		if r.URL.Path != mirror.InclusionPath || r.URL.Query().Get("record_hash") != last {
			t.Errorf("fetched %s", r.URL)
		}
		w.WriteHeader(ans.status)
		w.Write(ans.body)
	}))
	defer fake.Close()
	b.Mir.SetHostLogBaseForTest(fake.URL)

	clock.Advance(61 * time.Minute) // the room ends
	r, _ := b.Mir.Room(id, hk)
	noProof := func(what string) {
		t.Helper()
		a, err := r.Archive(clock.Ms())
		if err != nil {
			t.Fatal(err)
		}
		if a.Manifest.Extra["host_log"] != nil {
			t.Fatalf("after %s the archive embeds a proof", what)
		}
		err = b.Node.DB().View(func(txn *badger.Txn) error {
			_, err := txn.Get(mirror.HostLogKeyForTest(hk, id))
			return err
		})
		if !errors.Is(err, badger.ErrKeyNotFound) {
			t.Fatalf("after %s a proof is stored (%v)", what, err)
		}
	}
	for i, ans := range answers[:len(answers)-2] {
		mode.Store(int64(i))
		if i > 0 {
			b.Mir.ExpireHostLogBackoffForTest()
		}
		want := proofBackoff(i)
		testwait.Until(t, 30*time.Second, ans.what+" refused", func() bool {
			bo, queued := b.Mir.HostLogBackoffForTest(hk, id)
			return bo == want && !queued
		})
		st := b.Mir.Stats()
		if st.ProofsRefused.Load() != int64(i+1) || st.ProofsFetched.Load() != int64(i+1) || st.ProofsStored.Load() != 0 {
			t.Fatalf("after %s: fetched %d, refused %d, stored %d", ans.what, st.ProofsFetched.Load(), st.ProofsRefused.Load(), st.ProofsStored.Load())
		}
		noProof(ans.what)
		// The backoff holds: scans pass, no fetch.
		scansPass(t, b, 3)
		if n := b.Mir.Stats().ProofsFetched.Load(); n != int64(i+1) {
			t.Fatalf("%d fetches during the backoff after %s", n, ans.what)
		}
	}

	// The same fetcher stores the honest answer; a witnessed one later
	// replaces it, and the unwitnessed one does not come back.
	honestAt, witnessedAt := len(answers)-2, len(answers)-1
	embedded := func(stored int64, witnesses int) {
		t.Helper()
		testwait.Until(t, 30*time.Second, fmt.Sprint(stored, " proofs stored"), func() bool {
			_, queued := b.Mir.HostLogBackoffForTest(hk, id)
			return b.Mir.Stats().ProofsStored.Load() == stored && !queued
		})
		doc, err := r.Archive(clock.Ms())
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := json.Marshal(doc)
		d, err := archive.ParseJSON(raw)
		if err != nil {
			t.Fatal(err)
		}
		rep, err := archive.Verify(d, archive.Options{})
		if err != nil || d.Manifest.Extra["host_log"] == nil || len(rep.Witnesses) != witnesses {
			t.Fatalf("archive with a stored proof: %v (%d witnesses, want %d)", err, len(rep.Witnesses), witnesses)
		}
	}
	for _, step := range []struct {
		answer    int
		stored    int64
		witnesses int
	}{{honestAt, 1, 0}, {witnessedAt, 2, 1}, {honestAt, 2, 1}} {
		mode.Store(int64(step.answer))
		fetched := b.Mir.Stats().ProofsFetched.Load()
		b.Mir.ExpireHostLogBackoffForTest()
		testwait.Until(t, 30*time.Second, answers[step.answer].what+" fetched", func() bool {
			_, queued := b.Mir.HostLogBackoffForTest(hk, id)
			return b.Mir.Stats().ProofsFetched.Load() > fetched && !queued
		})
		embedded(step.stored, step.witnesses)
	}
	if n := b.Mir.Stats().ProofsRefused.Load(); n != int64(honestAt) {
		t.Fatalf("%d refused, want %d", n, honestAt)
	}

	// The witness announces it witnesses A's log: its cosignature now
	// counts as known, so the same proof is stronger, and once stored
	// the room is done: no fetch follows however long it waits.
	ann, err := assertion.NewSigner(wKey).Sign(assertion.TypeWitness, assertion.Witness{
		Witness: identity.AgentIDFromKey(wKey.Public().(ed25519.PublicKey)), VKey: testWitness(t, wKey).VerifierKey(),
		URL: "http://127.0.0.1:1/v1/witness", Logs: []string{origin}}, clock.Ms())
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Mir.DeliverWitnessForTest(ann); err != nil {
		t.Fatal(err)
	}
	mode.Store(int64(witnessedAt))
	b.Mir.ExpireHostLogBackoffForTest()
	embedded(3, 1)
	fetched := b.Mir.Stats().ProofsFetched.Load()
	b.Mir.ExpireHostLogBackoffForTest()
	scansPass(t, b, 3)
	if n := b.Mir.Stats().ProofsFetched.Load(); n != fetched {
		t.Fatalf("%d fetches for a room whose proof a known witness cosigned", n-fetched)
	}
}

func testWitness(t *testing.T, key ed25519.PrivateKey) *tlogwitness.Cosigner {
	t.Helper()
	cs, err := tlogwitness.NewCosigner("w.example/test-witness", key)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// cosigned adds a test witness's cosignature/v1 line to a proof file's
// checkpoint and lists its key: a witnessed proof.
func cosigned(t *testing.T, f tlogproof.File, key ed25519.PrivateKey) tlogproof.File {
	t.Helper()
	cs := testWitness(t, key)
	body, _, ok := strings.Cut(f.Checkpoint, "\n\n")
	if !ok {
		t.Fatalf("checkpoint %q", f.Checkpoint)
	}
	f.Checkpoint += cs.Cosign([]byte(body+"\n"), uint64(time.Now().Unix()))
	f.Witnesses = []string{cs.VerifierKey()}
	return f
}

// proofBackoff is the wait after the n-th (0-based) failed fetch in a row.
func proofBackoff(n int) time.Duration { return 5 * time.Second << n }

// TestMirrorHostLogBounded: 24 rooms end at once; their host's proof
// server holds every request until released. The mirror never has more
// than 2 fetches in flight (the server never sees more), stores all 24
// once released, and after Close none of its proof goroutines is left and
// its connections to the host are closed.
func TestMirrorHostLogBounded(t *testing.T) {
	const rooms = 24
	clock := adptest.NewClock()
	b := fedtest.Start(t, "B", t.TempDir(), clock, 0, fedtest.Options{Rates: noRates, Mirror: true})
	a, tl := startLogHost(t, clock)
	alice := adptest.NewAgent("alice")
	ids := make([]string, rooms)
	for i := range ids {
		ids[i] = fedtest.CreateRoom(t, a, alice, room.Public, fmt.Sprint("bounded ", i))
	}
	mirrorOf(t, b, a, ids...)
	for _, id := range ids {
		covered(t, tl, mirrored(t, a, b, id))
	}

	var inflight, most, served atomic.Int64
	var conns atomic.Int64
	gate := make(chan struct{})
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := inflight.Add(1)
		defer inflight.Add(-1)
		for {
			m := most.Load()
			if n <= m || most.CompareAndSwap(m, n) {
				break
			}
		}
		select {
		case <-gate:
		case <-r.Context().Done():
			return
		}
		leaf, err := tlogproof.RecordLeaf(r.URL.Query().Get("record_hash"))
		if err != nil {
			http.Error(w, "bad hash", http.StatusBadRequest)
			return
		}
		f, err := tl.ProofFile(r.Context(), leaf)
		if err != nil {
			http.Error(w, err.Error(), http.StatusNotFound)
			return
		}
		served.Add(1)
		json.NewEncoder(w).Encode(f)
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		switch s {
		case http.StateNew:
			conns.Add(1)
		case http.StateClosed, http.StateHijacked:
			conns.Add(-1)
		}
	}
	srv.Start()
	defer srv.Close()
	b.Mir.SetHostLogBaseForTest(srv.URL)

	clock.Advance(61 * time.Minute) // every room ends
	testwait.Until(t, 30*time.Second, "2 fetches in flight", func() bool { return inflight.Load() >= 2 })
	scansPass(t, b, 3) // scans keep finding 22 rooms due; none gets a third fetch
	if n := inflight.Load(); n != 2 || most.Load() != 2 {
		t.Fatalf("%d fetches in flight (at most %d seen)", n, most.Load())
	}
	close(gate)
	testwait.Until(t, 60*time.Second, "every proof stored", func() bool { return b.Mir.Stats().ProofsStored.Load() == rooms })
	if _, m := b.Mir.HostLogForTest(); m > 2 || most.Load() > 2 {
		t.Fatalf("at most %d fetches in flight in the mirror, %d at the server", m, most.Load())
	}
	if served.Load() != rooms {
		t.Fatalf("%d proofs served for %d rooms", served.Load(), rooms)
	}
	for _, id := range ids {
		r, _ := b.Mir.Room(id, a.Fed.HostKey())
		doc, err := r.Archive(clock.Ms())
		if err != nil || doc.Manifest.Extra["host_log"] == nil {
			t.Fatalf("room %s: %v", id, err)
		}
	}

	if n := proofGoroutines(); n != proofGoroutinesRunning {
		t.Fatalf("%d proof goroutines while running, want %d", n, proofGoroutinesRunning)
	}
	b.Mir.Close()
	if n := proofGoroutines(); n != 0 {
		t.Fatalf("%d proof goroutines after Close", n)
	}
	testwait.Until(t, 30*time.Second, "the mirror's connections to the host closed", func() bool { return conns.Load() == 0 })
}

// proofGoroutinesRunning are the fetcher's goroutines: the scan and 2 workers.
const proofGoroutinesRunning = 3

// proofGoroutines counts goroutines running the mirror's proof fetcher.
func proofGoroutines() int {
	buf := make([]byte, 1<<22)
	buf = buf[:runtime.Stack(buf, true)]
	n := 0
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "mirror.(*Mirror).proofWorker") || strings.Contains(g, "mirror.(*Mirror).startHostLogs") {
			n++
		}
	}
	return n
}
