//go:build e2e

package node_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/adpnode/adpnode/adp"
	"github.com/adpnode/adpnode/internal/adptest"
	"github.com/adpnode/adpnode/internal/testwait"
	"github.com/adpnode/adpnode/node"
)

// coldFixture is a host with ended rooms of every kind and one live room.
type coldFixture struct {
	h                    *adptest.Host
	creator, mod, member *adptest.Agent
	applicant, outsider  *adptest.Agent
	ended, closed        string // public room past its end_time; private room closed
	cancelled, live      string // restricted room cancelled; public room still active
	resubmit             []byte // an accepted envelope of the closed room
}

func newColdFixture(t *testing.T) *coldFixture {
	t.Helper()
	clock := adptest.NewClock()
	f := &coldFixture{
		h:       adptest.StartHostAt(t, node.Config{DataDir: t.TempDir(), Rates: manyWrites, JoinRequestTTL: 24 * time.Hour}, clock),
		creator: adptest.NewAgent("cold-creator"), mod: adptest.NewAgent("cold-mod"), member: adptest.NewAgent("cold-member"),
		applicant: adptest.NewAgent("cold-applicant"), outsider: adptest.NewAgent("cold-outsider"),
	}
	h := f.h
	f.h.Node.HoldCold(true)
	f.ended = busyRoom(t, h, f.creator, []*adptest.Agent{f.member, f.mod}, 6)
	h.MustPost(t, f.creator, f.ended, "room.member.role.update", map[string]any{"member": string(f.mod.ID), "role": "moderator"})

	p := h.RoomPayload("private")
	p["end_time"] = clock.Ms() + 3*3_600_000
	p["policy"] = map[string]any{"moderator_agent_ids": []any{string(f.mod.ID)}}
	f.closed = h.CreateRoom(t, f.creator, p)
	jr := joinRequest(t, h, f.mod, f.closed, "moderator", http.StatusCreated) // auto-approved (listed)
	h.MustPost(t, f.mod, f.closed, "room.join", map[string]any{"role": "moderator", "request_id": jr})
	joinRequest(t, h, f.applicant, f.closed, "speaker", http.StatusCreated) // stays pending
	mjr := joinRequest(t, h, f.member, f.closed, "speaker", http.StatusCreated)
	f.review(t, f.closed, mjr)
	h.MustPost(t, f.member, f.closed, "room.join", map[string]any{"role": "speaker", "request_id": mjr})
	f.resubmit = f.lastEnvelope(t, f.closed)
	head := h.Head(t, f.creator, f.closed)
	h.MustPost(t, f.mod, f.closed, "room.close", map[string]any{"reason": "done", "references": []string{head.Hash}})

	p = h.RoomPayload("restricted")
	p["start_time"], p["end_time"] = clock.Ms()+2*3_600_000, clock.Ms()+3*3_600_000 // scheduled, then cancelled
	f.cancelled = h.CreateRoom(t, f.creator, p)
	h.MustPost(t, f.creator, f.cancelled, "room.cancel", map[string]any{"reason": "no quorum"})

	p = h.RoomPayload("public")
	p["end_time"] = clock.Ms() + 3*3_600_000
	f.live = h.CreateRoom(t, f.creator, p)
	h.MustPost(t, f.member, f.live, "room.join", map[string]any{"role": "speaker"})

	clock.Advance(90 * time.Minute) // past f.ended's end_time only
	h.Node.Wake()
	return f
}

func joinRequest(t *testing.T, h *adptest.Host, a *adptest.Agent, roomID, role string, want int) string {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"role": role, "perspective": "cold " + a.Name})
	r := adptest.Do(t, http.MethodPost, h.URL+"/v1/rooms/"+roomID+"/join-requests", a.Token(h.URL, h.Clock.Ms()), body)
	if r.Status != want {
		t.Fatalf("join request by %s: %s", a.Name, r)
	}
	var v struct {
		Request json.RawMessage `json:"request"`
	}
	var fact struct {
		ID string `json:"id"`
	}
	r.JSON(&v)
	json.Unmarshal(v.Request, &fact)
	return fact.ID
}

