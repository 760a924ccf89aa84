//go:build e2e

package federation_test

import (
	"testing"

	"github.com/adpnode/adpnode/federation"
	"github.com/adpnode/adpnode/hostport"
	"github.com/adpnode/adpnode/internal/adptest"
	"github.com/adpnode/adpnode/node"
)

// A federation that does not keep up does not hold up the host's writes:
// with its queues full and nobody draining them, every write is still
// answered, each event carries its type, and what the queues could not
// take is counted.
func TestSlowFederationDoesNotBlockWrites(t *testing.T) {
	h := adptest.StartHost(t, node.Config{Rates: node.NoRates()})
	listen, stats, queued := federation.IdleListener(2)
	h.Node.Listen(listen)
	var types []string
	h.Node.Listen(func(e hostport.Event) {
		if e.Kind == hostport.EventRecord {
			types = append(types, e.Type) // writes of one room are sequential
		}
	})
	alice := adptest.NewAgent("alice")
	id := h.CreateRoom(t, alice, h.RoomPayload("public"))
	const messages = 20
	for i := 0; i < messages; i++ {
		h.MustPost(t, alice, id, "message.create", map[string]any{"content_type": "text/plain", "content": "hi"})
	}
	records := int64(1 + messages)
	if got := stats.RecordDropped.Load(); got != records-2 {
		t.Errorf("record events dropped: %d, want %d", got, records-2)
	}
	if got := stats.AnnounceDropped.Load(); got != records-2 {
		t.Errorf("announce events dropped: %d, want %d", got, records-2)
	}
	if a, r := queued(); a != 2 || r != 2 {
		t.Errorf("queues hold %d and %d, want 2 each", a, r)
	}
	if len(types) != int(records) || types[0] != "room.create" || types[1] != "message.create" {
		t.Fatalf("event types %v", types)
	}
}
