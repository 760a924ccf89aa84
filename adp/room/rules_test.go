package room

import (
	"strings"
	"testing"

	"github.com/adpnode/adpnode/adp"
)

type ruleCase struct {
	name  string
	setup func(h *harness)
	act   func(h *harness) error
	want  adp.Code // "" = accepted
}

func runRules(t *testing.T, cases []ruleCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t)
			if c.setup != nil {
				c.setup(h)
			}
			err := c.act(h)
			t.Logf("result: %v", err)
			if got := codeOf(err); got != c.want {
				t.Fatalf("got %q (%v), want %q", got, err, c.want)
			}
		})
	}
}

func publicRoom(h *harness) { h.create(Public, nil) }

func publicWithSpeaker(h *harness) {
	h.create(Public, nil)
	h.join("alice", adp.RoleSpeaker)
}

func msg(text string) map[string]any {
	return map[string]any{"content_type": "text/plain", "content": text}
}

// §6 / §6.1: envelope fields, mentions, anchors and the head CAS.
func TestRulesEnvelope(t *testing.T) {
	many := make([]string, 33)
	runRules(t, []ruleCase{
		{"§5.1 wrong protocol", publicWithSpeaker, func(h *harness) error {
			return h.post("alice", "message.create", msg("hi"), protocol("agent-profile/1.0"))
		}, adp.CodeInvalidEvent},
		{"§6 room.create with room_id", nil, func(h *harness) error {
			return h.post("creator", "room.create", h.createPayload(Public), roomID("d8ftedhpqhsusbg001tg"))
		}, adp.CodeInvalidEvent},
		{"§6 room.create with base_seq", nil, func(h *harness) error {
			return h.post("creator", "room.create", h.createPayload(Public), base(1, "QmFzZTY0dXJsLXByZXZpb3VzLXJlY29yZC1oYXNoMDA"))
		}, adp.CodeInvalidEvent},
		{"§6 event without base fields", publicWithSpeaker, func(h *harness) error {
			return h.post("alice", "message.create", msg("hi"), noBase())
		}, adp.CodeInvalidEvent},
		{"§22 event for another room", publicWithSpeaker, func(h *harness) error {
			return h.post("alice", "message.create", msg("hi"), roomID("d8ftedhpqhsusbg00000"))
		}, adp.CodeInvalidEvent},
		{"§6 33 mentions rejected", publicWithSpeaker, func(h *harness) error {
			for i := range many {
				many[i] = string(h.id("m" + string(rune('a'+i%26)) + string(rune('a'+i/26))))
			}
			return h.post("alice", "message.create", msg("hi"), mentions(many...))
		}, adp.CodeInvalidEvent},
		{"§6 32 mentions accepted", publicWithSpeaker, func(h *harness) error {
			m := make([]string, 32)
			for i := range m {
				m[i] = string(h.id("m" + string(rune('a'+i))))
			}
			return h.post("alice", "message.create", msg("hi"), mentions(m...))
		}, ""},
		{"§6 malformed mention", publicWithSpeaker, func(h *harness) error {
			return h.post("alice", "message.create", msg("hi"), mentions("did:agent:nope"))
		}, adp.CodeInvalidEvent},
		{"§6.1 message on a stale head", publicWithSpeaker, func(h *harness) error {
			old, oldHash := h.st.Head.Seq, h.headHash()
			h.must("creator", "message.create", msg("first"))
			return h.post("alice", "message.create", msg("late"), base(old, oldHash))
		}, adp.CodeRoomHeadMismatch},
		{"§6.1 signal anchored to an old record is fine", publicWithSpeaker, func(h *harness) error {
			h.must("creator", "message.create", msg("first"))
			rh, _, _ := h.st.RecordHash(1)
			return h.post("bob", "room.join", map[string]any{"role": "observer"}, base(1, rh))
		}, ""},
		{"§6.1 signal anchored to a missing seq", publicRoom, func(h *harness) error {
			return h.post("bob", "room.join", map[string]any{"role": "observer"}, base(99, h.headHash()))
		}, adp.CodeBaseRecordMismatch},
		{"§6.1 signal anchored with a wrong hash", publicRoom, func(h *harness) error {
			return h.post("bob", "room.join", map[string]any{"role": "observer"}, base(1, "QmFzZTY0dXJsLXByZXZpb3VzLXJlY29yZC1oYXNoMDA"))
		}, adp.CodeBaseRecordMismatch},
		{"§6.1 head CAS: wrong hash at the head seq", publicWithSpeaker, func(h *harness) error {
			return h.post("alice", "message.create", msg("x"), base(h.st.Head.Seq, "QmFzZTY0dXJsLXByZXZpb3VzLXJlY29yZC1oYXNoMDA"))
		}, adp.CodeRoomHeadMismatch},
		{"§6.1 signals do not advance the head", publicRoom, func(h *harness) error {
			head := h.st.Head
			h.join("alice", adp.RoleSpeaker)
			h.join("bob", adp.RoleObserver)
			if h.st.Head != head || h.st.Seq != 3 {
				t.Fatalf("head moved to %+v (seq %d)", h.st.Head, h.st.Seq)
			}
			return h.post("alice", "message.create", msg("on the old head"), base(head.Seq, head.Hash))
		}, ""},
		{"§12 payload not an object", publicWithSpeaker, func(h *harness) error {
			return h.post("alice", "message.create", nil, rawPayload(`"text"`))
		}, adp.CodeInvalidEvent},
		{"§21 payload too large", publicWithSpeaker, func(h *harness) error {
			return h.post("alice", "message.create", msg(strings.Repeat("x", 70_000)))
		}, adp.CodePayloadTooLarge},
		{"§22 same envelope twice", publicWithSpeaker, func(h *harness) error {
			j := h.sign("bob", "room.join", map[string]any{"role": "observer"})
			if _, err := h.submit(j); err != nil {
				t.Fatal(err)
			}
			_, err := h.submit(j)
			return err
		}, adp.CodeInvalidEvent},
	})
}