func (f *coldFixture) review(t *testing.T, roomID, id string) {
	t.Helper()
	r := adptest.Do(t, http.MethodGet, f.h.URL+"/v1/rooms/"+roomID+"/join-requests/"+id, f.creator.Token(f.h.URL, f.h.Clock.Ms()), nil)
	var v struct {
		Request json.RawMessage `json:"request"`
	}
	if r.Status != http.StatusOK || r.JSON(&v) != nil {
		t.Fatalf("join request %s: %s", id, r)
	}
	f.h.MustPost(t, f.creator, roomID, "room.join.review", map[string]any{"request": v.Request, "decision": "approve", "role": "speaker"})
}

func (f *coldFixture) lastEnvelope(t *testing.T, roomID string) []byte {
	t.Helper()
	r := adptest.Do(t, http.MethodGet, f.h.URL+"/v1/rooms/"+roomID+"/events?after_seq=0&limit=1000", f.creator.Token(f.h.URL, f.h.Clock.Ms()), nil)
	var recs recordHashes
	if r.Status != http.StatusOK || r.JSON(&recs) != nil || len(recs.Result) == 0 {
		t.Fatalf("events: %s", r)
	}
	return recs.Result[len(recs.Result)-1].Envelope
}

// answers is every read of every room by every kind of viewer, and the
// refusals of writes to the ended rooms: "METHOD path as whom" -> status
// and body.
func (f *coldFixture) answers(t *testing.T) map[string]string {
	t.Helper()
	h := f.h
	out := map[string]string{}
	agents := map[string]*adptest.Agent{"creator": f.creator, "mod": f.mod, "member": f.member, "applicant": f.applicant, "outsider": f.outsider, "anonymous": nil}
	do := func(method, path, who string, body []byte) {
		tok := ""
		if a := agents[strings.Fields(who)[0]]; a != nil {
			tok = a.Token(h.URL, h.Clock.Ms())
		}
		r := adptest.Do(t, method, h.URL+path, tok, body)
		out[method+" "+path+" as "+who] = fmt.Sprintf("%d %s", r.Status, r.Body)
	}
	for _, id := range []string{f.ended, f.closed, f.cancelled, f.live} {
		for who := range agents {
			for _, p := range []string{"", "/members", "/events?after_seq=0&limit=1000", "/events?after_seq=2&limit=3",
				"/archive", "/archive.jsonl", "/archive.md", "/join-requests", "/agent-status", "/events/live", "/events/view"} {
				if id == f.live && strings.HasPrefix(p, "/events/") {
					continue // a stream that stays open
				}
				do(http.MethodGet, "/v1/rooms/"+id+p, who, nil)
			}
		}
	}
	for who := range agents {
		do(http.MethodGet, "/v1/me/rooms?limit=100", who, nil)
		do(http.MethodGet, "/v1/me/rooms?limit=100&status=ended", who, nil)
		do(http.MethodGet, "/v1/me/rooms?limit=100&membership=former", who, nil)
	}
	for _, q := range []string{"", "?status=ended", "?status=cancelled", "?status=ended&keyword=test"} {
		do(http.MethodGet, "/v1/rooms/public"+q, "anonymous", nil)
	}
	// Writes: each refused as before (or, for the exact resubmission,
	// answered with the original record).
	now := h.Clock.Ms()
	for _, id := range []string{f.ended, f.closed, f.cancelled} {
		head := h.Head(t, f.creator, id)
		msg := map[string]any{"content_type": "text/plain", "content": "after the end"}
		do(http.MethodPost, "/v1/rooms/"+id, "member", f.member.Envelope(now, "message.create", id, head.Seq, head.Hash, msg))
		do(http.MethodPost, "/v1/rooms/"+id, "outsider", f.outsider.Envelope(now, "room.join", id, head.Seq, head.Hash, map[string]any{"role": "speaker"}))
		do(http.MethodPost, "/v1/rooms/"+id, "outsider (wrong room)", f.outsider.Envelope(now, "message.create", "other-room", head.Seq, head.Hash, msg))
		do(http.MethodPost, "/v1/rooms/"+id, "outsider (stale head)", f.outsider.Envelope(now, "message.create", id, 1, head.Hash, msg))
		body, _ := json.Marshal(map[string]any{"role": "speaker"})
		do(http.MethodPost, "/v1/rooms/"+id+"/join-requests", "outsider", body)
		status, _ := json.Marshal(map[string]any{"state": "idle"})
		do(http.MethodPut, "/v1/rooms/"+id+"/agent-status", "member", status)
	}
	do(http.MethodPost, "/v1/rooms/"+f.closed, "anonymous", f.resubmit)
	return out
}

