//go:build e2e

package mirror_test

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/adpnode/adpnode/adp/evidence"
	"github.com/adpnode/adpnode/adp/room"
	"github.com/adpnode/adpnode/adp/tlogproof"
	"github.com/adpnode/adpnode/adp/tlogwitness"
	"github.com/adpnode/adpnode/federation"
	"github.com/adpnode/adpnode/internal/adptest"
	"github.com/adpnode/adpnode/internal/fedtest"
	"github.com/adpnode/adpnode/internal/testwait"
	"github.com/adpnode/adpnode/mirror"
)

// fakeLog is an RFC 6962 tree whose checkpoints a (fake) host signs.
type fakeLog struct {
	hashes []tlog.Hash
	n      int64
}

func (l *fakeLog) ReadHashes(idx []int64) ([]tlog.Hash, error) {
	out := make([]tlog.Hash, len(idx))
	for i, x := range idx {
		out[i] = l.hashes[x]
	}
	return out, nil
}

func (l *fakeLog) add(t *testing.T, leaves ...string) {
	for _, d := range leaves {
		hs, err := tlog.StoredHashes(l.n, []byte(d), l)
		if err != nil {
			t.Fatal(err)
		}
		l.hashes = append(l.hashes, hs...)
		l.n++
	}
}

func (l *fakeLog) signed(t *testing.T, origin string, key ed25519.PrivateKey) []byte {
	h, err := tlog.TreeHash(l.n, l)
	if err != nil {
		t.Fatal(err)
	}
	b, err := tlogproof.Sign(tlogproof.Checkpoint{Origin: origin, Size: uint64(l.n), Hash: h}, key)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func postWitness(t *testing.T, p *fedtest.Peer, body []byte) (int, string) {
	t.Helper()
	resp, err := http.Post(p.URL+"/v1/witness/add-checkpoint", "text/plain", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestMirrorWitnessCatchesForkedHost: a mirror B of host A's room is a
// C2SP tlog-witness for A's log (origin from the room URL, key A's host
// key, named in B's discovery). It cosigns A's checkpoint, refuses logs
// of hosts it does not mirror, and when A (a forked fake host with A's
// key) shows it another root at the same size, it answers 409, stores
// split-view evidence that verifies offline and freezes A's rooms, and
// it cosigns nothing more of A's log, after a restart too.
func TestMirrorWitnessCatchesForkedHost(t *testing.T) {
	peers := fedtest.Network(t, 2, nil, fedtest.Options{Rates: noRates, Mirror: true})
	a, b := peers[0], peers[1]
	if _, err := b.Mir.AddTarget(mirror.TargetAll, ""); err != nil {
		t.Fatal(err)
	}
	alice := adptest.NewAgent("alice")
	id := fedtest.CreateRoom(t, a, alice, room.Public, "witnessed")
	testwait.Until(t, 30*time.Second, "B mirrors A's room", func() bool { _, ok := b.Mir.Room(id, ""); return ok })

	// B names its witness in discovery.
	resp, err := http.Get(b.URL + "/.well-known/agent-discourse")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Witness struct{ Name, Vkey, URL string } `json:"witness"`
	}
	json.NewDecoder(resp.Body).Decode(&doc)
	resp.Body.Close()
	cv, err := tlogwitness.NewCosignatureVerifier(doc.Witness.Vkey)
	if err != nil || doc.Witness.URL != b.URL+"/v1/witness" {
		t.Fatalf("discovery witness %+v: %v", doc.Witness, err)
	}

	aKey, _ := federation.LoadOrCreateKey(a.Dir)
	origin := tlogproof.Origin(a.Node.Host())
	var honest, fork fakeLog
	honest.add(t, "r1", "r2", "r3", "r4", "r5")
	fork.add(t, "r1", "r2", "r3", "r4", "evil")

	cp := honest.signed(t, origin, aKey)
	status, line := postWitness(t, b, tlogwitness.FormatRequest(0, nil, cp))
	if status != 200 {
		t.Fatalf("honest checkpoint: %d %s", status, line)
	}
	av, _ := tlogproof.Verifier(origin, aKey.Public().(ed25519.PublicKey))
	if n, err := note.Open(append(cp, line...), note.VerifierList(av, cv)); err != nil || len(n.Sigs) != 2 {
		t.Fatalf("B's cosignature does not verify: %v", err)
	}

	// Hostile: a log B does not mirror; A's origin under another key.
	_, other, _ := ed25519.GenerateKey(rand.Reader)
	if status, body := postWitness(t, b, tlogwitness.FormatRequest(0, nil, honest.signed(t, "127.0.0.1:1/adp-log", other))); status != 404 {
		t.Fatalf("unmirrored log: %d %s", status, body)
	}
	if status, body := postWitness(t, b, tlogwitness.FormatRequest(5, nil, honest.signed(t, origin, other))); status != 403 {
		t.Fatalf("another key: %d %s", status, body)
	}
	if b.Mir.Faulty(a.Fed.HostKey()) || len(b.Mir.EvidenceList()) != 0 {
		t.Fatal("refusals that prove nothing accused A")
	}

	// The fork.
	if status, body := postWitness(t, b, tlogwitness.FormatRequest(5, nil, fork.signed(t, origin, aKey))); status != 409 || body != "5\n" {
		t.Fatalf("same-size fork: %d %s", status, body)
	}
	testwait.Until(t, 10*time.Second, "B freezes A's rooms", func() bool { return b.Mir.Faulty(a.Fed.HostKey()) })
	list := b.Mir.EvidenceList()
	if len(list) != 1 {
		t.Fatalf("%d pieces of evidence", len(list))
	}
	ev, err := evidence.Parse(list[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := ev.Verify(); err != nil || ev.Kind != evidence.KindSplitView || ev.Host != a.Fed.HostKey() {
		t.Fatalf("split view evidence (%s against %s): %v", ev.Kind, ev.Host, err)
	}

	// Restart: B cosigns nothing more of A's log, the honest tree's
	// growth included.
	b = b.Restart(t)
	if status, body := postWitness(t, b, tlogwitness.FormatRequest(0, nil, cp)); status != 403 || !strings.Contains(body, "log_forked") {
		t.Fatalf("after restart: %d %q", status, body)
	}
	honest.add(t, "r6", "r7")
	p, _ := tlog.ProveTree(honest.n, 5, &honest)
	if status, body := postWitness(t, b, tlogwitness.FormatRequest(5, p, honest.signed(t, origin, aKey))); status != 403 || !strings.Contains(body, "log_forked") {
		t.Fatalf("honest growth after the fork: %d %s", status, body)
	}
}
