//go:build e2e

package mirror_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/adpnode/adpnode/adp/record"
	"github.com/adpnode/adpnode/adp/room"
	"github.com/adpnode/adpnode/adp/rounds"
	"github.com/adpnode/adpnode/adp/types"
	"github.com/adpnode/adpnode/internal/adptest"
	"github.com/adpnode/adpnode/internal/fedtest"
	"github.com/adpnode/adpnode/internal/testwait"
	"github.com/adpnode/adpnode/mirror"
)

// A room importing adpnode's bundled packs from its host's URL is mirrored
// and verified by another node: the mirror replays the room with the packs'
// schemas from its own bundled copy (pinned by digest), and has the same
// chain.
func TestMirrorRoomWithBundledPacks(t *testing.T) {
	peers := fedtest.Network(t, 2, nil, fedtest.Options{Rates: noRates, Mirror: true})
	a, b := peers[0], peers[1]
	alice, bob := adptest.NewAgent("alice"), adptest.NewAgent("bob")
	var decls []any
	for _, bp := range types.BundledPacks() {
		decls = append(decls, json.RawMessage(bp.Declaration(a.URL)))
	}
	now := a.Clock.Ms()
	id := fedtest.MustSubmit(t, a, alice, "room.create", "", map[string]any{"topic": "deals", "visibility": room.Public,
		"start_time": now, "end_time": now + 3_600_000, "tags": []string{}, "types": decls}).Record.RoomID
	fedtest.MustSubmit(t, a, bob, "room.join", id, map[string]any{"role": "speaker"})
	prop := fedtest.MustSubmit(t, a, alice, rounds.EventType, id, map[string]any{"type": "propose", "text": "t", "goal": "g",
		"options": []any{map[string]any{"id": "x", "title": "X"}}})
	ref := rounds.FromRecords([]*record.Record{prop.Record})[0].Hash
	res := fedtest.MustSubmit(t, a, bob, rounds.EventType, id, map[string]any{"type": "accept", "text": "ok",
		"ref": ref, "choice": "x"})
	tip := res.Record.Seq
	testwait.Until(t, 10*time.Second, "B indexes the room", func() bool {
		e, ok := b.Index.Room(id, b.Clock.Ms())
		return ok && e.Room.Seq == tip
	})
	if _, err := b.Mir.AddTarget(mirror.TargetRoom, a.Node.RoomURL(id)); err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, 30*time.Second, "B verifies the room", func() bool {
		r, ok := b.Mir.Room(id, a.Fed.HostKey())
		return ok && r.Info().VerifiedSeq == tip
	})
	if r, _ := b.Mir.Room(id, a.Fed.HostKey()); r.Info().Error != "" {
		t.Fatalf("mirror error: %+v", r.Info())
	}
	sameChain(t, a, b, id)
}
