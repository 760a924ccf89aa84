package evidence_test

import (
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/adpnode/adpnode/adp/evidence"
	"github.com/adpnode/adpnode/adp/tlogproof"
	"github.com/adpnode/adpnode/adp/tlogwitness"
)

// hashLog is an RFC 6962 log of leaf strings in memory.
type hashLog struct {
	hashes []tlog.Hash
	n      int64
}

func (l *hashLog) ReadHashes(idx []int64) ([]tlog.Hash, error) {
	out := make([]tlog.Hash, len(idx))
	for i, x := range idx {
		out[i] = l.hashes[x]
	}
	return out, nil
}

func (l *hashLog) size() int64 { return l.n }

func (l *hashLog) add(t testing.TB, leaves ...string) {
	for _, d := range leaves {
		hs, err := tlog.StoredHashes(l.size(), []byte(d), l)
		if err != nil {
			t.Fatal(err)
		}
		l.hashes = append(l.hashes, hs...)
		l.n++
	}
}

func (l *hashLog) signed(t testing.TB, s note.Signer, origin string) []byte {
	h, err := tlog.TreeHash(l.size(), l)
	if err != nil {
		t.Fatal(err)
	}
	b, err := note.Sign(&note.Note{Text: fmt.Sprintf("%s\n%d\n%s\n", origin, l.size(), h)}, s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// splitView makes split-view evidence the way a witness does: it cosigned
// an honest checkpoint at size 5; the host then submits a checkpoint of a
// forked tree at size 11 with that tree's consistency proof.
func splitView(t testing.TB, hostKey ed25519.PrivateKey) (*evidence.Evidence, string) {
	const origin = "host.example/adp/log"
	s, err := tlogproof.Signer(origin, hostKey)
	if err != nil {
		t.Fatal(err)
	}
	v, _ := tlogproof.Verifier(origin, hostKey.Public().(ed25519.PublicKey))
	lg := tlogwitness.Log{Origin: origin, Verifier: v}
	var honest, fork hashLog
	honest.add(t, "a", "b", "c", "d", "e")
	fork.add(t, "a", "b", "c", "d", "evil", "f", "g", "h", "i", "j", "k")
	d, err := tlogwitness.Check(lg, nil, &tlogwitness.Request{Note: honest.signed(t, s, origin)})
	if err != nil {
		t.Fatal(err)
	}
	proof, err := tlog.ProveTree(fork.size(), 5, &fork)
	if err != nil {
		t.Fatal(err)
	}
	d2, err := tlogwitness.Check(lg, &d.Next, &tlogwitness.Request{OldSize: 5, Proof: proof, Note: fork.signed(t, s, origin)})
	if err == nil || d2 == nil || d2.SplitView == nil {
		t.Fatalf("the witness did not see the fork: %v", err)
	}
	vkey, _ := note.NewEd25519VerifierKey(origin, hostKey.Public().(ed25519.PublicKey))
	return evidence.SplitView(idOf(hostKey), vkey, d2.SplitView, err.Error(), t0, idOf(key(t, "witness"))), vkey
}

func TestSplitViewEvidence(t *testing.T) {
	host := key(t, "host")
	ev, vkey := splitView(t, host)
	b, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	parsed, err := evidence.Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	if err := parsed.Verify(); err != nil {
		t.Fatalf("split view does not verify offline: %v", err)
	}

	mutate := map[string]func(e *evidence.Evidence){
		"another host": func(e *evidence.Evidence) { e.Host = idOf(key(t, "other")) },
		"another log key": func(e *evidence.Evidence) {
			k, _ := note.NewEd25519VerifierKey("host.example/adp/log", key(t, "other").Public().(ed25519.PublicKey))
			e.LogKey = k
		},
		"one note":     func(e *evidence.Evidence) { e.Notes = e.Notes[:1] },
		"same note":    func(e *evidence.Evidence) { e.Notes[1] = e.Notes[0] },
		"swapped":      func(e *evidence.Evidence) { e.Notes[0], e.Notes[1] = e.Notes[1], e.Notes[0] },
		"no proof":     func(e *evidence.Evidence) { e.Proof = nil },
		"bad proof":    func(e *evidence.Evidence) { e.Proof[0] = strings.Repeat("A", 43) + "=" },
		"garbage hash": func(e *evidence.Evidence) { e.Proof[0] = "!!" },
		"with room":    func(e *evidence.Evidence) { e.RoomID = roomID },
		"unsigned": func(e *evidence.Evidence) {
			e.Notes[1] = e.Notes[1][:strings.Index(e.Notes[1], "\n\n")+2] + "— host.example/adp/log AAAAAAAA\n"
		},
		"other kind": func(e *evidence.Evidence) { e.Kind = evidence.KindEquivocation },
	}
	for name, m := range mutate {
		var e evidence.Evidence
		if err := json.Unmarshal(b, &e); err != nil {
			t.Fatal(err)
		}
		m(&e)
		if err := e.Verify(); err == nil {
			t.Errorf("%s: verifies", name)
		}
	}
	if parsed.LogKey != vkey {
		t.Fatal("log key lost in JSON")
	}
}
