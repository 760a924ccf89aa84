//go:build e2e

package mirror_test

import (
	"testing"
	"time"

	"github.com/adpnode/adpnode/adp/room"
	"github.com/adpnode/adpnode/internal/adptest"
	"github.com/adpnode/adpnode/internal/fedtest"
	"github.com/adpnode/adpnode/internal/testwait"
	"github.com/adpnode/adpnode/mirror"
	"github.com/adpnode/adpnode/node"
)

var noRates = node.Rates{Message: 1 << 30, Signal: 1 << 30, Control: 1 << 30, MessageCeiling: 1 << 30, SignalCeiling: 1 << 30, ControlCeiling: 1 << 30, AgentStatus: 1 << 30}

func msg(s string) map[string]any { return map[string]any{"content_type": "text/plain", "content": s} }

// sameChain asserts the mirror's stored chain equals the host's, seq for seq.
func sameChain(t *testing.T, host *fedtest.Peer, mp *fedtest.Peer, roomID string) int {
	t.Helper()
	mr, ok := mp.Mir.Room(roomID, "")
	if !ok {
		t.Fatalf("%s does not mirror %s", mp.Name, roomID)
	}
	after := int64(0)
	n := 0
	for {
		want, more, err := host.Node.Events(roomID, "", after, 1000)
		if err != nil {
			t.Fatal(err)
		}
		got, _, err := mr.Events(after, 1000)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) < len(want) {
			t.Fatalf("%s has %d records after seq %d, host has %d", mp.Name, len(got), after, len(want))
		}
		for i := range want {
			if string(got[i]) != string(want[i]) {
				t.Fatalf("%s differs from the host at seq %d", mp.Name, after+int64(i)+1)
			}
		}
		n += len(want)
		after += int64(len(want))
		if !more {
			return n
		}
	}
}

func TestMirrorBasic(t *testing.T) {
	peers := fedtest.Network(t, 2, nil, fedtest.Options{Rates: noRates, Mirror: true})
	a, b := peers[0], peers[1]
	alice := adptest.NewAgent("alice")
	if _, err := b.Mir.AddTarget(mirror.TargetAll, ""); err != nil {
		t.Fatal(err)
	}
	id := fedtest.CreateRoom(t, a, alice, room.Public, "mirrored")
	for i := 0; i < 200; i++ {
		fedtest.MustSubmit(t, a, alice, "message.create", id, msg("hello"))
	}
	testwait.Until(t, 10*time.Second, "B verified all 201 records", func() bool {
		r, ok := b.Mir.Room(id, "")
		return ok && r.Tip() == 201
	})
	if n := sameChain(t, a, b, id); n != 201 {
		t.Fatalf("compared %d records", n)
	}
	info := func() mirror.Info { r, _ := b.Mir.Room(id, ""); return r.Info() }()
	if info.VerifiedSeq != 201 || info.Checkpoint == nil || info.Faulty {
		t.Fatalf("mirror info %+v", info)
	}
}
