package node

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/adpnode/adpnode/adp/identity"
)

// A record published to a room with N subscribers is framed once: every
// subscriber gets the same frame bytes (one backing array), and the cost
// of a publish does not grow with N in allocations.
func TestHubFramesRecordOnceForAllSubscribers(t *testing.T) {
	const n = 500
	h := newHub(4)
	subs := make([]*Subscription, n)
	for i := range subs {
		subs[i] = h.subscribe("r1", identity.AgentID(fmt.Sprintf("agent%d", i)), false)
	}
	rec := []byte(`{"room_id":"r1","seq":2,"pre_hash":"x","hash":"y","received_at":1,"envelope":{}}`)
	before := frameEncodes.Load()
	h.recordJSON("r1", rec)
	if got := frameEncodes.Load() - before; got != 1 {
		t.Fatalf("frames built for %d subscribers = %d, want 1", n, got)
	}
	want := "event: room.event\ndata: " + string(rec) + "\n\n"
	var first *byte
	for i, s := range subs {
		it := <-s.C
		if string(it.Frame) != want || it.Event != "room.event" || !bytes.Equal(it.Data, rec) {
			t.Fatalf("subscriber %d got %q", i, it.Frame)
		}
		if first == nil {
			first = &it.Frame[0]
		} else if &it.Frame[0] != first {
			t.Fatalf("subscriber %d got its own copy of the frame", i)
		}
	}

	// Allocations per publish: the frame (and its Item) once, whatever the
	// number of subscribers. Queues are drained between runs so nobody is
	// dropped as slow.
	drain := func() {
		for _, s := range subs {
			for len(s.C) > 0 {
				<-s.C
			}
		}
	}
	allocs := testing.AllocsPerRun(50, func() { h.recordJSON("r1", rec); drain() })
	one := newHub(4)
	solo := one.subscribe("r1", "solo", false)
	allocsOne := testing.AllocsPerRun(50, func() { one.recordJSON("r1", rec); <-solo.C })
	if allocs > allocsOne+1 || allocs > 3 {
		t.Fatalf("allocations per publish: %.1f with %d subscribers, %.1f with 1: the cost grows with subscribers", allocs, n, allocsOne)
	}
	if h.count() != n {
		t.Fatalf("subscribers after publishing: %d, want %d (none was slow)", h.count(), n)
	}
}

// A room nobody watches costs no frame; a subscriber that does not read
// (hostile or stuck) is dropped when its queue is full and never blocks
// the publisher or the others.
func TestHubUnwatchedAndStuckSubscribers(t *testing.T) {
	h := newHub(2)
	before := frameEncodes.Load()
	for range 10 {
		h.recordJSON("nobody", []byte(`{}`))
	}
	if got := frameEncodes.Load() - before; got != 0 {
		t.Fatalf("frames built for an unwatched room: %d", got)
	}
	stuck := h.subscribe("r", "stuck", false)
	live := h.subscribe("r", "live", false)
	for i := range 5 {
		h.recordJSON("r", []byte(fmt.Sprintf(`{"seq":%d}`, i)))
		<-live.C
	}
	n := 0
	for range stuck.C { // closed after its 2 queued items
		n++
	}
	if n != 2 || stuck.Reason() != "slow_consumer" {
		t.Fatalf("stuck subscriber: %d items, reason %q; want 2 and slow_consumer", n, stuck.Reason())
	}
	if h.count() != 1 {
		t.Fatalf("subscribers left: %d, want 1", h.count())
	}
}