func sameAnswers(t *testing.T, what string, before, after map[string]string) {
	t.Helper()
	if len(before) != len(after) {
		t.Fatalf("%s: %d answers, %d before", what, len(after), len(before))
	}
	for k, v := range before {
		if after[k] != v {
			t.Errorf("%s: %s:\nbefore %s\nnow    %s", what, k, v, after[k])
		}
	}
}

func waitCold(t *testing.T, n *node.Node, want int) {
	t.Helper()
	testwait.Until(t, 30*time.Second, fmt.Sprintf("%d cold rooms", want), func() bool {
		cold, _ := n.ColdRooms()
		return cold == want
	})
}

// TestColdRoomsAnswerAsHot: an ended, a closed and a cancelled room answer
// every read — room, members, events, archives in three formats, join
// requests, agent status, live stream, /v1/me/rooms, the directory — and
// every refused write byte for byte the same once their states are dropped
// from memory, and again after a restart that keeps them cold. The live
// room stays hot.
func TestColdRoomsAnswerAsHot(t *testing.T) {
	f := newColdFixture(t)
	hot := f.answers(t)
	// The refusals really are refusals, and reads really read.
	for k, want := range map[string]string{
		"POST /v1/rooms/" + f.ended + " as member":                  `"room_ended"`,
		"POST /v1/rooms/" + f.cancelled + " as member":              `"room_not_active"`,
		"POST /v1/rooms/" + f.closed + "/join-requests as outsider": `"room_ended"`,
		"GET /v1/rooms/" + f.closed + "/archive as member":          `"manifest"`,
		"GET /v1/rooms/" + f.closed + " as outsider":                `"room_not_found"`,
		"GET /v1/rooms/" + f.closed + " as applicant":               `"room_not_found"`,
		"GET /v1/me/rooms?limit=100 as applicant":                   `"pending"`,
		"POST /v1/rooms/" + f.closed + " as anonymous":              `"seq":`,
	} {
		if !bytes.Contains([]byte(hot[k]), []byte(want)) {
			t.Errorf("%s: %s, want %s", k, hot[k], want)
		}
	}
	if cold, _ := f.h.Node.ColdRooms(); cold != 0 {
		t.Fatalf("%d cold rooms while held", cold)
	}

	f.h.Node.HoldCold(false)
	f.h.Node.EvictEnded()
	waitCold(t, f.h.Node, 3)
	sameAnswers(t, "cold", hot, f.answers(t))
	if _, cached := f.h.Node.ColdRooms(); cached == 0 || cached > 3 {
		t.Errorf("%d cold states cached", cached)
	}

	f.h = f.h.Restart(t)
	st := f.h.Node.RecoveryStats()
	if st.Rooms != 4 || st.Cold != 3 || st.Broken != 0 {
		t.Fatalf("recovery: %+v", st)
	}
	if cold, cached := f.h.Node.ColdRooms(); cold != 3 || cached != 0 {
		t.Fatalf("after restart: %d cold rooms, %d cached", cold, cached)
	}
	sameAnswers(t, "cold after restart", hot, f.answers(t))
	// The live room is still writable.
	f.h.MustPost(t, f.member, f.live, "message.create", map[string]any{"content_type": "text/plain", "content": "still live"})
}

