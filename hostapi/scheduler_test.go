//go:build e2e

package hostapi_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/adpnode/adpnode/adp"
	"github.com/adpnode/adpnode/adp/archive"
	"github.com/adpnode/adpnode/adp/room"
	"github.com/adpnode/adpnode/hostport"
	"github.com/adpnode/adpnode/internal/adptest"
	"github.com/adpnode/adpnode/internal/testwait"
	"github.com/adpnode/adpnode/node"
)

// TestSchedulerAcrossRestart: a scheduled room on a durable node survives a
// restart, is activated and ended by the scheduler when the clock passes
// start_time and end_time, its live streams close at the end, and its
// archive verifies — also after another restart.
func TestSchedulerAcrossRestart(t *testing.T) {
	clock := adptest.NewClock()
	h := adptest.StartHostAt(t, node.Config{DataDir: t.TempDir()}, clock)
	c, s := adptest.NewAgent("sch-creator"), adptest.NewAgent("sch-speaker")
	start := clock.Ms() + 10*time.Minute.Milliseconds()
	end := start + 15*time.Minute.Milliseconds()
	id := createRoom(t, h, c, roomPayload("public", start, 15*time.Minute))
	// A second room that is cancelled while scheduled: no archive.
	cancelled := createRoom(t, h, c, roomPayload("public", start, 15*time.Minute))
	h.MustPost(t, c, cancelled, "room.cancel", map[string]any{"reason": "no quorum"})

	if got := getRoom(t, h, nil, id); got.Status != "scheduled" {
		t.Fatalf("new room %+v", got)
	}
	joinRoom(t, h, s, id, "speaker") // joins are allowed while scheduled
	expectCode(t, h.Post(t, s, id, "message.create", msg("early")), adp.CodeRoomNotActive)
	before := getRoom(t, h, nil, id)

	// Restart on the same directory, clock and address.
	h = h.Restart(t)
	got := getRoom(t, h, nil, id)
	if got.Status != "scheduled" || got.Seq != before.Seq || got.Hash != before.Hash || got.Head != before.Head {
		t.Fatalf("after restart %+v, before %+v", got, before)
	}
	if got := getRoom(t, h, nil, cancelled); got.Status != "cancelled" {
		t.Fatalf("cancelled room after restart %+v", got)
	}
	var members struct{ Result []hostport.MemberView }
	decodeJSON(t, get(t, h, nil, "/v1/rooms/"+id+"/members").Body, &members)
	if len(members.Result) != 2 {
		t.Fatalf("members after restart %+v", members.Result)
	}
	// Streams may be opened on a scheduled room.
	cs := openSSE(t, h, c, id)
	ss := openSSE(t, h, s, id)

	// Past start_time: active.
	clock.Advance(time.Duration(start-clock.Ms())*time.Millisecond + time.Second)
	h.Node.Wake()
	if got := getRoom(t, h, nil, id); got.Status != "active" {
		t.Fatalf("after start %+v", got)
	}
	r := h.MustPost(t, s, id, "message.create", msg("now we talk"))
	var m wire
	r.JSON(&m)
	if w := cs.nextRecord(); w.Seq != m.Seq {
		t.Fatalf("creator stream seq %d, want %d", w.Seq, m.Seq)
	}
	expectCode(t, get(t, h, nil, "/v1/rooms/"+id+"/archive"), adp.CodeArchiveUnavailable)

	// Past end_time: ended, and the scheduler closes every live stream.
	clock.Advance(time.Duration(end-clock.Ms())*time.Millisecond + time.Second)
	h.Node.Wake()
	for _, st := range []*sseStream{cs, ss} {
		reason, items := st.waitEnd(20 * time.Second)
		if reason != "room_ended" {
			t.Errorf("stream end reason %q", reason)
		}
		for _, it := range items {
			if it.Event == "room.event" {
				var w wire
				decodeJSON(t, it.Data, &w)
				if w.Seq != m.Seq {
					t.Errorf("unexpected record %d on a stream", w.Seq)
				}
			}
		}
	}
	testwait.Until(t, 20*time.Second, "subscriptions to go", func() bool { return h.Node.Subscribers() == 0 })
	if got := getRoom(t, h, nil, id); got.Status != "ended" {
		t.Fatalf("after end %+v", got)
	}
	expectCode(t, h.Post(t, s, id, "message.create", msg("late")), adp.CodeRoomEnded)
	_, r = dialSSE(t, h, c, id)
	expectCode(t, r, adp.CodeRoomEnded)
	expectCode(t, sendJSON(t, h, s, http.MethodPut, "/v1/rooms/"+id+"/agent-status", map[string]any{"state": "idle"}), adp.CodeRoomEnded)
	expectCode(t, sendJSON(t, h, adptest.NewAgent("sch-late"), http.MethodPost, "/v1/rooms/"+id+"/join-requests", map[string]any{"role": "speaker"}), adp.CodeRoomEnded)

	verify := func(h *adptest.Host) *archive.Archive {
		t.Helper()
		r := get(t, h, nil, "/v1/rooms/"+id+"/archive")
		expectStatus(t, r, http.StatusOK)
		a, err := archive.ParseJSON(r.Body)
		if err != nil {
			t.Fatal(err)
		}
		rep, err := archive.Verify(a, archive.Options{})
		if err != nil {
			t.Fatalf("archive does not verify: %v", err)
		}
		if rep.Status != room.StatusEnded || rep.Records != 3 || rep.Members != 2 || a.Manifest.LastSeq != 3 ||
			a.Manifest.LastHash != m.Hash || a.Manifest.GeneratedAt < end {
			t.Fatalf("archive report %+v manifest %+v", rep, a.Manifest)
		}
		r = get(t, h, nil, "/v1/rooms/"+id+"/archive.jsonl")
		expectStatus(t, r, http.StatusOK)
		man, packs, raws, err := archive.ParseJSONL(r.Body)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := archive.VerifyRecords(man, packs, raws, archive.Options{}); err != nil {
			t.Fatalf("jsonl archive does not verify: %v", err)
		}
		if man.EventsSHA3 != a.Manifest.EventsSHA3 || man.GeneratedAt != a.Manifest.GeneratedAt || man.LastHash != a.Manifest.LastHash {
			t.Fatalf("jsonl manifest %+v differs from %+v", man, a.Manifest)
		}
		expectStatus(t, get(t, h, nil, "/v1/rooms/"+id+"/archive.md"), http.StatusOK)
		return a
	}
	first := verify(h)
	// The cancelled room has no archive.
	expectCode(t, get(t, h, nil, "/v1/rooms/"+cancelled+"/archive"), adp.CodeArchiveUnavailable)

	// Restart again later: still ended, same archive (generation time
	// persisted).
	clock.Advance(time.Hour)
	h = h.Restart(t)
	if got := getRoom(t, h, nil, id); got.Status != "ended" {
		t.Fatalf("after second restart %+v", got)
	}
	second := verify(h)
	if second.Manifest.GeneratedAt != first.Manifest.GeneratedAt || second.Manifest.EventsSHA3 != first.Manifest.EventsSHA3 {
		t.Errorf("archive changed across restart: %+v vs %+v", second.Manifest, first.Manifest)
	}
}

