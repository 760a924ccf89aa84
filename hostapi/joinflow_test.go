//go:build e2e

package hostapi_test

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/adpnode/adpnode/adp"
	"github.com/adpnode/adpnode/hostport"
	"github.com/adpnode/adpnode/internal/adptest"
	"github.com/adpnode/adpnode/node"
)

// TestRestrictedJoinFlow: request → pending → review by the creator →
// approved → room.join with request_id → member; the consumed request
// cannot be reused. Managers hear of the request over SSE; speakers do not.
func TestRestrictedJoinFlow(t *testing.T) {
	h := adptest.StartHost(t, node.Config{})
	c, a, s, rj := adptest.NewAgent("jf-creator"), adptest.NewAgent("jf-applicant"), adptest.NewAgent("jf-speaker"), adptest.NewAgent("jf-rejected")
	id := createRoom(t, h, c, roomPayload("restricted", h.Clock.Ms(), time.Hour))

	// A speaker admitted earlier, subscribed, must not see join requests.
	sJR := createJR(t, h, s, id, "speaker")
	review(t, h, c, id, sJR, "approve", "speaker")
	h.MustPost(t, s, id, "room.join", map[string]any{"role": "speaker", "request_id": sJR.id()})
	cs := openSSE(t, h, c, id)
	ss := openSSE(t, h, s, id)

	// Create.
	now := h.Clock.Ms()
	r := sendJSON(t, h, a, http.MethodPost, "/v1/rooms/"+id+"/join-requests", map[string]any{
		"role": "speaker", "perspective": "failure modes", "reason": "I know retries", "extra": map[string]any{"lang": "go"}})
	expectStatus(t, r, http.StatusCreated)
	jr := decode[jrView](t, r)
	f := jr.fact()
	if jr.Status != "pending" || jr.ApprovedRole != nil || jr.ReviewedBy != nil || jr.ReviewedAt != nil || jr.ReviewReason != nil {
		t.Fatalf("new restricted request %s", short(r))
	}
	if len(f.ID) != 29 || f.ID[:3] != "jr_" || f.RoomID != id || f.Applicant != string(a.ID) || f.Role != "speaker" ||
		f.Perspective != "failure modes" || f.Reason != "I know retries" || f.CreatedAt != now || f.ExpiresAt != now+time.Hour.Milliseconds() {
		t.Fatalf("request fact %s", jr.Request)
	}
	var factFields map[string]any
	json.Unmarshal(jr.Request, &factFields)
	if len(factFields) != 9 {
		t.Errorf("request object fields %v", keys(factFields))
	}
	// A second pending request by the same applicant is refused.
	r = sendJSON(t, h, a, http.MethodPost, "/v1/rooms/"+id+"/join-requests", map[string]any{"role": "observer"})
	expectCode(t, r, adp.CodePermissionDenied)
	if r.ErrorData()["request_id"] != f.ID {
		t.Errorf("duplicate pending: %s", short(r))
	}
	// Members cannot apply; bodies are checked.
	expectCode(t, sendJSON(t, h, s, http.MethodPost, "/v1/rooms/"+id+"/join-requests", map[string]any{"role": "speaker"}), adp.CodePermissionDenied)
	expectCode(t, sendJSON(t, h, rj, http.MethodPost, "/v1/rooms/"+id+"/join-requests", map[string]any{"role": "boss"}), adp.CodeInvalidRequest)
	expectCode(t, sendJSON(t, h, rj, http.MethodPost, "/v1/rooms/"+id+"/join-requests", map[string]any{"role": "speaker", "jwt": "x"}), adp.CodeInvalidRequest)
	expectCode(t, sendJSON(t, h, nil, http.MethodPost, "/v1/rooms/"+id+"/join-requests", map[string]any{"role": "speaker"}), adp.CodeInvalidToken)
	expectCode(t, sendJSON(t, h, rj, http.MethodPost, "/v1/rooms/d8ftedhpqhsusbg001tg/join-requests", map[string]any{"role": "speaker"}), adp.CodeRoomNotFound)

	// §17.5: the creator's stream carries room.join_request; it is no record.
	it := cs.mustNext("room.join_request")
	note := noRecordField(t, it.Data)
	if note["room_id"] != id || note["request_id"] != f.ID || note["applicant"] != string(a.ID) || note["role"] != "speaker" ||
		note["created_at"] != float64(f.CreatedAt) || note["expires_at"] != float64(f.ExpiresAt) {
		t.Errorf("join request notification %s", it.Data)
	}
	// Pending: joining is refused; the applicant and the list see it pending.
	expectCode(t, h.Post(t, a, id, "room.join", map[string]any{"role": "speaker", "request_id": f.ID}), adp.CodeJoinRequestNotApproved)
	expectCode(t, h.Post(t, a, id, "room.join", map[string]any{"role": "speaker"}), adp.CodeApprovalRequired)
	if got := decode[jrView](t, get(t, h, a, "/v1/rooms/"+id+"/join-requests/"+f.ID)); got.Status != "pending" {
		t.Fatalf("applicant reads %+v", got)
	}
	list := decode[struct{ Result []jrView }](t, get(t, h, c, "/v1/rooms/"+id+"/join-requests?status=pending")).Result
	if len(list) != 1 || list[0].id() != f.ID {
		t.Fatalf("pending list %+v", list)
	}
	// Reviews: only managers, only with the exact request object.
	expectCode(t, h.Post(t, s, id, "room.join.review", map[string]any{"request": jr.Request, "decision": "approve", "role": "speaker"}), adp.CodePermissionDenied)
	tampered := map[string]any{}
	json.Unmarshal(jr.Request, &tampered)
	tampered["role"] = "moderator"
	expectCode(t, h.Post(t, c, id, "room.join.review", map[string]any{"request": tampered, "decision": "approve", "role": "speaker"}), adp.CodeInvalidEvent)
	expectCode(t, h.Post(t, c, id, "room.join.review", map[string]any{"request": jr.Request, "decision": "approve"}), adp.CodeInvalidEvent)

	// The review is a signal record (head unchanged) carrying the request.
	before := getRoom(t, h, c, id)
	r = h.MustPost(t, c, id, "room.join.review", map[string]any{"request": jr.Request, "decision": "approve", "role": "speaker", "reason": "relevant"})
	var rev wire
	r.JSON(&rev)
	after := getRoom(t, h, c, id)
	if after.Head != before.Head || after.Seq != before.Seq+1 {
		t.Errorf("review moved the head: %+v -> %+v", before, after)
	}
	if w := cs.nextRecord(); w.Seq != rev.Seq {
		t.Errorf("creator stream: seq %d, want the review %d", w.Seq, rev.Seq)
	}
	// The speaker saw no join_request item: the review is its next item.
	if it := ss.mustNext("room.event"); true {
		var w wire
		decodeJSON(t, it.Data, &w)
		if w.Seq != rev.Seq {
			t.Errorf("speaker stream: seq %d, want %d", w.Seq, rev.Seq)
		}
	}
	got := decode[jrView](t, get(t, h, a, "/v1/rooms/"+id+"/join-requests/"+f.ID))
	if got.Status != "approved" || got.ApprovedRole == nil || *got.ApprovedRole != "speaker" || got.ReviewedBy == nil ||
		*got.ReviewedBy != string(c.ID) || got.ReviewedAt == nil || got.ReviewReason == nil || *got.ReviewReason != "relevant" {
		t.Fatalf("reviewed request %+v", got)
	}
	if string(got.Request) != string(jr.Request) {
		t.Errorf("the request object changed on review")
	}
	expectCode(t, h.Post(t, c, id, "room.join.review", map[string]any{"request": jr.Request, "decision": "reject"}), adp.CodePermissionDenied)

	// Join: perspective comes from the request; role must match.
	expectCode(t, h.Post(t, a, id, "room.join", map[string]any{"role": "observer", "request_id": f.ID}), adp.CodeJoinRequestRoleMismatch)
	expectCode(t, h.Post(t, a, id, "room.join", map[string]any{"role": "speaker", "request_id": f.ID, "perspective": "x"}), adp.CodeInvalidEvent)
	expectCode(t, h.Post(t, rj, id, "room.join", map[string]any{"role": "speaker", "request_id": f.ID}), adp.CodeJoinRequestNotFound)
	r = h.MustPost(t, a, id, "room.join", map[string]any{"role": "speaker", "request_id": f.ID})
	var joined wire
	r.JSON(&joined)
	var members struct{ Result []hostport.MemberView }
	decodeJSON(t, get(t, h, a, "/v1/rooms/"+id+"/members").Body, &members)
	found := false
	for _, m := range members.Result {
		if m.AgentID == a.ID {
			found = m.Role == adp.RoleSpeaker && m.Perspective == "failure modes" && m.JoinedSeq == joined.Seq
		}
	}
	if !found {
		t.Fatalf("applicant not a speaker with its perspective: %+v", members.Result)
	}
	if got := decode[jrView](t, get(t, h, a, "/v1/rooms/"+id+"/join-requests/"+f.ID)); got.ConsumedSeq != joined.Seq || got.Status != "approved" {
		t.Errorf("consumed request %+v", got)
	}
	h.MustPost(t, a, id, "message.create", msg("thanks for having me"))

	// Leave, then reuse the consumed request: join_request_expired.
	h.MustPost(t, a, id, "room.leave", map[string]any{})
	expectCode(t, h.Post(t, a, id, "room.join", map[string]any{"role": "speaker", "request_id": f.ID}), adp.CodeJoinRequestExpired)

	// A rejected request is terminal.
	rjJR := createJR(t, h, rj, id, "speaker")
	review(t, h, c, id, rjJR, "reject", "")
	if got := decode[jrView](t, get(t, h, rj, "/v1/rooms/"+id+"/join-requests/"+rjJR.id())); got.Status != "rejected" || got.ApprovedRole != nil {
		t.Errorf("rejected request %+v", got)
	}
	expectCode(t, h.Post(t, rj, id, "room.join", map[string]any{"role": "speaker", "request_id": rjJR.id()}), adp.CodeJoinRequestNotApproved)

	// A new request after leaving works (the old one is consumed).
	again := createJR(t, h, a, id, "observer")
	review(t, h, c, id, again, "approve", "speaker") // a reviewer may approve another role
	h.MustPost(t, a, id, "room.join", map[string]any{"role": "speaker", "request_id": again.id()})
}

