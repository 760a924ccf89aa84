//go:build e2e

package hostapi_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/adpnode/adpnode/adp"
	"github.com/adpnode/adpnode/directory"
	"github.com/adpnode/adpnode/internal/adptest"
	"github.com/adpnode/adpnode/internal/testwait"
	"github.com/adpnode/adpnode/node"
)

// memberOnlyReads are the events-class reads: §16 restricts them to the
// creator and members of restricted and private rooms.
var memberOnlyReads = []string{"/events", "/events?after_seq=1", "/members", "/agent-status", "/archive", "/archive.jsonl", "/archive.md"}

// TestRestrictedRoomAccess: metadata is public, everything else needs
// membership (membership_required).
func TestRestrictedRoomAccess(t *testing.T) {
	h := adptest.StartHost(t, node.Config{})
	c, m, x := adptest.NewAgent("rs-creator"), adptest.NewAgent("rs-member"), adptest.NewAgent("rs-outsider")
	id := createRoom(t, h, c, roomPayload("restricted", h.Clock.Ms(), time.Hour))

	// Metadata: anyone, even anonymous.
	for _, a := range []*adptest.Agent{nil, x} {
		if got := getRoom(t, h, a, id); got.ID != id || got.Visibility != "restricted" {
			t.Fatalf("restricted metadata: %+v", got)
		}
	}
	reads := append([]string{}, memberOnlyReads...)
	reads = append(reads, "/agent-status/"+string(c.ID))
	for _, a := range []*adptest.Agent{nil, x} {
		for _, p := range reads {
			expectCode(t, get(t, h, a, "/v1/rooms/"+id+p), adp.CodeMembershipRequired)
		}
	}
	_, r := dialSSE(t, h, x, id)
	expectCode(t, r, adp.CodeMembershipRequired)
	_, r = dialSSE(t, h, nil, id)
	expectCode(t, r, adp.CodeInvalidToken)
	expectCode(t, sendJSON(t, h, x, http.MethodPut, "/v1/rooms/"+id+"/agent-status", map[string]any{"state": "idle"}), adp.CodeMembershipRequired)

	// The creator reads everything (archive: not yet, it is active).
	for _, p := range []string{"/events", "/members", "/agent-status"} {
		expectStatus(t, get(t, h, c, "/v1/rooms/"+id+p), http.StatusOK)
	}
	expectCode(t, get(t, h, c, "/v1/rooms/"+id+"/archive"), adp.CodeArchiveUnavailable)

	// A member admitted through review reads too.
	jr := createJR(t, h, m, id, "speaker")
	expectCode(t, get(t, h, m, "/v1/rooms/"+id+"/events"), adp.CodeMembershipRequired)
	review(t, h, c, id, jr, "approve", "speaker")
	expectCode(t, get(t, h, m, "/v1/rooms/"+id+"/events"), adp.CodeMembershipRequired) // approved is not member
	h.MustPost(t, m, id, "room.join", map[string]any{"role": "speaker", "request_id": jr.id()})
	for _, p := range []string{"/events", "/members", "/agent-status"} {
		expectStatus(t, get(t, h, m, "/v1/rooms/"+id+p), http.StatusOK)
	}
	openSSE(t, h, m, id).Close()

	// After it leaves, it is an outsider again.
	h.MustPost(t, m, id, "room.leave", map[string]any{})
	expectCode(t, get(t, h, m, "/v1/rooms/"+id+"/events"), adp.CodeMembershipRequired)

	// Once ended, the archive is for members only too.
	h.MustPost(t, c, id, "room.close", map[string]any{})
	expectStatus(t, get(t, h, c, "/v1/rooms/"+id+"/archive"), http.StatusOK)
	expectStatus(t, get(t, h, c, "/v1/rooms/"+id+"/archive.md"), http.StatusOK)
	for _, p := range []string{"/archive", "/archive.jsonl", "/archive.md"} {
		expectCode(t, get(t, h, x, "/v1/rooms/"+id+p), adp.CodeMembershipRequired)
		expectCode(t, get(t, h, m, "/v1/rooms/"+id+p), adp.CodeMembershipRequired)
	}
}