// TestEndWhileDown: a room whose end_time passes while the node is down is
// ended and archivable right after the restart.
func TestEndWhileDown(t *testing.T) {
	clock := adptest.NewClock()
	h := adptest.StartHostAt(t, node.Config{DataDir: t.TempDir()}, clock)
	c := adptest.NewAgent("down-creator")
	id := createRoom(t, h, c, roomPayload("restricted", clock.Ms(), 10*time.Minute))
	h.MustPost(t, c, id, "message.create", msg("before the outage"))
	h.Close()
	clock.Advance(11 * time.Minute)
	h = h.Restart(t)
	if got := getRoom(t, h, c, id); got.Status != "ended" || got.Seq != 2 {
		t.Fatalf("after restart %+v", got)
	}
	expectCode(t, get(t, h, nil, "/v1/rooms/"+id+"/archive"), adp.CodeMembershipRequired)
	r := get(t, h, c, "/v1/rooms/"+id+"/archive")
	expectStatus(t, r, http.StatusOK)
	a, err := archive.ParseJSON(r.Body)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := archive.Verify(a, archive.Options{}); err != nil {
		t.Fatalf("archive does not verify: %v", err)
	}
}

// TestCloseEndsStreams: room.close ends the room at once; streams close.
func TestCloseEndsStreams(t *testing.T) {
	h := adptest.StartHost(t, node.Config{})
	c, s := adptest.NewAgent("cl-creator"), adptest.NewAgent("cl-speaker")
	id := createRoom(t, h, c, roomPayload("public", h.Clock.Ms(), time.Hour))
	joinRoom(t, h, s, id, "speaker")
	ss := openSSE(t, h, s, id)
	r := h.MustPost(t, c, id, "room.close", map[string]any{"reason": "done"})
	var closed wire
	r.JSON(&closed)
	reason, items := ss.waitEnd(20 * time.Second)
	if reason != "room_ended" {
		t.Errorf("stream end reason %q", reason)
	}
	if len(items) != 1 || items[0].Event != "room.event" {
		t.Fatalf("stream items before the end: %+v", items)
	}
	var w wire
	decodeJSON(t, items[0].Data, &w)
	if w.Seq != closed.Seq {
		t.Errorf("the close record (seq %d) must reach the stream before it ends, got %d", closed.Seq, w.Seq)
	}
	if got := getRoom(t, h, nil, id); got.Status != "ended" {
		t.Fatalf("after close %+v", got)
	}
}

