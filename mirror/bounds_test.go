//go:build e2e

package mirror_test

import (
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/adpnode/adpnode/adp/room"
	"github.com/adpnode/adpnode/internal/adptest"
	"github.com/adpnode/adpnode/internal/fedtest"
	"github.com/adpnode/adpnode/internal/testwait"
	"github.com/adpnode/adpnode/mirror"
)

// A public room of 205 records of 60 KB each (12 MB, more than one 8 MiB
// frame) backfills completely into a mirror added after the fact: batches
// stop at the byte budget. The mirror keeps it across a restart, and a
// mirror serving it on (C from B) stays within the budget too. Cost bound:
// the mirror's heap after catch-up stays within a small multiple of the
// room's size.
func TestBigRecordBackfill(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 12 MB of records")
	}
	peers := fedtest.Network(t, 2, nil, fedtest.Options{Rates: noRates, Mirror: true})
	a, b := peers[0], peers[1]
	alice := adptest.NewAgent("alice")
	id := fedtest.CreateRoom(t, a, alice, room.Public, "big records")
	big := strings.Repeat("x", 60_000)
	for i := 0; i < 205; i++ {
		fedtest.MustSubmit(t, a, alice, "message.create", id, msg(big))
	}
	const tip = 206
	testwait.Until(t, 10*time.Second, "B indexes the room", func() bool {
		e, ok := b.Index.Room(id, b.Clock.Ms())
		return ok && e.Room.Seq == tip
	})
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	if _, err := b.Mir.AddTarget(mirror.TargetRoom, a.Node.RoomURL(id)); err != nil {
		t.Fatal(err)
	}
	var r *mirror.Room
	testwait.Until(t, 60*time.Second, "B backfills all 206 records", func() bool {
		var ok bool
		r, ok = b.Mir.Room(id, a.Fed.HostKey())
		return ok && r.Info().VerifiedSeq == tip
	})
	if info := r.Info(); info.Stalled || info.Error != "" {
		t.Fatalf("caught-up mirror reports a stall: %+v", info)
	}
	sameChain(t, a, b, id)
	var after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&after)
	if grew := int64(after.HeapInuse) - int64(before.HeapInuse); grew > 64<<20 {
		t.Errorf("heap grew by %d MiB while backfilling 12 MB", grew>>20)
	}

	// A third node backfills from the mirror (the host is not its peer).
	c := fedtest.Start(t, "C", t.TempDir(), a.Clock, 0, fedtest.Options{Rates: noRates, Mirror: true})
	fedtest.Connect(t, c, b)
	testwait.Until(t, 10*time.Second, "C indexes the room", func() bool { _, ok := c.Index.Room(id, c.Clock.Ms()); return ok })
	if _, err := c.Mir.AddTarget(mirror.TargetRoom, a.Node.RoomURL(id)); err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, 60*time.Second, "C backfills all 206 records from B", func() bool {
		cr, ok := c.Mir.Room(id, a.Fed.HostKey())
		return ok && cr.Info().VerifiedSeq == tip
	})

	// Restart: the verified chain is still there.
	b = b.Restart(t)
	r, ok := b.Mir.Room(id, a.Fed.HostKey())
	if !ok || r.Info().VerifiedSeq != tip {
		t.Fatalf("after restart: %v %+v", ok, r)
	}
}

// A mirror that cannot make progress says so: records are known to exist
// past its tip, and the only peer that has them is gone. Info shows
// stalled with the reason and the stall is counted; once the host is
// back, the mirror catches up and the stall clears.
func TestMirrorStallReported(t *testing.T) {
	peers := fedtest.Network(t, 2, nil, fedtest.Options{Rates: noRates, Mirror: true})
	a, b := peers[0], peers[1]
	alice := adptest.NewAgent("alice")
	id := fedtest.CreateRoom(t, a, alice, room.Public, "stalls")
	testwait.Until(t, 10*time.Second, "B indexes the room", func() bool { _, ok := b.Index.Room(id, b.Clock.Ms()); return ok })
	if _, err := b.Mir.AddTarget(mirror.TargetRoom, a.Node.RoomURL(id)); err != nil {
		t.Fatal(err)
	}
	var r *mirror.Room
	testwait.Until(t, 10*time.Second, "B mirrors seq 1", func() bool {
		var ok bool
		r, ok = b.Mir.Room(id, a.Fed.HostKey())
		return ok && r.Info().VerifiedSeq == 1
	})
	// B learns that seq 50 exists but cannot reach anyone who has it.
	b.Fed.Disconnect(a.Fed.PeerID())
	r.WantSeqForTest(50)
	testwait.Until(t, 10*time.Second, "B reports the stall", func() bool { return r.Info().Stalled && r.Info().Error != "" })
	if b.Mir.Stats().Stalls.Load() == 0 || b.Mir.StalledRooms() != 1 {
		t.Fatalf("stall not counted: %d %d", b.Mir.Stats().Stalls.Load(), b.Mir.StalledRooms())
	}
	for i := 0; i < 49; i++ {
		fedtest.MustSubmit(t, a, alice, "message.create", id, msg("later"))
	}
	fedtest.Connect(t, b, a)
	testwait.Until(t, 20*time.Second, "B catches up and clears the stall", func() bool {
		info := r.Info()
		return info.VerifiedSeq == 50 && !info.Stalled
	})
}
