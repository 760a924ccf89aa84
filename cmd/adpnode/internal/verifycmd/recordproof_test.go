package verifycmd_test

import (
	"bytes"
	"crypto/ed25519"
	"encoding/json"
	"strings"
	"testing"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/adpnode/adpnode/adp/identity"
	"github.com/adpnode/adpnode/adp/record"
	"github.com/adpnode/adpnode/adp/tlogproof"
	"github.com/adpnode/adpnode/adp/tlogwitness"
	"github.com/adpnode/adpnode/cmd/adpnode/internal/verifycmd"
	"github.com/adpnode/adpnode/internal/adptest"
)

type hashes map[int64]tlog.Hash

func (h hashes) ReadHashes(idx []int64) ([]tlog.Hash, error) {
	out := make([]tlog.Hash, len(idx))
	for i, x := range idx {
		out[i] = h[x]
	}
	return out, nil
}

// proofFile builds a log of five leaves whose leaf 3 is a real record and
// returns the record proof file for it.
func proofFile(t *testing.T, agent string) (tlogproof.File, ed25519.PrivateKey) {
	a := adptest.NewAgent(agent)
	raw := a.Envelope(1_700_000_000_000, "room.create", "", 0, "", map[string]any{"topic": "t", "visibility": "public",
		"start_time": 1_700_000_000_000, "end_time": 1_700_003_600_000})
	env, err := identity.OpenEnvelope(raw)
	if err != nil {
		t.Fatal(err)
	}
	rec := record.New("c0000000000000000000", 1, "", env, 1_700_000_000_001)
	leaf, _ := tlogproof.RecordLeaf(rec.Hash)
	leaves := [][32]byte{{1}, {2}, {3}, leaf, {5}}
	st := hashes{}
	for i, l := range leaves {
		hs, err := tlog.StoredHashes(int64(i), l[:], st)
		if err != nil {
			t.Fatal(err)
		}
		for j, h := range hs {
			st[tlog.StoredHashIndex(0, int64(i))+int64(j)] = h
		}
	}
	rp, err := tlog.ProveRecord(5, 3, st)
	if err != nil {
		t.Fatal(err)
	}
	var hs [][]byte
	for _, h := range rp {
		hs = append(hs, append([]byte(nil), h[:]...))
	}
	pub, key, _ := ed25519.GenerateKey(nil)
	origin := tlogproof.Origin("127.0.0.1:9")
	signed, err := tlogproof.Sign(tlogproof.Checkpoint{Origin: origin, Size: 5, Hash: tlogproof.Root(leaves)}, key)
	if err != nil {
		t.Fatal(err)
	}
	vkey, _ := tlogproof.VerifierKey(origin, pub)
	recJSON, _ := rec.MarshalJSON()
	return tlogproof.File{Type: tlogproof.FileType, VerifierKey: vkey, Record: recJSON, RecordProof: tlogproof.RecordProof{
		RecordHash: rec.Hash, Checkpoint: string(signed),
		Inclusion: tlogproof.InclusionProof{LeafIndex: 3, TreeSize: 5, Hashes: tlogproof.EncodeHashes(hs)}}}, key
}

func run(t *testing.T, f any) (bool, string) {
	b, _ := json.Marshal(f)
	var out bytes.Buffer
	ok, err := verifycmd.File(&out, "proof.json", b)
	if err != nil {
		t.Fatal(err)
	}
	return ok, out.String()
}

