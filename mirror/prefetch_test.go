//go:build e2e

package mirror_test

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/adpnode/adpnode/adp/room"
	"github.com/adpnode/adpnode/internal/adptest"
	"github.com/adpnode/adpnode/internal/fedtest"
	"github.com/adpnode/adpnode/internal/testwait"
	"github.com/adpnode/adpnode/mirror"
)

// A catch-up longer than one backfill batch (1,000 records) fetches and
// verifies each next batch while the previous one is applied: the mirror
// ends with the host's exact chain across the batch edges, keeps it across
// a restart, and the prefetch goroutines are gone once it is caught up.
func TestCatchUpAcrossBatches(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 2,600 records")
	}
	peers := fedtest.Network(t, 2, nil, fedtest.Options{Rates: noRates, Mirror: true})
	a, b := peers[0], peers[1]
	alice := adptest.NewAgent("alice")
	id := fedtest.CreateRoom(t, a, alice, room.Public, "long room")
	const tip = 2601 // room.create + 2,600 messages: batches of 1000, 1000, 601
	for i := 1; i < tip; i++ {
		fedtest.MustSubmit(t, a, alice, "message.create", id, msg(fmt.Sprint("m", i)))
	}
	testwait.Until(t, 20*time.Second, "B indexes the room", func() bool {
		e, ok := b.Index.Room(id, b.Clock.Ms())
		return ok && e.Room.Seq == tip
	})
	before := runtime.NumGoroutine()
	if _, err := b.Mir.AddTarget(mirror.TargetRoom, a.Node.RoomURL(id)); err != nil {
		t.Fatal(err)
	}
	var r *mirror.Room
	testwait.Until(t, 120*time.Second, "B catches up all records", func() bool {
		var ok bool
		r, ok = b.Mir.Room(id, a.Fed.HostKey())
		return ok && r.Info().VerifiedSeq == tip
	})
	if info := r.Info(); info.Stalled || info.Error != "" {
		t.Fatalf("caught-up mirror reports a problem: %+v", info)
	}
	if got := sameChain(t, a, b, id); got != tip {
		t.Fatalf("compared %d records, want %d", got, tip)
	}
	if n := b.Mir.Stats().Refused.Load(); n != 0 {
		t.Fatalf("%d batches refused from an honest host", n)
	}
	// Cost bound: what the catch-up started has ended (a mirrored room
	// keeps its live subscription: a few goroutines, not one per batch).
	testwait.Until(t, 10*time.Second, "catch-up goroutines end", func() bool {
		return runtime.NumGoroutine() <= before+20
	})

	b = b.Restart(t)
	r, ok := b.Mir.Room(id, a.Fed.HostKey())
	if !ok || r.Info().VerifiedSeq != tip {
		t.Fatalf("after restart: %v %+v", ok, r)
	}
}