// §8 and §14: lifecycle states and what each allows.
func TestRulesLifecycle(t *testing.T) {
	scheduled := func(h *harness) {
		p := h.createPayload(Public)
		p["start_time"] = h.now + 10*minute
		p["end_time"] = h.now + 70*minute
		h.must("creator", "room.create", p)
	}
	runRules(t, []ruleCase{
		{"§8 room active when start_time has passed", nil, func(h *harness) error {
			p := h.createPayload(Public)
			p["start_time"] = h.now - minute
			h.must("creator", "room.create", p)
			if s := h.st.StatusAt(h.now); s != StatusActive {
				t.Fatalf("status %s", s)
			}
			return nil
		}, ""},
		{"§14 scheduled room refuses message.create", scheduled, func(h *harness) error {
			return h.post("creator", "message.create", msg("too early"))
		}, adp.CodeRoomNotActive},
		{"§14 scheduled room accepts room.join", scheduled, func(h *harness) error {
			return h.post("alice", "room.join", map[string]any{"role": "speaker"})
		}, ""},
		{"§14 scheduled room accepts type.define", scheduled, func(h *harness) error {
			return h.post("creator", "type.define", map[string]any{"use": "adp:reactions/1.0"})
		}, ""},
		{"§14 scheduled room refuses room.close", scheduled, func(h *harness) error {
			return h.post("creator", "room.close", map[string]any{})
		}, adp.CodeRoomNotActive},
		{"§8 scheduled becomes active at start_time", scheduled, func(h *harness) error {
			h.now += 10 * minute
			return h.post("creator", "message.create", msg("now"))
		}, ""},
		{"§13.2 room.cancel on an active room", publicRoom, func(h *harness) error {
			return h.post("creator", "room.cancel", map[string]any{})
		}, adp.CodeRoomNotActive},
		{"§8 cancelled room accepts nothing", scheduled, func(h *harness) error {
			h.must("creator", "room.cancel", map[string]any{"reason": "no quorum"})
			return h.post("alice", "room.join", map[string]any{"role": "speaker"})
		}, adp.CodeRoomNotActive},
		{"§8 closed room is ended", publicWithSpeaker, func(h *harness) error {
			h.must("creator", "room.close", map[string]any{})
			if s := h.st.StatusAt(h.now); s != StatusEnded {
				t.Fatalf("status %s", s)
			}
			return h.post("alice", "room.leave", map[string]any{})
		}, adp.CodeRoomEnded},
		{"§8 room ends at end_time", publicWithSpeaker, func(h *harness) error {
			h.now += 60 * minute
			return h.post("alice", "message.create", msg("late"))
		}, adp.CodeRoomEnded},
		{"§13.2 room.close by a speaker", publicWithSpeaker, func(h *harness) error {
			return h.post("alice", "room.close", map[string]any{})
		}, adp.CodePermissionDenied},
		{"§13.2 room.cancel by a non-member", scheduled, func(h *harness) error {
			return h.post("mallory", "room.cancel", map[string]any{})
		}, adp.CodePermissionDenied},
	})
}

