package tlogwitness

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"strconv"
	"testing"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/adpnode/adpnode/adp"
	"github.com/adpnode/adpnode/adp/tlogproof"
)

// memLog is an RFC 6962 log in memory, signed like an adpnode host's.
type memLog struct {
	origin string
	signer note.Signer
	v      note.Verifier
	hashes []tlog.Hash // tlog stored hashes
	n      int64
}

func newMemLog(t testing.TB, origin string) *memLog {
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	return newMemLogKey(t, origin, pub, priv)
}

func newMemLogKey(t testing.TB, origin string, pub ed25519.PublicKey, priv ed25519.PrivateKey) *memLog {
	s, err := tlogproof.Signer(origin, priv)
	if err != nil {
		t.Fatal(err)
	}
	v, err := tlogproof.Verifier(origin, pub)
	if err != nil {
		t.Fatal(err)
	}
	return &memLog{origin: origin, signer: s, v: v}
}

func (l *memLog) ReadHashes(idx []int64) ([]tlog.Hash, error) {
	out := make([]tlog.Hash, len(idx))
	for i, x := range idx {
		out[i] = l.hashes[x]
	}
	return out, nil
}

func (l *memLog) add(t testing.TB, leaves ...string) {
	for _, d := range leaves {
		hs, err := tlog.StoredHashes(l.n, []byte(d), l)
		if err != nil {
			t.Fatal(err)
		}
		l.hashes = append(l.hashes, hs...)
		l.n++
	}
}

