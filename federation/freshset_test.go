//go:build e2e

package federation_test

import (
	"context"
	"testing"
	"time"

	"github.com/adpnode/adpnode/adp/room"
	"github.com/adpnode/adpnode/internal/adptest"
	"github.com/adpnode/adpnode/internal/fedtest"
	"github.com/adpnode/adpnode/internal/testwait"
)

// A node that connects just after its peer learned a room learns it in
// the reconciliation at connect, although the peer built its set of items
// for another session a moment before: a set is not reused once the
// directory changed. (Anti-entropy would otherwise bring the room only
// a reconcile interval later, ten minutes here.)
// Property: a newcomer's first reconciliation carries the latest rooms.
func TestReconcileSetFreshAfterChange(t *testing.T) {
	peers := networkWith(t, 3, [][2]int{{0, 1}}, fedtest.Options{ReconcileInterval: 10 * time.Minute})
	a, b, c := peers[0], peers[1], peers[2]
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// B builds its set for a session with A (nothing to exchange).
	if _, err := a.Fed.Reconcile(ctx, b.Fed.PeerID()); err != nil {
		t.Fatal(err)
	}
	id := createRoom(t, a, adptest.NewAgent("alice"), room.Public, "just created")
	testwait.Until(t, 20*time.Second, "B lists A's new room", func() bool {
		_, ok := listed(b, id)
		return ok
	})
	connect(t, c, b) // C never talks to A; gossip does not repeat old news
	testwait.Until(t, 20*time.Second, "C learns the room at connect", func() bool {
		_, ok := listed(c, id)
		return ok
	})
}