// review submits room.join.review for jr as a; it must be accepted.
func review(t testing.TB, h *adptest.Host, a *adptest.Agent, roomID string, jr jrView, decision, role string) {
	t.Helper()
	p := map[string]any{"request": jr.Request, "decision": decision, "reason": "test review"}
	if role != "" {
		p["role"] = role
	}
	h.MustPost(t, a, roomID, "room.join.review", p)
}

// TestPrivateRoomAccess: a private room does not exist for outsiders; its
// members, and an applicant holding an approved unexpired request, read it.
func TestPrivateRoomAccess(t *testing.T) {
	h := adptest.StartHost(t, node.Config{JoinRequestTTL: 20 * time.Minute})
	c, mod, p, x, s := adptest.NewAgent("pv-creator"), adptest.NewAgent("pv-mod"), adptest.NewAgent("pv-applicant"),
		adptest.NewAgent("pv-outsider"), adptest.NewAgent("pv-speaker")
	pl := roomPayload("private", h.Clock.Ms(), time.Hour)
	pl["policy"] = map[string]any{"moderator_agent_ids": []string{string(mod.ID)}}
	id := createRoom(t, h, c, pl)

	outsider := func(a *adptest.Agent) {
		t.Helper()
		expectCode(t, get(t, h, a, "/v1/rooms/"+id), adp.CodeRoomNotFound)
		for _, path := range append(memberOnlyReads, "/agent-status/"+string(c.ID)) {
			expectCode(t, get(t, h, a, "/v1/rooms/"+id+path), adp.CodeRoomNotFound)
		}
		if a != nil {
			_, r := dialSSE(t, h, a, id)
			expectCode(t, r, adp.CodeRoomNotFound)
			expectCode(t, sendJSON(t, h, a, http.MethodPut, "/v1/rooms/"+id+"/agent-status", map[string]any{"state": "idle"}), adp.CodeRoomNotFound)
		}
	}
	outsider(nil)
	outsider(x)
	// Private rooms are never in the directory.
	var dir struct {
		Result []directory.Entry `json:"result"`
	}
	get(t, h, nil, "/v1/rooms/public?status=active,scheduled,ended,cancelled").JSON(&dir)
	for _, s := range dir.Result {
		if s.ID == id {
			t.Fatal("private room listed publicly")
		}
	}
	// The creator reads everything.
	if got := getRoom(t, h, c, id); got.Visibility != "private" {
		t.Fatalf("creator read %+v", got)
	}
	expectStatus(t, get(t, h, c, "/v1/rooms/"+id+"/events"), http.StatusOK)

	// A listed moderator's moderator request is auto-approved (DECISIONS
	// 15): with it, the room resource (and head) is readable, not its events.
	modJR := createJR(t, h, mod, id, "moderator")
	if modJR.Status != "approved" || modJR.ApprovedRole == nil || *modJR.ApprovedRole != "moderator" {
		t.Fatalf("listed moderator request %+v", modJR)
	}
	if got := getRoom(t, h, mod, id); got.Head.Seq != 1 || got.Head.Hash == "" {
		t.Fatalf("approved applicant read %+v", got)
	}
	expectCode(t, get(t, h, mod, "/v1/rooms/"+id+"/events"), adp.CodeMembershipRequired)
	h.MustPost(t, mod, id, "room.join", map[string]any{"role": "moderator", "request_id": modJR.id()})
	expectStatus(t, get(t, h, mod, "/v1/rooms/"+id+"/events"), http.StatusOK)
	expectStatus(t, get(t, h, mod, "/v1/rooms/"+id+"/members"), http.StatusOK)
	openSSE(t, h, mod, id).Close()

	// A pending request gives no read right; a reviewed approval does.
	pJR := createJR(t, h, p, id, "speaker")
	if pJR.Status != "pending" {
		t.Fatalf("private speaker request %+v", pJR)
	}
	expectCode(t, get(t, h, p, "/v1/rooms/"+id), adp.CodeRoomNotFound)
	review(t, h, mod, id, pJR, "approve", "speaker") // the moderator reviews
	got := getRoom(t, h, p, id)
	if got.ID != id || got.Head.Seq != 1 {
		t.Fatalf("approved applicant read %+v", got)
	}
	// Other applicants and outsiders still see nothing.
	outsider(x)
	// Join requests of a private room: readable by the applicant, creator
	// and moderators only; the list by creator and moderators.
	sJR := createJR(t, h, s, id, "speaker")
	for _, a := range []*adptest.Agent{s, c, mod} {
		r := get(t, h, a, "/v1/rooms/"+id+"/join-requests/"+sJR.id())
		expectStatus(t, r, http.StatusOK)
		if decode[jrView](t, r).fact().Applicant != string(s.ID) {
			t.Errorf("join request read by %s: %s", a.Name, short(r))
		}
	}
	// An outsider of the private room learns nothing, not even that the
	// room exists (DECISIONS 21); an approved applicant, who may read the
	// room, is told the request is not visible.
	expectCode(t, get(t, h, x, "/v1/rooms/"+id+"/join-requests/"+sJR.id()), adp.CodeRoomNotFound)
	expectCode(t, get(t, h, p, "/v1/rooms/"+id+"/join-requests/"+sJR.id()), adp.CodeJoinRequestNotFound)
	expectCode(t, get(t, h, nil, "/v1/rooms/"+id+"/join-requests/"+sJR.id()), adp.CodeInvalidToken)
	// A request ID under the wrong room is not found either.
	other := createRoom(t, h, c, roomPayload("restricted", h.Clock.Ms(), time.Hour))
	expectCode(t, get(t, h, c, "/v1/rooms/"+other+"/join-requests/"+sJR.id()), adp.CodeJoinRequestNotFound)
	for _, a := range []*adptest.Agent{c, mod} {
		r := get(t, h, a, "/v1/rooms/"+id+"/join-requests")
		expectStatus(t, r, http.StatusOK)
		if l := decode[struct{ Result []jrView }](t, r).Result; len(l) != 3 {
			t.Errorf("list by %s has %d requests", a.Name, len(l))
		}
	}
	for _, a := range []*adptest.Agent{s, x} { // may not read the private room
		expectCode(t, get(t, h, a, "/v1/rooms/"+id+"/join-requests"), adp.CodeRoomNotFound)
	}
	expectCode(t, get(t, h, p, "/v1/rooms/"+id+"/join-requests"), adp.CodePermissionDenied)
	expectCode(t, get(t, h, nil, "/v1/rooms/"+id+"/join-requests"), adp.CodeInvalidToken)
	// After p joins as speaker, a mere speaker still cannot read others' requests.
	h.MustPost(t, p, id, "room.join", map[string]any{"role": "speaker", "request_id": pJR.id()})
	expectCode(t, get(t, h, p, "/v1/rooms/"+id+"/join-requests/"+sJR.id()), adp.CodeJoinRequestNotFound)
	expectCode(t, get(t, h, p, "/v1/rooms/"+id+"/join-requests"), adp.CodePermissionDenied)
	// status filter
	r := get(t, h, c, "/v1/rooms/"+id+"/join-requests?status=pending")
	if l := decode[struct{ Result []jrView }](t, r).Result; len(l) != 1 || l[0].id() != sJR.id() {
		t.Errorf("pending filter: %s", short(r))
	}

	// Approval that expires: a second applicant approved, then the
	// request's TTL passes (the room is still active).
	late := adptest.NewAgent("pv-late")
	lJR := createJR(t, h, late, id, "observer")
	review(t, h, c, id, lJR, "approve", "observer")
	getRoom(t, h, late, id)
	h.Clock.Advance(21 * time.Minute)
	expectCode(t, get(t, h, late, "/v1/rooms/"+id), adp.CodeRoomNotFound)
	r = get(t, h, late, "/v1/rooms/"+id+"/join-requests/"+lJR.id())
	if decode[jrView](t, r).Status != "expired" {
		t.Errorf("expired request shows %s", short(r))
	}
	expectCode(t, h.Post(t, c, id, "room.join", map[string]any{"role": "observer"}), adp.CodePermissionDenied) // creator already member
	expectCode(t, submit(t, h, id, late.Envelope(h.Clock.Ms(), "room.join", id, 1, got.Head.Hash,
		map[string]any{"role": "observer", "request_id": lJR.id()})), adp.CodeJoinRequestExpired)
}

