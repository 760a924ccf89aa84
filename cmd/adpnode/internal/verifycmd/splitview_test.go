package verifycmd

import (
	"crypto/ed25519"
	"crypto/sha3"
	"encoding/json"
	"strings"
	"testing"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/adpnode/adpnode/adp/evidence"
	"github.com/adpnode/adpnode/adp/identity"
	"github.com/adpnode/adpnode/adp/tlogproof"
	"github.com/adpnode/adpnode/adp/tlogwitness"
)

type tree struct {
	hashes []tlog.Hash
	n      int64
}

func (l *tree) ReadHashes(idx []int64) ([]tlog.Hash, error) {
	out := make([]tlog.Hash, len(idx))
	for i, x := range idx {
		out[i] = l.hashes[x]
	}
	return out, nil
}

func (l *tree) add(t *testing.T, leaves ...string) {
	for _, d := range leaves {
		h := sha3.Sum256([]byte(d))
		hs, err := tlog.StoredHashes(l.n, h[:], l)
		if err != nil {
			t.Fatal(err)
		}
		l.hashes = append(l.hashes, hs...)
		l.n++
	}
}

func (l *tree) signed(t *testing.T, origin string, key ed25519.PrivateKey) []byte {
	h, _ := tlog.TreeHash(l.n, l)
	b, err := tlogproof.Sign(tlogproof.Checkpoint{Origin: origin, Size: uint64(l.n), Hash: h}, key)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// `adpnode verify` accepts split-view evidence a witness made and refuses
// it once a note is swapped for one of the honest tree.
func TestVerifySplitView(t *testing.T) {
	key := ed25519.NewKeyFromSeed(make([]byte, 32))
	const origin = "host.example/adp-log"
	var honest, fork tree
	honest.add(t, "1", "2", "3")
	fork.add(t, "1", "2", "x", "4", "5", "6", "7")
	v, _ := tlogproof.Verifier(origin, key.Public().(ed25519.PublicKey))
	lg := tlogwitness.Log{Origin: origin, Verifier: v}
	d, err := tlogwitness.Check(lg, nil, &tlogwitness.Request{Note: honest.signed(t, origin, key)})
	if err != nil {
		t.Fatal(err)
	}
	p, _ := tlog.ProveTree(fork.n, 3, &fork)
	d2, err := tlogwitness.Check(lg, &d.Next, &tlogwitness.Request{OldSize: 3, Proof: p, Note: fork.signed(t, origin, key)})
	if d2 == nil || d2.SplitView == nil {
		t.Fatalf("no split view: %v", err)
	}
	vkey, _ := note.NewEd25519VerifierKey(origin, key.Public().(ed25519.PublicKey))
	host := identity.AgentIDFromKey(key.Public().(ed25519.PublicKey))
	ev := evidence.SplitView(host, vkey, d2.SplitView, err.Error(), 1, "")
	b, _ := json.Marshal(ev)
	var out strings.Builder
	if ok, err := File(&out, "ev.json", b); !ok || err != nil || !strings.HasPrefix(out.String(), "OK evidence: split_view") {
		t.Fatalf("verify: %v %v %s", ok, err, out.String())
	}
	honest.add(t, "4", "5", "6", "7")
	ev.Notes[1] = string(honest.signed(t, origin, key))
	b, _ = json.Marshal(ev)
	out.Reset()
	if ok, _ := File(&out, "ev.json", b); ok || !strings.HasPrefix(out.String(), "FAIL evidence") {
		t.Fatalf("tampered evidence: %s", out.String())
	}
}