// §9.1 / §9.3: room.create.
func TestRulesCreate(t *testing.T) {
	with := func(k string, v any) func(h *harness) error {
		return func(h *harness) error {
			p := h.createPayload(Public)
			if v == nil {
				delete(p, k)
			} else {
				p[k] = v
			}
			return h.post("creator", "room.create", p)
		}
	}
	runRules(t, []ruleCase{
		{"§9.1 valid create", nil, with("tags", []string{"a"}), ""},
		{"§9.3 empty topic", nil, with("topic", "   "), adp.CodeInvalidEvent},
		{"§9.1 missing topic", nil, with("topic", nil), adp.CodeInvalidEvent},
		{"§9.1 missing visibility", nil, with("visibility", nil), adp.CodeInvalidEvent},
		{"§9.2 unknown visibility", nil, with("visibility", "secret"), adp.CodeInvalidEvent},
		{"§9.3 start_time equal to end_time", nil, func(h *harness) error {
			p := h.createPayload(Public)
			p["end_time"] = p["start_time"]
			return h.post("creator", "room.create", p)
		}, adp.CodeInvalidEvent},
		{"§9.3 start_time after end_time", nil, func(h *harness) error {
			p := h.createPayload(Public)
			p["start_time"] = h.now + 120*minute
			return h.post("creator", "room.create", p)
		}, adp.CodeInvalidEvent},
		{"§21 duration below 10 minutes", nil, with("end_time", t0+9*minute), adp.CodeInvalidEvent},
		{"§21 duration above 7 days", nil, with("end_time", t0+8*24*60*minute), adp.CodeInvalidEvent},
		{"§9.3 max_speakers 0", nil, with("policy", map[string]any{"max_speakers": 0}), adp.CodeInvalidEvent},
		{"§9.3 max_speakers above the host cap", nil, with("policy", map[string]any{"max_speakers": 101}), adp.CodeInvalidEvent},
		{"§9.3 malformed moderator_agent_ids", nil, with("policy", map[string]any{"moderator_agent_ids": []string{"did:agent:x"}}), adp.CodeInvalidEvent},
		{"§9.3 unknown policy field", nil, with("policy", map[string]any{"invites": []string{}}), adp.CodeInvalidEvent},
		{"§9.1 unknown payload field", nil, with("host", "example.org"), adp.CodeInvalidEvent},
		{"§9.1 start_time not an integer", nil, with("start_time", "soon"), adp.CodeInvalidEvent},
		{"§9.3 invalid type declaration", nil, with("types", []any{map[string]any{"type": "room.x", "kind": "message", "title": "x", "schema": map[string]any{}}}), adp.CodeInvalidEvent},
		{"§9.3 unresolvable registered pack", nil, with("types", []any{map[string]any{"use": "adp:nope/1.0"}}), adp.CodePackUnavailable},
		{"§9.3 external pack with no pack source", nil, with("types", []any{map[string]any{"pack": "https://example.com/p.json", "digest": "sha256:Mg4SSnKBKXJ1_HhySVqmXv-Pa9WPVvTRm9CfIayMpIo"}}), adp.CodePackUnavailable},
		{"§9 room.create twice in one room", publicRoom, func(h *harness) error {
			return h.post("creator", "room.create", h.createPayload(Public))
		}, adp.CodeInvalidEvent},
		{"§9 creator is a moderator member", nil, func(h *harness) error {
			h.create(Public, nil)
			m, ok := h.st.Member(h.id("creator"))
			if !ok || !m.Active || m.Role != adp.RoleModerator || m.JoinedSeq != 1 {
				t.Fatalf("creator membership %+v", m)
			}
			return nil
		}, ""},
	})
}