// TestCancelEndsStreams: room.cancel of a scheduled room closes its
// streams; a cancelled room has no archive.
func TestCancelEndsStreams(t *testing.T) {
	h := adptest.StartHost(t, node.Config{})
	c := adptest.NewAgent("cn-creator")
	id := createRoom(t, h, c, roomPayload("public", h.Clock.Ms()+time.Hour.Milliseconds(), time.Hour))
	cs := openSSE(t, h, c, id)
	h.MustPost(t, c, id, "room.cancel", map[string]any{"reason": "no quorum"})
	reason, items := cs.waitEnd(20 * time.Second)
	if reason != "room_cancelled" || len(items) != 1 {
		t.Errorf("stream end %q after %d items", reason, len(items))
	}
	if got := getRoom(t, h, nil, id); got.Status != "cancelled" {
		t.Fatalf("after cancel %+v", got)
	}
	expectCode(t, get(t, h, nil, "/v1/rooms/"+id+"/archive"), adp.CodeArchiveUnavailable)
	expectCode(t, h.Post(t, c, id, "room.update", map[string]any{"topic": "again"}), adp.CodeRoomNotActive)
	_, r := dialSSE(t, h, c, id)
	expectCode(t, r, adp.CodeRoomEnded)
}

// TestSchedulerReschedule: room.update moves end_time; the scheduler ends
// the room at the new time, not the old one.
func TestSchedulerReschedule(t *testing.T) {
	h := adptest.StartHost(t, node.Config{})
	c := adptest.NewAgent("rs-creator")
	start := h.Clock.Ms()
	id := createRoom(t, h, c, roomPayload("public", start, 20*time.Minute))
	cs := openSSE(t, h, c, id)
	h.MustPost(t, c, id, "room.update", map[string]any{"end_time": start + 40*time.Minute.Milliseconds()})
	cs.nextRecord()

	h.Clock.Advance(25 * time.Minute) // past the old end
	h.Node.Wake()
	h.MustPost(t, c, id, "message.create", msg("still open"))
	// The stream is still open: the room did not end at the old time.
	if w := cs.nextRecord(); w.Seq != 3 {
		t.Fatalf("stream seq %d", w.Seq)
	}
	h.Clock.Advance(16 * time.Minute) // past the new end
	h.Node.Wake()
	if reason, _ := cs.waitEnd(20 * time.Second); reason != "room_ended" {
		t.Errorf("stream end reason %q", reason)
	}
}
