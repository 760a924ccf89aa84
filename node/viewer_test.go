//go:build e2e

package node_test

import (
	"runtime"
	"testing"
	"time"

	"github.com/adpnode/adpnode/adp"
	"github.com/adpnode/adpnode/internal/adptest"
	"github.com/adpnode/adpnode/live"
	"github.com/adpnode/adpnode/node"
)

// The viewer hub belongs to the node: Close ends every viewer stream with
// shutdown and leaves no goroutine behind (there is no per-node viewer
// goroutine any more); a restarted node on the same data dir serves
// viewer streams of the same room again, fed by new records.
func TestViewerStreamsOwnedByNode(t *testing.T) {
	h := adptest.StartHost(t, node.Config{DataDir: t.TempDir()})
	alice := adptest.NewAgent("alice")
	id := h.CreateRoom(t, alice, h.RoomPayload("public"))
	base := runtime.NumGoroutine()
	const n = 50
	subs := make([]*node.ViewerSubscription, n)
	for i := range subs {
		s, err := h.Node.SubscribeViewer(id)
		if err != nil {
			t.Fatal(err)
		}
		subs[i] = s
	}
	// Other goroutines of the host (its followers, its group commit) come
	// and go meanwhile: a goroutine per stream would add about n.
	if g := runtime.NumGoroutine(); g-base > n/5 {
		t.Fatalf("%d viewer streams started %d goroutines", n, g-base)
	}
	h = h.Restart(t)
	for i, s := range subs {
		for range s.C {
		}
		if s.Reason() != live.ReasonShutdown {
			t.Fatalf("viewer stream %d ended with %q, want shutdown", i, s.Reason())
		}
	}
	// Hostile: a viewer of a room that does not exist.
	if _, err := h.Node.SubscribeViewer("aaaaaaaaaaaaaaaaaaaa"); adp.AsError(err).Code != adp.CodeRoomNotFound {
		t.Fatalf("viewer of an unknown room: %v", err)
	}
	s, err := h.Node.SubscribeViewer(id)
	if err != nil {
		t.Fatal(err)
	}
	h.MustPost(t, alice, id, "message.create", map[string]any{"content_type": "text/plain", "content": "after the restart"})
	select {
	case it := <-s.C:
		if it.Event != "room.event" {
			t.Fatalf("viewer item %s", it.Event)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the restarted node's viewer stream got no record")
	}
	h.Node.UnsubscribeViewer(s)
	if s.Reason() != live.ReasonClosed {
		t.Fatalf("unsubscribed viewer stream: reason %q", s.Reason())
	}
}
