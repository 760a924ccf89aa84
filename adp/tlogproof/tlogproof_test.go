package tlogproof_test

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/binary"
	"strings"
	"testing"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/adpnode/adpnode/adp"
	"github.com/adpnode/adpnode/adp/tlogproof"
)

func leaves(n int) [][32]byte {
	out := make([][32]byte, n)
	for i := range out {
		var b [8]byte
		binary.BigEndian.PutUint64(b[:], uint64(i))
		out[i] = sha256.Sum256(b[:])
	}
	return out
}

// sumdbTree builds the tree with golang.org/x/mod/sumdb/tlog (independent
// code) so proofs and roots are checked against software we did not write.
type sumdbTree struct{ hashes map[int64]tlog.Hash }

func (s *sumdbTree) ReadHashes(idx []int64) ([]tlog.Hash, error) {
	out := make([]tlog.Hash, len(idx))
	for i, x := range idx {
		out[i] = s.hashes[x]
	}
	return out, nil
}

func buildSumdb(ls [][32]byte) *sumdbTree {
	t := &sumdbTree{hashes: map[int64]tlog.Hash{}}
	for i, l := range ls {
		hs, err := tlog.StoredHashes(int64(i), l[:], t)
		if err != nil {
			panic(err)
		}
		for j, h := range hs {
			t.hashes[tlog.StoredHashIndex(0, int64(i))+int64(j)] = h
		}
	}
	return t
}

func TestRootAndProofsAgreeWithSumdb(t *testing.T) {
	ls := leaves(300)
	st := buildSumdb(ls)
	// The incremental builder agrees with Root at every size.
	var b tlogproof.RootBuilder
	if b.Root() != tlogproof.EmptyRoot() {
		t.Fatal("an empty builder's root is not the empty tree's")
	}
	for n, l := range ls {
		b.Add(l)
		if b.Root() != tlogproof.Root(ls[:n+1]) {
			t.Fatalf("size %d: RootBuilder differs from Root", n+1)
		}
	}
	for _, n := range []int{1, 2, 3, 7, 8, 9, 255, 256, 257, 300} {
		root := tlogproof.Root(ls[:n])
		want, err := tlog.TreeHash(int64(n), st)
		if err != nil {
			t.Fatal(err)
		}
		if root != [32]byte(want) {
			t.Fatalf("size %d: root differs from sumdb/tlog", n)
		}
		for _, i := range []int{0, n / 2, n - 1} {
			rp, err := tlog.ProveRecord(int64(n), int64(i), st)
			if err != nil {
				t.Fatal(err)
			}
			var hs [][]byte
			for _, h := range rp {
				hs = append(hs, append([]byte(nil), h[:]...))
			}
			p := tlogproof.InclusionProof{LeafIndex: uint64(i), TreeSize: uint64(n), Hashes: tlogproof.EncodeHashes(hs)}
			if err := tlogproof.VerifyInclusion(p, ls[i], root); err != nil {
				t.Fatalf("size %d leaf %d: %v", n, i, err)
			}
			if err := tlogproof.VerifyInclusion(p, ls[(i+1)%n], root); n > 1 && err == nil {
				t.Fatalf("size %d leaf %d: proof verifies another leaf", n, i)
			}
		}
		if n > 1 {
			m := n / 2
			tp, err := tlog.ProveTree(int64(n), int64(m), st)
			if err != nil {
				t.Fatal(err)
			}
			var hs [][]byte
			for _, h := range tp {
				hs = append(hs, append([]byte(nil), h[:]...))
			}
			cp := tlogproof.ConsistencyProof{Size1: uint64(m), Size2: uint64(n), Hashes: tlogproof.EncodeHashes(hs)}
			if err := tlogproof.VerifyConsistency(cp, tlogproof.Root(ls[:m]), root); err != nil {
				t.Fatalf("consistency %d→%d: %v", m, n, err)
			}
			if err := tlogproof.VerifyConsistency(cp, tlogproof.Root(ls[1:m+1]), root); err == nil {
				t.Fatalf("consistency %d→%d verifies a different prefix", m, n)
			}
		}
	}
	if tlogproof.Root(nil) != tlogproof.EmptyRoot() {
		t.Fatal("empty root")
	}
}

