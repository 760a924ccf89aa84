package archive

import (
	"crypto/ed25519"
	"errors"
	"strings"
	"testing"

	"github.com/adpnode/adpnode/adp/identity"
	"github.com/adpnode/adpnode/adp/tlogproof"
	"github.com/adpnode/adpnode/adp/tlogwitness"
)

// TestArchiveRootIsMerkleRoot: archive_root is the RFC 6962 root over the
// record hashes (the host log's leaves), legacy archives whose root is
// events_sha3_256 still verify, and a host_log proof of the last record
// verifies against the host key and is refused when it lies.
func TestArchiveRootIsMerkleRoot(t *testing.T) {
	h := generate(t, 40)
	a := h.archive(t)
	leaves := make([][32]byte, len(h.recs))
	for i, r := range h.recs {
		leaves[i], _ = tlogproof.RecordLeaf(r.Hash)
	}
	want := tlogproof.Root(leaves)
	if a.Manifest.ArchiveRoot != identity.EncodeB64(want[:]) {
		t.Fatal("archive_root is not the Merkle root of the record hashes")
	}
	if _, err := Verify(a, Options{}); err != nil {
		t.Fatal(err)
	}
	legacy := h.archive(t)
	legacy.Manifest.ArchiveRoot = legacy.Manifest.EventsSHA3
	if _, err := Verify(legacy, Options{}); err != nil {
		t.Fatalf("legacy archive_root: %v", err)
	}

	// The host log holds the room's records after two leaves of others.
	pub, key, _ := ed25519.GenerateKey(nil)
	all := append([][32]byte{{1}, {2}}, leaves...)
	origin := tlogproof.Origin("127.0.0.1:9")
	signed, _ := tlogproof.Sign(tlogproof.Checkpoint{Origin: origin, Size: uint64(len(all)), Hash: tlogproof.Root(all)}, key)
	vkey, _ := tlogproof.VerifierKey(origin, pub)
	file := func(index int, hashes []string) *tlogproof.File {
		return &tlogproof.File{Type: tlogproof.FileType, VerifierKey: vkey, RecordProof: tlogproof.RecordProof{
			RecordHash: a.Manifest.LastHash, Checkpoint: string(signed),
			Inclusion: tlogproof.InclusionProof{LeafIndex: uint64(index), TreeSize: uint64(len(all)), Hashes: hashes}}}
	}
	// The proof of the last leaf of a tree of n: the roots of the perfect
	// subtrees to its left, nearest first (computed with tlogproof.Root).
	n := len(all)
	var hs []string
	for lo, size := 0, 32; size > 0; size /= 2 {
		if lo+size <= n-1 {
			r := tlogproof.Root(all[lo : lo+size])
			hs = append([]string{tlogproof.EncodeHashes([][]byte{r[:]})[0]}, hs...)
			lo += size
		}
	}
	good := h.archive(t)
	good.Manifest.Extra["host_key"] = string(identity.AgentIDFromKey(pub))
	good.Manifest.Extra["host_log"] = file(n-1, hs)
	if _, err := Verify(good, Options{}); err != nil {
		t.Fatalf("host_log: %v", err)
	}
	// A witness's cosignature/v1 line on the checkpoint, its key listed.
	_, wk, _ := ed25519.GenerateKey(nil)
	w, _ := tlogwitness.NewCosigner("w.test/adp-witness", wk)
	body, _, _ := strings.Cut(string(signed), "\n\n")
	cosigned := file(n-1, hs)
	cosigned.Checkpoint += w.Cosign([]byte(body+"\n"), 1_780_000_000)
	cosigned.Witnesses = []string{w.VerifierKey()}
	withW := h.archive(t)
	withW.Manifest.Extra["host_log"] = cosigned
	// Old archives' checkpoint.cosign list is counted, not checked.
	withW.Manifest.Extra["witnesses"] = []any{map[string]any{"anything": 1}, "x"}
	rep, err := Verify(withW, Options{})
	if err != nil || len(rep.Witnesses) != 1 || rep.Witnesses[0].VKey != w.VerifierKey() || rep.Witnesses[0].Time != 1_780_000_000 || rep.LegacyWitnesses != 2 {
		t.Fatalf("cosigned host_log: %v %+v", err, rep)
	}
	_, other, _ := ed25519.GenerateKey(nil)
	for name, mut := range map[string]func(a *Archive){
		"a listed witness without its line": func(a *Archive) {
			f := file(n-1, hs)
			f.Witnesses = []string{w.VerifierKey()}
			a.Manifest.Extra["host_log"] = f
		},
		"a doctored cosignature": func(a *Archive) {
			f := *cosigned
			f.Checkpoint = f.Checkpoint[:len(f.Checkpoint)-6] + "AAAA=\n"
			a.Manifest.Extra["host_log"] = &f
		},
		"wrong index": func(a *Archive) { a.Manifest.Extra["host_log"] = file(n-2, hs) },
		"another host key": func(a *Archive) {
			a.Manifest.Extra["host_key"] = string(identity.AgentIDFromKey(other.Public().(ed25519.PublicKey)))
		},
		"not a proof": func(a *Archive) { a.Manifest.Extra["host_log"] = "x" },
		"another record": func(a *Archive) {
			f := file(n-1, hs)
			f.RecordHash = h.recs[0].Hash
			a.Manifest.Extra["host_log"] = f
		},
	} {
		b := h.archive(t)
		b.Manifest.Extra["host_key"] = good.Manifest.Extra["host_key"]
		b.Manifest.Extra["host_log"] = good.Manifest.Extra["host_log"]
		mut(b)
		_, err := Verify(b, Options{})
		var f *Failure
		if !errors.As(err, &f) || f.Step != 5 {
			t.Errorf("%s: %v", name, err)
		}
	}
}