// TestCorruptColdSnapshot: a cold room whose stored state is damaged
// answers unavailable (room_corrupt) on the reads that need it, and stops
// being listed; every other room is served as before.
func TestCorruptColdSnapshot(t *testing.T) {
	f := newColdFixture(t)
	f.h.Node.HoldCold(false)
	f.h.Node.EvictEnded()
	waitCold(t, f.h.Node, 3)
	good := readRoom(t, f.h, f.creator, f.ended)
	goodLive := readRoom(t, f.h, f.creator, f.live)
	var original []byte
	for i, damage := range []func([]byte) []byte{
		func([]byte) []byte { return []byte("garbage") },
		func(v []byte) []byte { return bytes.Replace(v, []byte(`"seq":`), []byte(`"seq":1`), 1) }, // decodes, wrong seq
		nil, // gone
	} {
		f.h = f.h.RestartAfter(t, func(dir string) {
			withDB(t, dir, func(db *badger.DB) {
				db.Update(func(txn *badger.Txn) error {
					key := []byte("s/" + f.closed)
					if damage == nil {
						return txn.Delete(key)
					}
					if original == nil {
						item, err := txn.Get(key)
						if err != nil {
							return err
						}
						original, _ = item.ValueCopy(nil)
					}
					return txn.Set(key, damage(original))
				})
			})
		})
		if st := f.h.Node.RecoveryStats(); st.Cold != 3 || st.Broken != 0 {
			t.Fatalf("damage %d: recovery %+v (the summary is intact: the state is not read at start)", i, st)
		}
		r := adptest.Do(t, http.MethodGet, f.h.URL+"/v1/rooms/"+f.closed, f.creator.Token(f.h.URL, f.h.Clock.Ms()), nil)
		if r.Status != http.StatusServiceUnavailable || r.ErrorCode() != string(adp.CodeUnavailable) || r.ErrorData()["reason"] != "room_corrupt" {
			t.Fatalf("damage %d: corrupt cold room answered %s", i, r)
		}
		for _, path := range []string{"/members", "/events", "/archive"} {
			r := adptest.Do(t, http.MethodGet, f.h.URL+"/v1/rooms/"+f.closed+path, f.creator.Token(f.h.URL, f.h.Clock.Ms()), nil)
			if r.Status != http.StatusServiceUnavailable || r.ErrorData()["reason"] != "room_corrupt" {
				t.Errorf("damage %d: %s answered %s", i, path, r)
			}
		}
		if b := f.h.Node.BrokenRooms(); len(b) != 1 || b[0].RoomID != f.closed {
			t.Errorf("damage %d: broken rooms %+v", i, b)
		}
		r = adptest.Do(t, http.MethodGet, f.h.URL+"/v1/me/rooms?limit=100", f.creator.Token(f.h.URL, f.h.Clock.Ms()), nil)
		if r.Status != http.StatusOK || bytes.Contains(r.Body, []byte(f.closed)) || !bytes.Contains(r.Body, []byte(f.ended)) {
			t.Errorf("damage %d: /v1/me/rooms %s", i, r)
		}
		sameRoom(t, "other cold room", good, readRoom(t, f.h, f.creator, f.ended))
		sameRoom(t, "live room", goodLive, readRoom(t, f.h, f.creator, f.live))
		f.h.MustPost(t, f.member, f.live, "message.create", map[string]any{"content_type": "text/plain", "content": "still live"})
		goodLive = readRoom(t, f.h, f.creator, f.live)
	}
}

// TestColdRoomLiveAgain: a write the stored state admits — possible only
// when the clock moved back before the room's end_time — makes the cold
// room hot again; it goes cold again once it ends again, and its reads
// follow the chain throughout.
func TestColdRoomLiveAgain(t *testing.T) {
	f := newColdFixture(t)
	f.h.Node.HoldCold(false)
	f.h.Node.EvictEnded()
	waitCold(t, f.h.Node, 3)
	f.h.Clock.Advance(-60 * time.Minute) // f.ended's end_time is ahead again
	f.h.MustPost(t, f.member, f.ended, "message.create", map[string]any{"content_type": "text/plain", "content": "back in time"})
	if cold, _ := f.h.Node.ColdRooms(); cold != 2 {
		t.Fatalf("%d cold rooms after a write to one, want 2", cold)
	}
	live := readRoom(t, f.h, f.creator, f.ended)
	if !bytes.Contains(live.events, []byte("back in time")) || !bytes.Contains(live.resource, []byte(`"status":"active"`)) {
		t.Fatalf("room after the write: %s", live.resource)
	}
	f.h.Clock.Advance(60 * time.Minute)
	f.h.Node.Wake()
	waitCold(t, f.h.Node, 3)
	again := readRoom(t, f.h, f.creator, f.ended)
	if !bytes.Equal(again.events, live.events) || !bytes.Contains(again.resource, []byte(`"status":"ended"`)) {
		t.Fatalf("room cold again: %s", again.resource)
	}
	h := f.h.Restart(t)
	sameRoom(t, "cold again, after a restart", again, readRoom(t, h, f.creator, f.ended))
}