func TestSignedCheckpointRoundTrip(t *testing.T) {
	pub, priv, _ := ed25519.GenerateKey(nil)
	origin := tlogproof.Origin("example.org:8443")
	c := tlogproof.Checkpoint{Origin: origin, Size: 3, Hash: tlogproof.Root(leaves(3))}
	signed, err := tlogproof.Sign(c, priv)
	if err != nil {
		t.Fatal(err)
	}
	v, err := tlogproof.Verifier(origin, pub)
	if err != nil {
		t.Fatal(err)
	}
	got, n, err := tlogproof.Open(signed, v)
	if err != nil {
		t.Fatal(err)
	}
	if got.Size != 3 || got.Hash != c.Hash || got.Origin != origin || len(n.Sigs) != 1 {
		t.Fatalf("round trip: %+v", got)
	}
	// The verifier key is a standard note vkey.
	vkey, _ := tlogproof.VerifierKey(origin, pub)
	if _, err := note.NewVerifier(vkey); err != nil || !strings.HasPrefix(vkey, origin+"+") {
		t.Fatalf("vkey %q: %v", vkey, err)
	}
	// Another key, a tampered text, and an origin mismatch are refused.
	pub2, priv2, _ := ed25519.GenerateKey(nil)
	v2, _ := tlogproof.Verifier(origin, pub2)
	if _, _, err := tlogproof.Open(signed, v2); err == nil {
		t.Fatal("opened with another key")
	}
	tampered := strings.Replace(string(signed), "\n3\n", "\n4\n", 1)
	if _, _, err := tlogproof.Open([]byte(tampered), v); err == nil {
		t.Fatal("opened a tampered checkpoint")
	}
	other := tlogproof.Checkpoint{Origin: "other/adp-log", Size: 1}
	s2, _ := tlogproof.Sign(other, priv2)
	vo, _ := tlogproof.Verifier("other/adp-log", pub2)
	if _, _, err := tlogproof.Open(s2, vo); err != nil {
		t.Fatal(err)
	}
}

func TestHostileCheckpointsAndProofs(t *testing.T) {
	for _, text := range []string{
		"", "o\n1\n", "o\n1\nAAAA\n", "o\n01\n" + strings.Repeat("A", 43) + "=\n", "\n1\n" + strings.Repeat("A", 43) + "=\n",
		"o\n-1\n" + strings.Repeat("A", 43) + "=\n", "o\n18446744073709551615\n" + strings.Repeat("A", 43) + "=\n",
		"o\n1\n" + strings.Repeat("A", 43) + "=", "o\n1\n" + strings.Repeat("A", 43) + "=\n\n", strings.Repeat("x", tlogproof.MaxCheckpointBytes+1),
	} {
		_, err := tlogproof.ParseCheckpoint([]byte(text))
		if e, ok := err.(*adp.Error); !ok || e.Code != adp.CodeInvalidRequest {
			t.Errorf("ParseCheckpoint(%.40q) = %v", text, err)
		}
	}
	root := tlogproof.Root(leaves(4))
	for _, p := range []tlogproof.InclusionProof{
		{LeafIndex: 4, TreeSize: 4},
		{LeafIndex: 0, TreeSize: 4, Hashes: []string{"!!"}},
		{LeafIndex: 0, TreeSize: 4, Hashes: make([]string, tlogproof.MaxProofHashes+1)},
		{LeafIndex: 0, TreeSize: 1 << 62, Hashes: nil},
	} {
		if err := tlogproof.VerifyInclusion(p, leaves(1)[0], root); err == nil {
			t.Errorf("VerifyInclusion(%+v) accepted", p)
		}
	}
	if err := tlogproof.VerifyConsistency(tlogproof.ConsistencyProof{Size1: 5, Size2: 4}, root, root); err == nil {
		t.Error("consistency with size1 > size2 accepted")
	}
	if _, err := tlogproof.RecordLeaf("short"); err == nil {
		t.Error("short record hash accepted")
	}
}