// §9.4: room.update.
func TestRulesUpdate(t *testing.T) {
	scheduled := func(h *harness) {
		p := h.createPayload(Public)
		p["start_time"] = h.now + 10*minute
		p["end_time"] = h.now + 70*minute
		h.must("creator", "room.create", p)
	}
	upd := func(p map[string]any) func(h *harness) error {
		return func(h *harness) error { return h.post("creator", "room.update", p) }
	}
	runRules(t, []ruleCase{
		{"§9.4 valid update", publicRoom, upd(map[string]any{"guidance": "be brief", "end_time": t0 + 90*minute}), ""},
		{"§9.4 empty payload", publicRoom, upd(map[string]any{}), adp.CodeInvalidEvent},
		{"§9.4 visibility not updatable", publicRoom, upd(map[string]any{"visibility": "private"}), adp.CodeInvalidEvent},
		{"§9.4 types not updatable", publicRoom, upd(map[string]any{"types": []any{}}), adp.CodeInvalidEvent},
		{"§9.4 empty topic", publicRoom, upd(map[string]any{"topic": " "}), adp.CodeInvalidEvent},
		{"§9.4 start_time on an active room", publicRoom, upd(map[string]any{"start_time": t0 + minute}), adp.CodeInvalidEvent},
		{"§9.4 start_time on a scheduled room", scheduled, upd(map[string]any{"start_time": t0 + 5*minute}), ""},
		{"§9.4 effective start after end", scheduled, upd(map[string]any{"start_time": t0 + 80*minute}), adp.CodeInvalidEvent},
		{"§9.4 end_time not later than now on an active room", publicRoom, func(h *harness) error {
			h.now += 20 * minute
			return h.post("creator", "room.update", map[string]any{"end_time": h.now})
		}, adp.CodeInvalidEvent},
		{"§9.4 bad policy", publicRoom, upd(map[string]any{"policy": map[string]any{"max_speakers": -1}}), adp.CodeInvalidEvent},
		{"§9.4 update by a speaker", publicWithSpeaker, func(h *harness) error {
			return h.post("alice", "room.update", map[string]any{"topic": "mine"})
		}, adp.CodePermissionDenied},
		{"§9.4 ended room", publicRoom, func(h *harness) error {
			h.must("creator", "room.close", map[string]any{})
			return h.post("creator", "room.update", map[string]any{"topic": "after"})
		}, adp.CodeRoomEnded},
		{"§9.4 scheduled start moved into the past activates", scheduled, func(h *harness) error {
			h.now += minute
			h.must("creator", "room.update", map[string]any{"start_time": h.now - 1})
			if s := h.st.StatusAt(h.now); s != StatusActive {
				t.Fatalf("status %s", s)
			}
			return nil
		}, ""},
		{"§9.4 empty values clear fields, arrays replace", publicRoom, func(h *harness) error {
			h.must("creator", "room.update", map[string]any{"tags": []string{"a", "b"}, "agenda": "x"})
			h.must("creator", "room.update", map[string]any{"tags": []string{}, "agenda": ""})
			if h.st.Tags != nil || h.st.Agenda != "" {
				t.Fatalf("not cleared: %v %q", h.st.Tags, h.st.Agenda)
			}
			return nil
		}, ""},
		{"§9.4 lowering max_speakers demotes no one", publicRoom, func(h *harness) error {
			h.join("alice", adp.RoleSpeaker)
			h.join("bob", adp.RoleSpeaker)
			h.must("creator", "room.update", map[string]any{"policy": map[string]any{"max_speakers": 1}})
			if h.st.Speaking() != 3 {
				t.Fatalf("speaking %d", h.st.Speaking())
			}
			return h.post("carol", "room.join", map[string]any{"role": "speaker"})
		}, adp.CodeMaxSpeakersExceeded},
	})
}

