//go:build e2e

package federation_test

import (
	"slices"
	"testing"
	"time"

	"github.com/adpnode/adpnode/adp/room"
	"github.com/adpnode/adpnode/federation"
	"github.com/adpnode/adpnode/internal/adptest"
	"github.com/adpnode/adpnode/internal/fedtest"
	"github.com/adpnode/adpnode/internal/testwait"
	"github.com/adpnode/adpnode/mirror"
)

// TestStalledPublisherLosesNoRecord. Property: the record publisher
// follows the host's change feed, so one that does not keep up loses
// nothing: while it is stalled every write is answered, and once it
// resumes each record of a public room goes out exactly once, and none of a restricted room's does; nothing is counted as
// dropped. (The queue the publisher had before dropped what did not fit.)
func TestStalledPublisherLosesNoRecord(t *testing.T) {
	peers := networkWith(t, 2, nil, fedtest.Options{Rates: benchRates()})
	a, b := peers[0], peers[1]
	alice := adptest.NewAgent("alice")
	stream := followStream(t, a, b)

	resume := federation.StallPublisher(a.Fed)
	pub := createRoom(t, a, alice, room.Public, "public")
	restricted := createRoom(t, a, alice, room.Restricted, "restricted")
	const messages = 40
	for i := 0; i < messages; i++ {
		submit(t, a, alice, "message.create", pub, map[string]any{"content_type": "text/plain", "content": "public words"})
		if i%10 == 0 {
			submit(t, a, alice, "message.create", restricted, map[string]any{"content_type": "text/plain", "content": "restricted words"})
		}
	}
	// The close record is the sentinel: it is the last public record.
	submit(t, a, alice, "room.close", pub, map[string]any{})
	want := 1 + messages + 1
	resume()
	testwait.Until(t, 30*time.Second, "every public record streamed to B", func() bool { return len(stream.of(pub)) >= want })
	got := stream.of(pub)
	if n := len(stream.of(restricted)); n != 0 {
		t.Fatalf("%d records of the restricted room left A", n)
	}
	if len(got) != want {
		t.Fatalf("B got %d public records, want %d", len(got), want)
	}
	// Gossip validates messages concurrently, so B may see them a little
	// out of order; each must come once.
	sorted := slices.Sorted(slices.Values(got))
	for i, s := range sorted {
		if s != int64(i+1) {
			t.Fatalf("public records missing or streamed twice: %v", got)
		}
	}
	if n := a.Fed.Stats().Published.Load(); n != int64(want) {
		t.Errorf("A published %d records, want %d", n, want)
	}
	if n := a.Fed.Stats().RecordDropped.Load(); n != 0 {
		t.Errorf("A dropped %d records", n)
	}
}

// TestRestartUnpublishedRecordsReachMirror. Property: the record publisher
// stores its position, so records a stop left unpublished are published
// after the restart, once a peer is back on the record topic, and reach
// a mirror with no further write (without it they waited for the next
// anti-entropy round, minutes). The log line gives how long that takes.
func TestRestartUnpublishedRecordsReachMirror(t *testing.T) {
	peers := networkWith(t, 2, nil, fedtest.Options{Rates: benchRates(), Mirror: true})
	a, b := peers[0], peers[1]
	alice := adptest.NewAgent("alice")
	id := createRoom(t, a, alice, room.Public, "restarted host")
	if _, err := b.Mir.AddTarget(mirror.TargetRoom, a.Node.RoomURL(id)); err != nil {
		t.Fatal(err)
	}
	verified := func() int64 {
		if r, ok := b.Mir.Room(id, a.Fed.HostKey()); ok {
			return r.Info().VerifiedSeq
		}
		return 0
	}
	for range 3 {
		submit(t, a, alice, "message.create", id, map[string]any{"content_type": "text/plain", "content": "before"})
	}
	testwait.Until(t, 30*time.Second, "B mirrors the first records", func() bool { return verified() == 4 })

	federation.StallPublisher(a.Fed) // never resumed: A stops first
	const unpublished = 5
	for range unpublished {
		submit(t, a, alice, "message.create", id, map[string]any{"content_type": "text/plain", "content": "unpublished"})
	}
	a = a.Restart(t)
	connect(t, b, a)
	took := testwait.Until(t, 60*time.Second, "B mirrors the records A's stop left unpublished", func() bool { return verified() == 4+unpublished })
	t.Logf("records unpublished at a stop reached the mirror %v after the restart", took.Round(time.Millisecond))
	if n := a.Fed.Stats().Published.Load(); n != unpublished {
		t.Errorf("the restarted publisher published %d records, want the %d its stop left", n, unpublished)
	}
}
