//go:build e2e

package federation_test

import (
	"testing"
	"time"

	"github.com/adpnode/adpnode/adp/room"
	"github.com/adpnode/adpnode/federation"
	"github.com/adpnode/adpnode/internal/adptest"
	"github.com/adpnode/adpnode/internal/testwait"
)

// Property: the index flush loop sleeps while nothing is pending: over
// the time a ticker of its interval fires five times it runs at most
// once (a ticker-driven loop runs about five times), and a gossiped
// announcement wakes it to store the entry at once. After a restart on
// the same data dir the entry is there and the loop sleeps again. The
// copy of the gossipsub scores (PeerScore) runs every 5 s, not every
// second.
func TestIndexFlushSleepsWhenIdle(t *testing.T) {
	peers := network(t, 2, [][2]int{{0, 1}})
	a, b := peers[0], peers[1]
	idleWindow := func(what string) {
		t.Helper()
		before, inspected := federation.IndexFlushes(b.Fed), federation.ScoreInspections(b.Fed)
		tick := time.NewTicker(time.Second) // the flush interval
		defer tick.Stop()
		for range 5 {
			<-tick.C
		}
		if n := federation.IndexFlushes(b.Fed) - before; n > 1 {
			t.Fatalf("%s: the idle index flush loop ran %d times in five of its intervals", what, n)
		}
		if n := federation.ScoreInspections(b.Fed) - inspected; n > 2 {
			t.Fatalf("%s: gossipsub scores were copied %d times in five seconds", what, n)
		}
	}
	idleWindow("before any room")

	before := federation.IndexFlushes(b.Fed)
	pub := createRoom(t, a, adptest.NewAgent("alice"), room.Public, "idle flush")
	testwait.Until(t, 20*time.Second, "B lists A's room", func() bool { _, ok := listed(b, pub); return ok })
	testwait.Until(t, 20*time.Second, "B's flush loop woken and B's index stored", func() bool {
		return federation.IndexFlushes(b.Fed) > before && b.Index.Pending() == 0
	})

	b = b.Restart(t)
	if _, ok := listed(b, pub); !ok {
		t.Fatal("after a restart B's index lost A's room")
	}
	a.Stop() // no more announcements: B is idle again
	idleWindow("after a restart")
}
