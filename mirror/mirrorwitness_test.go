package mirror_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/adpnode/adpnode/adp/archive"
	"github.com/adpnode/adpnode/adp/assertion"
	"github.com/adpnode/adpnode/adp/room"
	"github.com/adpnode/adpnode/federation"
	"github.com/adpnode/adpnode/internal/adptest"
	"github.com/adpnode/adpnode/internal/fedtest"
	"github.com/adpnode/adpnode/mirror"
)

// Two mirrors B and C of A's public room: once it ends, B's archive of the
// room carries B's and C's cosignatures of the last record and verifies;
// a cosignature from C of a checkpoint that names no record of B's
// verified chain (hostile: a forged hash, a seq past the tip) is not kept.
// The witnesses survive B's restart, and B's Markdown transcript renders
// from the verified chain.
func TestMirrorArchiveWitnesses(t *testing.T) {
	peers := fedtest.Network(t, 3, nil, fedtest.Options{Rates: noRates, Mirror: true,
		MirrorConfig: mirror.Config{CosignEvery: 200 * time.Millisecond}})
	a, b, c := peers[0], peers[1], peers[2]
	for _, p := range []*fedtest.Peer{b, c} {
		if _, err := p.Mir.AddTarget(mirror.TargetAll, ""); err != nil {
			t.Fatal(err)
		}
	}
	alice := adptest.NewAgent("alice")
	id := fedtest.CreateRoom(t, a, alice, room.Public, "twice mirrored")
	for i := 0; i < 5; i++ {
		fedtest.MustSubmit(t, a, alice, "message.create", id, msg(fmt.Sprintf("line %d", i)))
	}
	last := fedtest.MustSubmit(t, a, alice, "room.close", id, map[string]any{"reason": "done"}).Record
	witnessesOf := func(p *fedtest.Peer) (*archive.Archive, *archive.Report) {
		r, ok := p.Mir.Room(id, "")
		if !ok {
			return nil, nil
		}
		arch, err := r.Archive(p.Clock.Ms())
		if err != nil {
			return nil, nil
		}
		doc, _ := json.Marshal(arch)
		if arch, err = archive.ParseJSON(doc); err != nil {
			t.Fatal(err)
		}
		rep, err := archive.Verify(arch, archive.Options{})
		if err != nil {
			t.Fatalf("%s's archive does not verify: %v", p.Name, err)
		}
		return arch, rep
	}
	// A cosignature that reaches B before B verified the record it names
	// is not kept; C sends it again after its resend interval (30 s).
	fedtest.Eventually(t, 75*time.Second, "B's archive lists B's and C's cosignatures of the last record", func() bool {
		_, rep := witnessesOf(b)
		if rep == nil || len(rep.Witnesses) != 2 {
			return false
		}
		keys := map[string]bool{}
		for _, w := range rep.Witnesses {
			keys[string(w.Key)] = w.Seq == last.Seq && w.Hash == last.Hash
		}
		return keys[string(b.Fed.HostKey())] && keys[string(c.Fed.HostKey())]
	})

	// Hostile cosignatures by C (valid signatures, checkpoints signed with
	// A's key) naming no record of the chain.
	aKey, _ := federation.LoadOrCreateKey(a.Dir)
	cKey, _ := federation.LoadOrCreateKey(c.Dir)
	cosign := func(cp assertion.Checkpoint) []byte {
		now := a.Clock.Ms()
		cpRaw, err := assertion.NewSigner(aKey).Sign(assertion.TypeCheckpoint, cp, now)
		if err != nil {
			t.Fatal(err)
		}
		raw, err := assertion.NewSigner(cKey).Sign(assertion.TypeCosign, assertion.Cosign{Witness: c.Fed.HostKey(), Checkpoint: cpRaw}, now)
		if err != nil {
			t.Fatal(err)
		}
		return raw
	}
	forged := strings.Repeat("0", len(last.Hash))
	for _, cp := range []assertion.Checkpoint{
		{Host: a.Fed.HostKey(), RoomID: id, Seq: last.Seq + 5, Hash: last.Hash, ReceivedAt: last.ReceivedAt},
		{Host: a.Fed.HostKey(), RoomID: id, Seq: last.Seq + 5, Hash: forged, ReceivedAt: last.ReceivedAt},
		{Host: a.Fed.HostKey(), RoomID: "d000000000000000000g", Seq: 1, Hash: forged, ReceivedAt: last.ReceivedAt},
	} {
		if err := b.Mir.DeliverCosignForTest(cosign(cp)); err != nil {
			t.Fatal(err)
		}
	}
	_, rep := witnessesOf(b)
	for _, w := range rep.Witnesses {
		if w.Seq != last.Seq || w.Hash != last.Hash {
			t.Fatalf("B kept a cosignature of a record it does not hold: %+v", w)
		}
	}

	b = b.Restart(t)
	arch, rep := witnessesOf(b)
	if rep == nil || len(rep.Witnesses) != 2 {
		t.Fatalf("after restart, B's archive: %+v", rep)
	}
	if list, _ := arch.Manifest.Extra["witnesses"].([]any); len(list) != 2 {
		t.Fatalf("extra.witnesses: %v", arch.Manifest.Extra["witnesses"])
	}
	r, _ := b.Mir.Room(id, "")
	var md strings.Builder
	if err := r.WriteMarkdown(&md, b.Clock.Ms()); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(md.String(), "# twice mirrored") || !strings.Contains(md.String(), "line 4") {
		t.Fatalf("transcript:\n%s", md.String())
	}
}
