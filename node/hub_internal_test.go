package node

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/adpnode/adpnode/adp/identity"
	"github.com/adpnode/adpnode/live"
)

// fanoutNode is a node with only its two hubs, for the publish path.
func fanoutNode(buf int) *Node {
	return &Node{hub: newHub(buf), viewers: live.NewHub[struct{}](buf)}
}

// A record published to a room with N agent subscribers and M viewer
// subscribers is framed once: every subscriber gets the same frame bytes
// (one backing array), and the cost of a publish does not grow with N in
// allocations.
func TestHubFramesRecordOnceForAllSubscribers(t *testing.T) {
	const n, viewers = 500, 50
	nd := fanoutNode(4)
	chans := make([]<-chan *live.Item, 0, n+viewers)
	for i := range n {
		chans = append(chans, nd.hub.subscribe("r1", identity.AgentID(fmt.Sprintf("agent%d", i)), false).C)
	}
	for range viewers {
		chans = append(chans, nd.viewers.Subscribe("r1", struct{}{}).C)
	}
	rec := []byte(`{"room_id":"r1","seq":2,"pre_hash":"x","hash":"y","received_at":1,"envelope":{}}`)
	before := frameEncodes.Load()
	nd.publishRecord("r1", rec)
	if got := frameEncodes.Load() - before; got != 1 {
		t.Fatalf("frames built for %d agent and %d viewer subscribers = %d, want 1", n, viewers, got)
	}
	want := "event: room.event\ndata: " + string(rec) + "\n\n"
	var first *byte
	for i, c := range chans {
		it := <-c
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
		for _, c := range chans {
			for len(c) > 0 {
				<-c
			}
		}
	}
	allocs := testing.AllocsPerRun(50, func() { nd.publishRecord("r1", rec); drain() })
	one := fanoutNode(4)
	solo := one.hub.subscribe("r1", "solo", false)
	allocsOne := testing.AllocsPerRun(50, func() { one.publishRecord("r1", rec); <-solo.C })
	if allocs > allocsOne+1 || allocs > 3 {
		t.Fatalf("allocations per publish: %.1f with %d subscribers, %.1f with 1: the cost grows with subscribers", allocs, n, allocsOne)
	}
	if nd.hub.Count() != n || nd.viewers.Count() != viewers {
		t.Fatalf("subscribers after publishing: %d+%d, want %d+%d (none was slow)", nd.hub.Count(), nd.viewers.Count(), n, viewers)
	}
}

// A room nobody watches costs no frame; a subscriber that does not read
// (hostile or stuck) is dropped when its queue is full and never blocks
// the publisher or the others.
func TestHubUnwatchedAndStuckSubscribers(t *testing.T) {
	nd := fanoutNode(2)
	before := frameEncodes.Load()
	for range 10 {
		nd.publishRecord("nobody", []byte(`{}`))
	}
	if got := frameEncodes.Load() - before; got != 0 {
		t.Fatalf("frames built for an unwatched room: %d", got)
	}
	stuck := nd.hub.subscribe("r", "stuck", false)
	stuckViewer := nd.viewers.Subscribe("r", struct{}{})
	reader := nd.hub.subscribe("r", "live", false)
	for i := range 5 {
		nd.publishRecord("r", []byte(fmt.Sprintf(`{"seq":%d}`, i)))
		<-reader.C
	}
	n := 0
	for range stuck.C { // closed after its 2 queued items
		n++
	}
	if n != 2 || stuck.Reason() != live.ReasonSlow {
		t.Fatalf("stuck subscriber: %d items, reason %q; want 2 and slow_consumer", n, stuck.Reason())
	}
	n = 0
	for range stuckViewer.C {
		n++
	}
	if n != 2 || stuckViewer.Reason() != live.ReasonSlow {
		t.Fatalf("stuck viewer: %d items, reason %q; want 2 and slow_consumer", n, stuckViewer.Reason())
	}
	if nd.hub.Count() != 1 || nd.viewers.Count() != 0 {
		t.Fatalf("subscribers left: %d+%d, want 1+0", nd.hub.Count(), nd.viewers.Count())
	}
}
