package federation

import (
	"io"
	"log/slog"
	"testing"

	"github.com/adpnode/adpnode/adp/record"
	"github.com/adpnode/adpnode/adp/room"
	"github.com/adpnode/adpnode/hostport"
)

// idleFederation is a Federation with only the host listener's queues, of
// capacity n, and nothing draining them: the slowest consumer there is.
func idleFederation(n int) *Federation {
	return &Federation{announceQ: make(chan announceReq, n), recordQ: make(chan hostport.Event, n),
		log: slog.New(slog.NewTextHandler(io.Discard, nil))}
}

// The listener reads the event's type and never the envelope: an event
// whose envelope is not even JSON is classified by Type alone, and the
// listener allocates nothing (a parse would).
func TestNodeEventReadsTypeNotEnvelope(t *testing.T) {
	f := idleFederation(4)
	garbage := &record.Record{RoomID: "r", Seq: 7, Envelope: []byte("\x00not an envelope")}
	for _, c := range []struct {
		typ    string
		urgent bool
	}{{"room.update", true}, {"room.close", true}, {"room.cancel", true}, {"message.create", false}, {"", false}} {
		f.onNodeEvent(hostport.Event{Kind: hostport.EventRecord, RoomID: "r", Type: c.typ, Record: garbage, Status: room.StatusActive})
		if r := <-f.announceQ; r.id != "r" || r.urgent != c.urgent {
			t.Errorf("type %q: queued %+v, want urgent=%v", c.typ, r, c.urgent)
		}
		if e := <-f.recordQ; e.Record != garbage || e.Type != c.typ {
			t.Errorf("type %q: record queue got %+v", c.typ, e)
		}
	}
	e := hostport.Event{Kind: hostport.EventRecord, RoomID: "r", Type: "message.create", Record: garbage, Status: room.StatusActive}
	allocs := testing.AllocsPerRun(1000, func() {
		f.onNodeEvent(e)
		<-f.announceQ
		<-f.recordQ
	})
	if allocs != 0 {
		t.Fatalf("the host listener allocates %.1f times per event; it must only queue", allocs)
	}
}

// IdleListener is the host listener of a federation whose queues hold n
// events and are never drained; queued reports how many each holds.
func IdleListener(n int) (listen func(hostport.Event), stats *Stats, queued func() (announce, records int)) {
	f := idleFederation(n)
	return f.onNodeEvent, &f.stats, func() (int, int) { return len(f.announceQ), len(f.recordQ) }
}