// TestPublicJoinRequestAutoApproval: public rooms approve valid requests at
// once; moderator requests only for listed agents; banned agents never.
func TestPublicJoinRequestAutoApproval(t *testing.T) {
	h := adptest.StartHost(t, node.Config{})
	c, a, mod, other, banned := adptest.NewAgent("pa-creator"), adptest.NewAgent("pa-applicant"), adptest.NewAgent("pa-mod"),
		adptest.NewAgent("pa-other"), adptest.NewAgent("pa-banned")
	p := roomPayload("public", h.Clock.Ms(), time.Hour)
	p["policy"] = map[string]any{"moderator_agent_ids": []string{string(mod.ID)}}
	id := createRoom(t, h, c, p)

	jr := createJR(t, h, a, id, "speaker")
	if jr.Status != "approved" || jr.ApprovedRole == nil || *jr.ApprovedRole != "speaker" || jr.ReviewReason == nil ||
		*jr.ReviewReason != "public room auto-approval" || jr.ReviewedBy != nil || jr.ReviewedAt == nil || *jr.ReviewedAt != h.Clock.Ms() {
		t.Fatalf("public request %+v", jr)
	}
	h.MustPost(t, a, id, "room.join", map[string]any{"role": "speaker", "request_id": jr.id()})

	mj := createJR(t, h, mod, id, "moderator")
	if mj.Status != "approved" {
		t.Fatalf("listed moderator request %+v", mj)
	}
	oj := createJR(t, h, other, id, "moderator")
	if oj.Status != "pending" {
		t.Fatalf("unlisted moderator request must wait for review: %+v", oj)
	}
	expectCode(t, h.Post(t, other, id, "room.join", map[string]any{"role": "moderator"}), adp.CodePermissionDenied)

	h.MustPost(t, c, id, "room.member.remove", map[string]any{"member": string(banned.ID), "ban": true})
	bj := createJR(t, h, banned, id, "speaker")
	if bj.Status != "pending" {
		t.Fatalf("banned agent's request must not be auto-approved: %+v", bj)
	}
	expectCode(t, h.Post(t, banned, id, "room.join", map[string]any{"role": "speaker"}), adp.CodeMemberBanned)
	// Approving it lifts the ban (§10.5).
	review(t, h, c, id, bj, "approve", "speaker")
	h.MustPost(t, banned, id, "room.join", map[string]any{"role": "speaker", "request_id": bj.id()})
}