// TestSSEMembership: membership is checked at subscribe, and a stream ends
// when its member leaves or is removed.
func TestSSEMembership(t *testing.T) {
	h := adptest.StartHost(t, node.Config{})
	c, m, x := adptest.NewAgent("sm-creator"), adptest.NewAgent("sm-member"), adptest.NewAgent("sm-outsider")
	id := createRoom(t, h, c, roomPayload("public", h.Clock.Ms(), time.Hour))

	_, r := dialSSE(t, h, x, id)
	expectCode(t, r, adp.CodeMembershipRequired)
	_, r = dialSSE(t, h, x, "d8ftedhpqhsusbg001tg")
	expectCode(t, r, adp.CodeRoomNotFound)
	req, _ := http.NewRequest(http.MethodGet, h.URL+"/v1/rooms/"+id+"/events/live", nil)
	req.Header.Set("Authorization", "Bearer "+x.Token("http://elsewhere.example", h.Clock.Ms()))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("SSE with a foreign-audience token: %d", resp.StatusCode)
	}

	joinRoom(t, h, m, id, "speaker")
	ms := openSSE(t, h, m, id)
	cs := openSSE(t, h, c, id)
	if got := h.Node.Subscribers(); got != 2 {
		t.Fatalf("subscribers %d", got)
	}
	h.MustPost(t, c, id, "message.create", msg("hello"))
	if w := ms.nextRecord(); w.Seq != 3 {
		t.Fatalf("member stream got seq %d", w.Seq)
	}
	// Heartbeats keep an idle stream alive (200 ms in adptest).
	for beat := false; !beat; {
		it, ok := ms.nextAny(20 * time.Second)
		if !ok {
			t.Fatal("no heartbeat comment on an idle stream")
		}
		beat = it.Comment == "heartbeat"
	}

	// The member leaves: its own leave record is the last it may see;
	// then its stream ends. The creator's stream goes on.
	h.MustPost(t, m, id, "room.leave", map[string]any{})
	reason, items := ms.waitEnd(20 * time.Second)
	if reason != "membership_ended" {
		t.Errorf("stream end reason %q", reason)
	}
	for _, it := range items {
		if it.Event == "room.event" {
			var w wire
			decodeJSON(t, it.Data, &w)
			if w.Seq > 4 {
				t.Errorf("left member received seq %d", w.Seq)
			}
		}
	}
	if w := cs.nextRecord(); w.Seq != 3 {
		t.Fatalf("creator stream seq %d", w.Seq)
	}
	if w := cs.nextRecord(); w.Seq != 4 {
		t.Fatalf("creator stream seq %d", w.Seq)
	}
	testwait.Until(t, 20*time.Second, "the left member's subscription to go", func() bool { return h.Node.Subscribers() == 1 })
	_, r = dialSSE(t, h, m, id)
	expectCode(t, r, adp.CodeMembershipRequired)

	// Removal ends a stream the same way.
	joinRoom(t, h, m, id, "speaker")
	ms = openSSE(t, h, m, id)
	h.MustPost(t, c, id, "room.member.remove", map[string]any{"member": string(m.ID), "reason": "test"})
	if reason, _ := ms.waitEnd(20 * time.Second); reason != "membership_ended" {
		t.Errorf("stream end reason after removal %q", reason)
	}
	// A client that hangs up is unsubscribed.
	cs.Close()
	testwait.Until(t, 20*time.Second, "the closed client to be unsubscribed", func() bool { return h.Node.Subscribers() == 0 })
}

// TestSSENoReplay: the stream carries only records accepted after the
// subscription and ignores replay parameters (§17.3).
func TestSSENoReplay(t *testing.T) {
	h := adptest.StartHost(t, node.Config{})
	c := adptest.NewAgent("nr-creator")
	id := createRoom(t, h, c, roomPayload("public", h.Clock.Ms(), time.Hour))
	h.MustPost(t, c, id, "message.create", msg("old"))
	s, r := dialSSEQuery(t, h, c, id, "?last_seq=0&after_seq=0")
	if s == nil {
		t.Fatalf("subscribe: %s", short(r))
	}
	if it, ok := s.nextAny(20 * time.Second); !ok || it.Comment != "subscribed" {
		t.Fatalf("first item %+v", it)
	}
	h.MustPost(t, c, id, "message.create", msg("new"))
	if w := s.nextRecord(); w.Seq != 3 {
		t.Fatalf("first streamed record is seq %d, want 3 (no replay)", w.Seq)
	}
}
