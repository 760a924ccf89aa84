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