// TestAgentStatusSSE: status updates reach subscribers as room.agent_status
// items that are not records; leaving clears the status.
func TestAgentStatusSSE(t *testing.T) {
	h := adptest.StartHost(t, node.Config{})
	c, s := adptest.NewAgent("as-creator"), adptest.NewAgent("as-speaker")
	id := createRoom(t, h, c, roomPayload("public", h.Clock.Ms(), time.Hour))
	joinRoom(t, h, s, id, "speaker")
	cs := openSSE(t, h, c, id)
	head := h.Head(t, s, id)

	r := sendJSON(t, h, s, http.MethodPut, "/v1/rooms/"+id+"/agent-status", map[string]any{"state": "drafting", "seen_seq": head.Seq, "seen_hash": head.Hash})
	expectStatus(t, r, http.StatusOK)
	put := decode[hostport.AgentStatus](t, r)
	it := cs.mustNext("room.agent_status")
	m := noRecordField(t, it.Data)
	if m["room_id"] != id || m["agent_id"] != string(s.ID) || m["state"] != "drafting" || m["seen_seq"] != float64(head.Seq) ||
		m["expires_at"] != float64(put.ExpiresAt) {
		t.Fatalf("status item %s", it.Data)
	}
	// Status writes are not records.
	if got := getRoom(t, h, nil, id); got.Seq != 2 {
		t.Fatalf("agent status changed the chain: seq %d", got.Seq)
	}
	var l struct{ Result []hostport.AgentStatus }
	decodeJSON(t, get(t, h, nil, "/v1/rooms/"+id+"/agent-status").Body, &l)
	if len(l.Result) != 1 || l.Result[0].AgentID != s.ID {
		t.Fatalf("status list %+v", l.Result)
	}
	// Leaving clears it.
	h.MustPost(t, s, id, "room.leave", map[string]any{})
	if w := cs.nextRecord(); w.Seq != 3 {
		t.Fatalf("leave record seq %d", w.Seq)
	}
	expectCode(t, get(t, h, nil, "/v1/rooms/"+id+"/agent-status/"+string(s.ID)), adp.CodeAgentStatusNotFound)
	decodeJSON(t, get(t, h, nil, "/v1/rooms/"+id+"/agent-status").Body, &l)
	if len(l.Result) != 0 {
		t.Fatalf("status survives leave: %+v", l.Result)
	}
	// A former member may not write status.
	expectCode(t, sendJSON(t, h, s, http.MethodPut, "/v1/rooms/"+id+"/agent-status", map[string]any{"state": "idle"}), adp.CodeMembershipRequired)
}
