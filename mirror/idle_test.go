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
)

// Property: the mirror's reconcile loop sleeps while the index does not
// change, and its proof scan while no mirrored room needs looking at:
// over the time a ticker of their gap (500 ms) fires eight times each
// runs at most once (a ticker-driven loop runs about eight times); an
// announcement wakes the reconcile, and the room is mirrored at once. After a
// restart on the same data dir the room is still mirrored and the loop
// sleeps again.
func TestMirrorReconcileSleepsWhenIdle(t *testing.T) {
	peers := fedtest.Network(t, 2, nil, fedtest.Options{Rates: noRates, Mirror: true})
	a, b := peers[0], peers[1]
	if _, err := b.Mir.AddTarget(mirror.TargetAll, ""); err != nil {
		t.Fatal(err)
	}
	idleWindow := func(what string, noRooms bool) {
		t.Helper()
		before := mirror.Reconciles(b.Mir)
		scans, _ := b.Mir.HostLogForTest()
		tick := time.NewTicker(500 * time.Millisecond)
		defer tick.Stop()
		for range 8 {
			<-tick.C
		}
		if n := mirror.Reconciles(b.Mir) - before; n > 1 {
			t.Fatalf("%s: the idle reconcile loop ran %d times in eight of its gaps", what, n)
		}
		if s, _ := b.Mir.HostLogForTest(); noRooms && s-scans > 1 {
			t.Fatalf("%s: the proof scan of a mirror without rooms ran %d times in eight of its gaps", what, s-scans)
		}
	}
	idleWindow("before any room", true)

	alice := adptest.NewAgent("alice")
	id := fedtest.CreateRoom(t, a, alice, room.Public, "woken")
	fedtest.MustSubmit(t, a, alice, "message.create", id, msg("hello"))
	testwait.Until(t, 20*time.Second, "B mirrors A's room up to seq 2", func() bool {
		r, ok := b.Mir.Room(id, "")
		return ok && r.Tip() == 2
	})

	a.Stop() // no more announcements: B is idle again
	b = b.Restart(t)
	if r, ok := b.Mir.Room(id, ""); !ok || r.Tip() != 2 {
		t.Fatal("after a restart B lost the mirrored room")
	}
	idleWindow("after a restart", false)
}
