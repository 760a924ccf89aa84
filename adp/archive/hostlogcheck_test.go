package archive

import (
	"crypto/ed25519"
	"strings"
	"testing"

	"github.com/adpnode/adpnode/adp/identity"
	"github.com/adpnode/adpnode/adp/tlogproof"
	"github.com/adpnode/adpnode/adp/tlogwitness"
)

// TestCheckHostLogProof: a mirror's check of a host's proof of a room's
// last record accepts the honest proof (counting the cosignatures of
// known witnesses) and refuses one of another host, origin or record, one
// carrying another record, and one whose listed witness line is missing;
// a proof is stronger only with more known, then more, cosignatures.
func TestCheckHostLogProof(t *testing.T) {
	h := generate(t, 9)
	last := h.recs[len(h.recs)-1]
	leaves := make([][32]byte, len(h.recs))
	for i, r := range h.recs {
		leaves[i], _ = tlogproof.RecordLeaf(r.Hash)
	}
	pub, key, _ := ed25519.GenerateKey(nil)
	origin := tlogproof.Origin("127.0.0.1:9")
	signed, _ := tlogproof.Sign(tlogproof.Checkpoint{Origin: origin, Size: uint64(len(leaves)), Hash: tlogproof.Root(leaves)}, key)
	vkey, _ := tlogproof.VerifierKey(origin, pub)
	// The last leaf of 9: its left siblings are the roots of leaves 0..7
	// and nothing else.
	r8 := tlogproof.Root(leaves[:8])
	honest := tlogproof.File{Type: tlogproof.FileType, VerifierKey: vkey, RecordProof: tlogproof.RecordProof{
		RecordHash: last.Hash, Checkpoint: string(signed),
		Inclusion: tlogproof.InclusionProof{LeafIndex: 8, TreeSize: 9, Hashes: tlogproof.EncodeHashes([][]byte{r8[:]})}}}
	claim := HostLogClaim{Host: identity.AgentIDFromKey(pub), Origin: origin, RoomID: last.RoomID, Seq: last.Seq, Hash: last.Hash}

	c, err := CheckHostLogProof(honest, claim)
	if err != nil || c.Known != 0 || len(c.Witnesses) != 0 || c.Checkpoint.Size != 9 {
		t.Fatalf("honest proof: %v %+v", err, c)
	}
	_, wk, _ := ed25519.GenerateKey(nil)
	w, _ := tlogwitness.NewCosigner("w.test/adp-witness", wk)
	body, _, _ := strings.Cut(string(signed), "\n\n")
	witnessed := honest
	witnessed.Checkpoint += w.Cosign([]byte(body+"\n"), 1_780_000_000)
	witnessed.Witnesses = []string{w.VerifierKey()}
	cw, err := CheckHostLogProof(witnessed, claim)
	if err != nil || cw.Known != 0 || len(cw.Witnesses) != 1 {
		t.Fatalf("witnessed proof: %v %+v", err, cw)
	}
	known := claim
	known.Known = []string{w.VerifierKey()}
	ck, err := CheckHostLogProof(witnessed, known)
	if err != nil || ck.Known != 1 {
		t.Fatalf("witnessed by a known witness: %v %+v", err, ck)
	}
	if !cw.Stronger(c) || c.Stronger(cw) || !ck.Stronger(cw) || cw.Stronger(ck) || c.Stronger(c) || !c.Stronger(nil) {
		t.Fatal("Stronger does not order known, then all, cosignatures")
	}

	_, otherKey, _ := ed25519.GenerateKey(nil)
	for what, bad := range map[string]func() (tlogproof.File, HostLogClaim){
		"another host": func() (tlogproof.File, HostLogClaim) {
			c := claim
			c.Host = identity.AgentIDFromKey(otherKey.Public().(ed25519.PublicKey))
			return honest, c
		},
		"another origin": func() (tlogproof.File, HostLogClaim) {
			c := claim
			c.Origin = tlogproof.Origin("evil.example")
			return honest, c
		},
		"another record": func() (tlogproof.File, HostLogClaim) {
			c := claim
			c.Hash = h.recs[0].Hash
			return honest, c
		},
		"carrying another record": func() (tlogproof.File, HostLogClaim) {
			f := honest
			f.Record, _ = h.recs[0].MarshalJSON()
			return f, claim
		},
		"a listed witness without its line": func() (tlogproof.File, HostLogClaim) {
			f := honest
			f.Witnesses = []string{w.VerifierKey()}
			return f, claim
		},
		"a wrong type": func() (tlogproof.File, HostLogClaim) {
			f := honest
			f.Type = "adp.something"
			return f, claim
		},
	} {
		f, cl := bad()
		if _, err := CheckHostLogProof(f, cl); err == nil {
			t.Errorf("a proof with %s is accepted", what)
		}
	}
	// Carrying the right record is fine.
	f := honest
	f.Record, _ = last.MarshalJSON()
	if _, err := CheckHostLogProof(f, claim); err != nil {
		t.Fatalf("a proof carrying its record: %v", err)
	}
}