func TestVerifyRecordProofOffline(t *testing.T) {
	f, _ := proofFile(t, "alice")
	ok, out := run(t, f)
	if !ok || !strings.Contains(out, "OK record c0000000000000000000 seq 1") || !strings.Contains(out, "leaf 3 of log 127.0.0.1:9/adp-log at size 5") {
		t.Fatalf("verify: %s", out)
	}
	// Without the record, the hash alone.
	g := f
	g.Record = nil
	if ok, out := run(t, g); !ok || !strings.Contains(out, "OK record hash") {
		t.Fatalf("hash only: %s", out)
	}
	// Hostile variants: each fails with a reason.
	other, _ := proofFile(t, "bob")
	for name, mut := range map[string]func(*tlogproof.File){
		"another record":   func(f *tlogproof.File) { f.Record = other.Record },
		"another key":      func(f *tlogproof.File) { f.VerifierKey = other.VerifierKey },
		"wrong index":      func(f *tlogproof.File) { f.Inclusion.LeafIndex = 2 },
		"size mismatch":    func(f *tlogproof.File) { f.Inclusion.TreeSize = 6 },
		"truncated proof":  func(f *tlogproof.File) { f.Inclusion.Hashes = f.Inclusion.Hashes[1:] },
		"bad verifier key": func(f *tlogproof.File) { f.VerifierKey = "x+1+AAAA" },
		"tampered checkpoint": func(f *tlogproof.File) {
			f.Checkpoint = strings.Replace(f.Checkpoint, "\n5\n", "\n6\n", 1)
		},
	} {
		g := f
		g.Inclusion.Hashes = append([]string(nil), f.Inclusion.Hashes...)
		mut(&g)
		if ok, out := run(t, g); ok || !strings.HasPrefix(out, "FAIL record proof") {
			t.Errorf("%s: %s", name, out)
		}
	}
	// Unknown members are refused.
	b, _ := json.Marshal(f)
	b = bytes.Replace(b, []byte(`{"type"`), []byte(`{"extra":1,"type"`), 1)
	var buf bytes.Buffer
	if ok, _ := verifycmd.File(&buf, "p.json", b); ok {
		t.Fatal("unknown member accepted")
	}
}

// A proof whose checkpoint carries witnesses' cosignature/v1 lines: verify
// checks one line per listed key and prints each witness with its key; a
// listed key without a line, a bad line, or a malformed key fails.
func TestVerifyRecordProofWitnesses(t *testing.T) {
	f, _ := proofFile(t, "alice")
	_, k1, _ := ed25519.GenerateKey(nil)
	_, k2, _ := ed25519.GenerateKey(nil)
	w1, _ := tlogwitness.NewCosigner("w1.test/adp-witness", k1)
	w2, _ := tlogwitness.NewCosigner("w2.test/adp-witness", k2)
	body, _, _ := strings.Cut(f.Checkpoint, "\n\n")
	body += "\n"
	f.Checkpoint += w1.Cosign([]byte(body), 1_780_000_000) + w2.Cosign([]byte(body), 1_780_000_001)
	f.Witnesses = []string{w1.VerifierKey(), w2.VerifierKey()}
	ok, out := run(t, f)
	if !ok || !strings.Contains(out, ", 2 witnesses") || !strings.Contains(out, "witness w1.test/adp-witness cosigned the log checkpoint at 2026-") ||
		!strings.Contains(out, w2.VerifierKey()) {
		t.Fatalf("verify: %s", out)
	}
	_, k3, _ := ed25519.GenerateKey(nil)
	w3, _ := tlogwitness.NewCosigner("w3.test/adp-witness", k3)
	lines := strings.SplitAfter(f.Checkpoint, "\n")
	for name, mut := range map[string]func(*tlogproof.File){
		"a listed witness without a line": func(f *tlogproof.File) { f.Witnesses = append(f.Witnesses, w3.VerifierKey()) },
		"a malformed witness key":         func(f *tlogproof.File) { f.Witnesses = []string{"w1.test+zz+AAAA"} },
		"a key listed twice":              func(f *tlogproof.File) { f.Witnesses = []string{w1.VerifierKey(), w1.VerifierKey()} },
		"a line by another key under the listed name": func(f *tlogproof.File) {
			imposter, _ := tlogwitness.NewCosigner("w1.test/adp-witness", k3)
			f.Checkpoint = strings.Join(lines[:len(lines)-3], "") + imposter.Cosign([]byte(body), 1_780_000_000) + lines[len(lines)-2]
		},
	} {
		g := f
		g.Witnesses = append([]string(nil), f.Witnesses...)
		mut(&g)
		if ok, out := run(t, g); ok || !strings.HasPrefix(out, "FAIL record proof") {
			t.Errorf("%s: %s", name, out)
		}
	}
}