// §10.2: joining.
func TestRulesJoin(t *testing.T) {
	runRules(t, []ruleCase{
		{"§10.2 public direct join", publicRoom, func(h *harness) error {
			err := h.post("alice", "room.join", map[string]any{"role": "speaker", "perspective": "security reviewer"})
			if m, _ := h.st.Member(h.id("alice")); m.Perspective != "security reviewer" {
				t.Fatalf("perspective %q", m.Perspective)
			}
			return err
		}, ""},
		{"§10.2 already an active member", publicWithSpeaker, func(h *harness) error {
			return h.post("alice", "room.join", map[string]any{"role": "observer"})
		}, adp.CodePermissionDenied},
		{"§10.2 banned", publicWithSpeaker, func(h *harness) error {
			h.must("creator", "room.member.remove", map[string]any{"member": h.id("alice"), "ban": true})
			return h.post("alice", "room.join", map[string]any{"role": "speaker"})
		}, adp.CodeMemberBanned},
		{"§10.2 max_speakers", func(h *harness) {
			h.create(Public, map[string]any{"policy": map[string]any{"max_speakers": 2}})
			h.join("alice", adp.RoleSpeaker)
		}, func(h *harness) error {
			return h.post("bob", "room.join", map[string]any{"role": "speaker"})
		}, adp.CodeMaxSpeakersExceeded},
		{"§10.2 observer not allowed", func(h *harness) {
			h.create(Public, map[string]any{"policy": map[string]any{"observer_allowed": false}})
		}, func(h *harness) error {
			return h.post("bob", "room.join", map[string]any{"role": "observer"})
		}, adp.CodeRoleNotAllowed},
		{"§10.2 restricted without request_id", func(h *harness) { h.create(Restricted, nil) }, func(h *harness) error {
			return h.post("bob", "room.join", map[string]any{"role": "speaker"})
		}, adp.CodeApprovalRequired},
		{"§10.2 private without request_id", func(h *harness) { h.create(Private, nil) }, func(h *harness) error {
			return h.post("bob", "room.join", map[string]any{"role": "observer"})
		}, adp.CodeApprovalRequired},
		{"§10.2 moderator without listing", publicRoom, func(h *harness) error {
			return h.post("bob", "room.join", map[string]any{"role": "moderator"})
		}, adp.CodePermissionDenied},
		{"§10.2 listed moderator joins directly", func(h *harness) {
			h.create(Public, map[string]any{"policy": map[string]any{"moderator_agent_ids": []string{string(h.id("bob"))}}})
		}, func(h *harness) error {
			return h.post("bob", "room.join", map[string]any{"role": "moderator"})
		}, ""},
		{"§10.2 unknown role", publicRoom, func(h *harness) error {
			return h.post("bob", "room.join", map[string]any{"role": "expert"})
		}, adp.CodeInvalidEvent},
		{"§10.2 missing role", publicRoom, func(h *harness) error {
			return h.post("bob", "room.join", map[string]any{})
		}, adp.CodeInvalidEvent},
		{"§10.2 request_id with perspective", func(h *harness) { h.create(Restricted, nil) }, func(h *harness) error {
			return h.post("bob", "room.join", map[string]any{"role": "speaker", "request_id": "jr_1", "perspective": "x"})
		}, adp.CodeInvalidEvent},
		{"§10.2 request_id unknown", func(h *harness) { h.create(Restricted, nil) }, func(h *harness) error {
			return h.post("bob", "room.join", map[string]any{"role": "speaker", "request_id": "jr_nope"})
		}, adp.CodeJoinRequestNotFound},
		{"§10.2 request pending", restrictedWithRequest, func(h *harness) error {
			return h.post("bob", "room.join", map[string]any{"role": "speaker", "request_id": "jr_bob"})
		}, adp.CodeJoinRequestNotApproved},
		{"§10.2 request of another actor", restrictedApproved, func(h *harness) error {
			return h.post("carol", "room.join", map[string]any{"role": "speaker", "request_id": "jr_bob"})
		}, adp.CodeJoinRequestNotFound},
		{"§10.2 approved request joins", restrictedApproved, func(h *harness) error {
			err := h.post("bob", "room.join", map[string]any{"role": "speaker", "request_id": "jr_bob"})
			if m, _ := h.st.Member(h.id("bob")); m.Perspective != "replication" {
				t.Fatalf("perspective from request: %q", m.Perspective)
			}
			return err
		}, ""},
		{"§10.2 role differs from the approved role", restrictedApproved, func(h *harness) error {
			return h.post("bob", "room.join", map[string]any{"role": "observer", "request_id": "jr_bob"})
		}, adp.CodeJoinRequestRoleMismatch},
		{"§10.2 expired request", restrictedApproved, func(h *harness) error {
			h.now += 31 * minute
			return h.post("bob", "room.join", map[string]any{"role": "speaker", "request_id": "jr_bob"})
		}, adp.CodeJoinRequestExpired},
		{"§10.2 consumed request", restrictedApproved, func(h *harness) error {
			h.must("bob", "room.join", map[string]any{"role": "speaker", "request_id": "jr_bob"})
			h.must("bob", "room.leave", map[string]any{})
			return h.post("bob", "room.join", map[string]any{"role": "speaker", "request_id": "jr_bob"})
		}, adp.CodeJoinRequestExpired},
		{"§10.2 rejected request", restrictedWithRequest, func(h *harness) error {
			h.must("creator", "room.join.review", review(h, "reject", ""))
			return h.post("bob", "room.join", map[string]any{"role": "speaker", "request_id": "jr_bob"})
		}, adp.CodeJoinRequestNotApproved},
		{"§10.5 banned after approval", restrictedApproved, func(h *harness) error {
			h.must("creator", "room.member.remove", map[string]any{"member": h.id("bob"), "ban": true})
			return h.post("bob", "room.join", map[string]any{"role": "speaker", "request_id": "jr_bob"})
		}, adp.CodeMemberBanned},
		{"§11 auto-approved listed moderator joins with request_id", func(h *harness) {
			h.create(Private, map[string]any{"policy": map[string]any{"moderator_agent_ids": []string{string(h.id("bob"))}}})
			h.jr["jr_auto"] = &JoinRequest{ID: "jr_auto", RoomID: h.st.ID, Applicant: h.id("bob"), Role: adp.RoleModerator,
				Status: "approved", ApprovedRole: adp.RoleModerator, ExpiresAt: h.now + 30*minute}
		}, func(h *harness) error {
			return h.post("bob", "room.join", map[string]any{"role": "moderator", "request_id": "jr_auto"})
		}, ""},
		{"§10.1 creator rejoins its private room directly", func(h *harness) {
			h.create(Private, nil)
			h.must("creator", "room.leave", map[string]any{})
		}, func(h *harness) error {
			return h.post("creator", "room.join", map[string]any{"role": "moderator"})
		}, ""},
	})
}