func (l *memLog) root(t testing.TB, n int64) tlog.Hash {
	h, err := tlog.TreeHash(n, l)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func (l *memLog) checkpoint(t testing.TB) []byte {
	body := fmt.Sprintf("%s\n%d\n%s\n", l.origin, l.n, l.root(t, l.n))
	b, err := note.Sign(&note.Note{Text: body}, l.signer)
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

func (l *memLog) info() Log { return Log{Origin: l.origin, Verifier: l.v} }

func leaves(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = prefix + strconv.Itoa(i)
	}
	return out
}

func check(t *testing.T, l Log, st *State, old uint64, proof []tlog.Hash, cp []byte) (*Decision, error) {
	t.Helper()
	req, err := ParseRequest(FormatRequest(old, proof, cp))
	if err != nil {
		t.Fatalf("parse own request: %v", err)
	}
	return Check(l, st, req)
}

func TestWitnessFollowsAGrowingLog(t *testing.T) {
	lg := newMemLog(t, "example.org/log")
	wpub, wpriv, _ := ed25519.GenerateKey(rand.Reader)
	cs, err := NewCosigner("witness.example", wpriv)
	if err != nil {
		t.Fatal(err)
	}
	cv, err := NewCosignatureVerifier(cs.VerifierKey())
	if err != nil {
		t.Fatal(err)
	}
	if cs.VerifierKey() != CosignatureVerifierKey("witness.example", wpub) || cv.Name() != "witness.example" {
		t.Fatalf("vkey %s", cs.VerifierKey())
	}
	var st *State
	sizes := []int{3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 0, 8, 9, 7, 9, 32, 1, 200}
	for i, grow := range sizes {
		lg.add(t, leaves(fmt.Sprintf("r%d-", i), grow)...)
		old := uint64(0)
		if st != nil {
			old = st.Size
		}
		cp := lg.checkpoint(t)
		d, err := check(t, lg.info(), st, old, lg.proof(t, int64(old)), cp)
		if err != nil {
			t.Fatalf("step %d (size %d from %d): %v", i, lg.n, old, err)
		}
		if d.Next.Size != uint64(lg.n) || d.Next.Hash != [32]byte(lg.root(t, lg.n)) {
			t.Fatalf("step %d: next state %d", i, d.Next.Size)
		}
		line := cs.Cosign(d.Body, uint64(1700000000+i))
		n, err := note.Open(append(append([]byte{}, cp...), line...), note.VerifierList(lg.v, cv))
		if err != nil || len(n.Sigs) != 2 {
			t.Fatalf("step %d: cosigned note does not open: %v", i, err)
		}
		if ts, ok := CosignatureTime(n.Sigs[1].Base64); !ok || ts != uint64(1700000000+i) {
			t.Fatalf("cosignature time %d %v", ts, ok)
		}
		st = &d.Next
	}
}

// TestCosignatureBytes checks the cosignature/v1 encoding byte by byte
// against C2SP tlog-cosignature, independently of Cosign.
func TestCosignatureBytes(t *testing.T) {
	seed := make([]byte, 32)
	key := ed25519.NewKeyFromSeed(seed)
	pub := key.Public().(ed25519.PublicKey)
	cs, _ := NewCosigner("w.example/1", key)
	body := []byte("o\n1\n" + tlog.RecordHash([]byte("x")).String() + "\n")
	line := cs.Cosign(body, 42)
	n, err := note.Open(append(append(append([]byte{}, body...), '\n'), line...), note.VerifierList(mustCV(t, cs.VerifierKey())))
	if err != nil {
		t.Fatal(err)
	}
	raw := mustB64(t, n.Sigs[0].Base64)
	if len(raw) != 76 || binary.BigEndian.Uint64(raw[4:12]) != 42 {
		t.Fatalf("signature is %d bytes", len(raw))
	}
	msg := "cosignature/v1\ntime 42\n" + string(body)
	if !ed25519.Verify(pub, []byte(msg), raw[12:]) {
		t.Fatal("signature is not over cosignature/v1 || time || body")
	}
	// Key ID: SHA-256(name || 0x0A || 0x04 || key)[:4].
	if got, want := binary.BigEndian.Uint32(raw), cosignatureKeyID("w.example/1", pub); got != want {
		t.Fatalf("key ID %x, want %x", got, want)
	}
	// A cosignature is not a plain Ed25519 note signature: the ordinary
	// verifier for the same key and name must not accept it.
	v, _ := tlogproof.Verifier("w.example/1", pub)
	if v.KeyHash() == cs.id {
		t.Fatal("cosignature key ID equals the Ed25519 note key ID")
	}
}

func mustCV(t *testing.T, vkey string) note.Verifier {
	v, err := NewCosignatureVerifier(vkey)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func mustB64(t *testing.T, s string) []byte {
	b, err := b64(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestWitnessRefusals(t *testing.T) {
	lg := newMemLog(t, "example.org/log")
	lg.add(t, leaves("a", 10)...)
	d, err := check(t, lg.info(), nil, 0, nil, lg.checkpoint(t))
	if err != nil {
		t.Fatal(err)
	}
	st := &d.Next
	lg.add(t, leaves("b", 7)...)
	good := lg.proof(t, 10)

	other := newMemLog(t, "example.org/log") // same origin, another key
	other.add(t, leaves("a", 17)...)

	bad := append([]tlog.Hash{}, good...)
	bad[0][0] ^= 1

	cases := []struct {
		name  string
		old   uint64
		proof []tlog.Hash
		cp    []byte
		code  adp.Code
	}{
		{"wrong key", 10, good, other.checkpoint(t), adp.CodeUntrustedCheckpoint},
		{"stale old size", 9, good, lg.checkpoint(t), adp.CodeCheckpointStale},
		{"old size beyond the checkpoint", 18, good, lg.checkpoint(t), adp.CodeInvalidRequest},
		{"bad proof", 10, bad, lg.checkpoint(t), adp.CodeInconsistentCheckpoint},
		{"no proof", 10, nil, lg.checkpoint(t), adp.CodeInconsistentCheckpoint},
		{"proof from zero", 0, good, lg.checkpoint(t), adp.CodeCheckpointStale},
	}
	for _, c := range cases {
		d, err := check(t, lg.info(), st, c.old, c.proof, c.cp)
		if adp.CodeOf(err) != c.code {
			t.Errorf("%s: %v, want %s", c.name, err, c.code)
			continue
		}
		if d != nil && d.SplitView != nil {
			t.Errorf("%s: a refusal that proves nothing yields a split view", c.name)
		}
	}
	_, err = check(t, lg.info(), st, 9, good, lg.checkpoint(t))
	if e := adp.AsError(err); e.Data["size"] != uint64(10) {
		t.Fatalf("stale answer carries size %v", e.Data["size"])
	}
	// Replaying the cosigned checkpoint is fine (fresh cosignature); an
	// older one is refused.
	old := d.Next.Note
	if _, err := check(t, lg.info(), st, 10, nil, old); err != nil {
		t.Fatalf("replay of the cosigned checkpoint: %v", err)
	}
	d2, err := check(t, lg.info(), st, 10, good, lg.checkpoint(t))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := check(t, lg.info(), &d2.Next, 17, nil, old); adp.CodeOf(err) != adp.CodeInvalidRequest {
		t.Fatalf("replay of an older checkpoint: %v", err)
	}
	if _, err := check(t, lg.info(), &d2.Next, 10, nil, old); adp.CodeOf(err) != adp.CodeCheckpointStale {
		t.Fatalf("replay of an older checkpoint with its own size: %v", err)
	}
}

func TestParseRequestHostile(t *testing.T) {
	lg := newMemLog(t, "o")
	lg.add(t, "x")
	cp := lg.checkpoint(t)
	h := tlog.RecordHash([]byte("y"))
	for name, body := range map[string][]byte{
		"empty":          nil,
		"no old":         []byte("\n\n" + string(cp)),
		"leading zero":   []byte("old 01\n\n" + string(cp)),
		"negative":       []byte("old -1\n\n" + string(cp)),
		"huge number":    []byte("old 99999999999999999999999\n\n" + string(cp)),
		"bad hash":       []byte("old 1\nnot-base64\n\n" + string(cp)),
		"short hash":     []byte("old 1\nAAAA\n\n" + string(cp)),
		"no blank line":  []byte("old 1\n" + h.String()),
		"no checkpoint":  []byte("old 1\n\n"),
		"too many":       FormatRequest(1, make([]tlog.Hash, MaxProofHashes+1), cp),
		"too large body": append(FormatRequest(0, nil, cp), make([]byte, MaxRequestBytes)...),
	} {
		if _, err := ParseRequest(body); err == nil {
			t.Errorf("%s: accepted", name)
		} else if c := adp.CodeOf(err); c != adp.CodeInvalidRequest && c != adp.CodePayloadTooLarge {
			t.Errorf("%s: code %s", name, c)
		}
	}
	// c2sp.org/tlog-witness: at most 63 proof lines; 63 parse.
	if r, err := ParseRequest(FormatRequest(1, make([]tlog.Hash, 63), cp)); err != nil || len(r.Proof) != 63 {
		t.Errorf("a request with 63 proof lines: %v", err)
	}
	if _, err := ParseRequest(FormatRequest(1, make([]tlog.Hash, 64), cp)); err == nil {
		t.Error("a request with 64 proof lines parsed")
	}
	st := &State{}
	for name, n := range map[string][]byte{
		"unsigned":      []byte("o\n1\n" + h.String() + "\n"),
		"control chars": []byte("o\n1\x01\n" + h.String() + "\n\n— o AAAA\n"),
		"huge note":     append(cp, make([]byte, MaxNoteBytes)...),
	} {
		if _, err := Check(lg.info(), st, &Request{Note: n}); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	for name, body := range map[string]string{
		"no size":   "o\n",
		"size text": "o\nten\n" + h.String() + "\n",
		"size +1":   "o\n+1\n" + h.String() + "\n",
		"empty ext": "o\n1\n" + h.String() + "\n\n",
		"zero size": "o\n0\n" + h.String() + "\n",
		"no nl":     "o\n1\n" + h.String(),
	} {
		if _, err := tlogproof.ParseCheckpoint([]byte(body)); err == nil && name != "zero size" {
			t.Errorf("checkpoint %s: accepted", name)
		}
	}
}

// TestPrefixRootAgreesWithTlog: for every pair of sizes up to 40 the
// proof sumdb/tlog makes yields the prefix's root (with the prefix root
// prepended at power-of-two sizes), and a proof of another tree does not
// reproduce the root.
func TestPrefixRootAgreesWithTlog(t *testing.T) {
	lg := newMemLog(t, "o")
	lg.add(t, leaves("l", 40)...)
	for m := int64(2); m <= 40; m++ {
		for n := int64(1); n < m; n++ {
			p, err := tlog.ProveTree(m, n, lg)
			if err != nil {
				t.Fatal(err)
			}
			if isPow2(uint64(n)) {
				p = append([]tlog.Hash{lg.root(t, n)}, p...)
			}
			got, ok := PrefixRoot(uint64(n), uint64(m), p, lg.root(t, m))
			if !ok || got != lg.root(t, n) {
				t.Fatalf("PrefixRoot(%d, %d) = %v, %v", n, m, got, ok)
			}
			if _, ok := PrefixRoot(uint64(n), uint64(m), p, lg.root(t, m-1)); ok {
				t.Fatalf("PrefixRoot(%d, %d) accepts another root", n, m)
			}
		}
	}
}

// TestSplitView: a host that forks is caught at equal sizes and at a
// larger size, and the evidence verifies offline; made-up evidence does
// not.
func TestSplitView(t *testing.T) {
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	honest := newMemLogKey(t, "host.example/log", pub, priv)
	fork := newMemLogKey(t, "host.example/log", pub, priv)
	honest.add(t, leaves("a", 5)...)
	fork.add(t, leaves("a", 4)...)
	fork.add(t, "evil")

	d, err := check(t, honest.info(), nil, 0, nil, honest.checkpoint(t))
	if err != nil {
		t.Fatal(err)
	}
	st := d.Next

	// Same size, other root: 409 with the size held (C2SP tlog-witness).
	d, err = check(t, honest.info(), &st, 5, nil, fork.checkpoint(t))
	if adp.CodeOf(err) != adp.CodeCheckpointStale || adp.AsError(err).Data["size"] != uint64(5) || d == nil || d.SplitView == nil {
		t.Fatalf("same-size fork: %v", err)
	}
	if err := d.SplitView.Verify(honest.info()); err != nil {
		t.Fatalf("same-size split view: %v", err)
	}

	// Larger size, proof from the fork's own tree.
	fork.add(t, leaves("f", 6)...)
	d, err = check(t, honest.info(), &st, 5, fork.proof(t, 5), fork.checkpoint(t))
	if adp.CodeOf(err) != adp.CodeInconsistentCheckpoint || d == nil || d.SplitView == nil {
		t.Fatalf("growing fork: %v", err)
	}
	sv := d.SplitView
	if err := sv.Verify(honest.info()); err != nil {
		t.Fatalf("growing split view: %v", err)
	}

	// Forgeries.
	honest.add(t, leaves("h", 6)...)
	consistent := &SplitView{Notes: [2][]byte{st.Note, honest.checkpoint(t)}, Proof: honest.proof(t, 5)}
	if err := consistent.Verify(honest.info()); err == nil {
		t.Fatal("a consistent pair is accepted as a split view")
	}
	garbage := &SplitView{Notes: sv.Notes, Proof: append([]tlog.Hash{}, sv.Proof...)}
	garbage.Proof[0][3] ^= 1
	if err := garbage.Verify(honest.info()); err == nil {
		t.Fatal("a proof of no tree is accepted")
	}
	other := newMemLog(t, "host.example/log")
	if err := sv.Verify(other.info()); err == nil {
		t.Fatal("a split view verifies under another key")
	}
	same := &SplitView{Notes: [2][]byte{st.Note, st.Note}}
	if err := same.Verify(honest.info()); err == nil {
		t.Fatal("one checkpoint twice is accepted")
	}
	swapped := &SplitView{Notes: [2][]byte{sv.Notes[1], sv.Notes[0]}, Proof: sv.Proof}
	if err := swapped.Verify(honest.info()); err == nil {
		t.Fatal("swapped notes are accepted")
	}
}

// TestSplitViewStopsCosigning protects: once the stored state holds a
// split view, Check refuses every checkpoint of the log (403, reason
// log_forked), even one that provably extends the cosigned tree.
func TestSplitViewStopsCosigning(t *testing.T) {
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	honest := newMemLogKey(t, "host.example/log", pub, priv)
	fork := newMemLogKey(t, "host.example/log", pub, priv)
	honest.add(t, leaves("a", 5)...)
	fork.add(t, leaves("b", 5)...)
	d, err := check(t, honest.info(), nil, 0, nil, honest.checkpoint(t))
	if err != nil {
		t.Fatal(err)
	}
	st := d.Next
	d, err = check(t, honest.info(), &st, 5, nil, fork.checkpoint(t))
	if err == nil || d == nil || d.SplitView == nil {
		t.Fatalf("fork: %v", err)
	}
	st.SplitView = d.SplitView
	honest.add(t, leaves("c", 3)...)
	if _, err := check(t, honest.info(), &st, 5, honest.proof(t, 5), honest.checkpoint(t)); adp.CodeOf(err) != adp.CodeUntrustedCheckpoint || adp.AsError(err).Data["reason"] != "log_forked" {
		t.Fatalf("extension of a forked log: %v", err)
	}
	st.SplitView = nil
	if _, err := check(t, honest.info(), &st, 5, honest.proof(t, 5), honest.checkpoint(t)); err != nil {
		t.Fatalf("the same extension without the split view: %v", err)
	}
}