// restrictedWithRequest: a restricted room with bob's pending request.
func restrictedWithRequest(h *harness) {
	h.create(Restricted, nil)
	fact := `{"applicant":"` + string(h.id("bob")) + `","created_at":` + itoa(h.now) + `,"expires_at":` + itoa(h.now+30*minute) +
		`,"extra":{},"id":"jr_bob","perspective":"replication","role":"speaker","room_id":"` + h.st.ID + `"}`
	h.jr["jr_bob"] = &JoinRequest{ID: "jr_bob", RoomID: h.st.ID, Applicant: h.id("bob"), Role: adp.RoleSpeaker,
		Perspective: "replication", ExpiresAt: h.now + 30*minute, Status: "pending", Fact: []byte(fact)}
}

func restrictedApproved(h *harness) {
	restrictedWithRequest(h)
	h.must("creator", "room.join.review", review(h, "approve", "speaker"))
	h.jr["jr_bob"].Status, h.jr["jr_bob"].ApprovedRole = "approved", adp.RoleSpeaker
}

func review(h *harness, decision, role string) map[string]any {
	r := h.jr["jr_bob"]
	p := map[string]any{
		"request": map[string]any{"id": r.ID, "room_id": r.RoomID, "applicant": r.Applicant, "role": r.Role,
			"perspective": r.Perspective, "created_at": r.ExpiresAt - 30*minute, "expires_at": r.ExpiresAt, "extra": map[string]any{}},
		"decision": decision,
	}
	if role != "" {
		p["role"] = role
	}
	return p
}

func itoa(n int64) string {
	b := []byte{}
	if n == 0 {
		return "0"
	}
	for n > 0 {
		b = append([]byte{byte('0' + n%10)}, b...)
		n /= 10
	}
	return string(b)
}
