// The room's rules for members and what they post (§10.3–§13): leaving,
// role updates, removal and bans, join reviews, messages and types. The
// envelope, lifecycle, create, update and join rules are in rules_test.go.

package room

import (
	"testing"

	"github.com/adpnode/adpnode/adp"
)

// §10.3–§10.5: leaving, role updates, removal and bans.
func TestRulesMembership(t *testing.T) {
	runRules(t, []ruleCase{
		{"§10.3 non-member leaves", publicRoom, func(h *harness) error {
			return h.post("bob", "room.leave", map[string]any{})
		}, adp.CodePermissionDenied},
		{"§10.3 leave clears status", publicWithSpeaker, func(h *harness) error {
			a, err := h.submit(h.sign("alice", "room.leave", map[string]any{"reason": "done"}))
			if err == nil && a.ClearStatus != h.id("alice") {
				t.Fatalf("ClearStatus %q", a.ClearStatus)
			}
			return err
		}, ""},
		{"§10.4 promote speaker to moderator", publicWithSpeaker, func(h *harness) error {
			return h.post("creator", "room.member.role.update", map[string]any{"member": h.id("alice"), "role": "moderator"})
		}, ""},
		{"§10.4 target not a member", publicRoom, func(h *harness) error {
			return h.post("creator", "room.member.role.update", map[string]any{"member": h.id("zed"), "role": "speaker"})
		}, adp.CodePermissionDenied},
		{"§10.4 by a speaker", publicWithSpeaker, func(h *harness) error {
			return h.post("alice", "room.member.role.update", map[string]any{"member": h.id("creator"), "role": "observer"})
		}, adp.CodePermissionDenied},
		{"§10.4 target role not allowed", func(h *harness) {
			h.create(Public, map[string]any{"policy": map[string]any{"observer_allowed": false}})
			h.join("alice", adp.RoleSpeaker)
		}, func(h *harness) error {
			return h.post("creator", "room.member.role.update", map[string]any{"member": h.id("alice"), "role": "observer"})
		}, adp.CodeRoleNotAllowed},
		{"§10.4 max_speakers on promotion", func(h *harness) {
			h.create(Public, map[string]any{"policy": map[string]any{"max_speakers": 1}})
			h.join("alice", adp.RoleObserver)
		}, func(h *harness) error {
			return h.post("creator", "room.member.role.update", map[string]any{"member": h.id("alice"), "role": "speaker"})
		}, adp.CodeMaxSpeakersExceeded},
		{"§10.4 speaker to moderator does not count twice", func(h *harness) {
			h.create(Public, map[string]any{"policy": map[string]any{"max_speakers": 2}})
			h.join("alice", adp.RoleSpeaker)
		}, func(h *harness) error {
			return h.post("creator", "room.member.role.update", map[string]any{"member": h.id("alice"), "role": "moderator"})
		}, ""},
		{"§10.4 bad role", publicWithSpeaker, func(h *harness) error {
			return h.post("creator", "room.member.role.update", map[string]any{"member": h.id("alice"), "role": "admin"})
		}, adp.CodeInvalidEvent},
		{"§10.4 demoted to observer loses message rights", publicWithSpeaker, func(h *harness) error {
			h.must("creator", "room.member.role.update", map[string]any{"member": h.id("alice"), "role": "observer"})
			return h.post("alice", "message.create", msg("muted?"))
		}, adp.CodePermissionDenied},
		{"§10.1 creator demoted to observer still passes role checks", publicRoom, func(h *harness) error {
			h.must("creator", "room.member.role.update", map[string]any{"member": h.id("creator"), "role": "observer"})
			return h.post("creator", "message.create", msg("still the creator"))
		}, ""},
		{"§10.5 member missing", publicWithSpeaker, func(h *harness) error {
			return h.post("creator", "room.member.remove", map[string]any{"ban": true})
		}, adp.CodeInvalidEvent},
		{"§10.5 member malformed", publicWithSpeaker, func(h *harness) error {
			return h.post("creator", "room.member.remove", map[string]any{"member": "did:agent:bad"})
		}, adp.CodeInvalidEvent},
		{"§10.5 removing the creator", func(h *harness) {
			h.create(Public, map[string]any{"policy": map[string]any{"moderator_agent_ids": []string{string(h.id("mod"))}}})
			h.join("mod", adp.RoleModerator)
		}, func(h *harness) error {
			return h.post("mod", "room.member.remove", map[string]any{"member": h.id("creator")})
		}, adp.CodePermissionDenied},
		{"§10.5 removing oneself", func(h *harness) {
			h.create(Public, map[string]any{"policy": map[string]any{"moderator_agent_ids": []string{string(h.id("mod"))}}})
			h.join("mod", adp.RoleModerator)
		}, func(h *harness) error {
			return h.post("mod", "room.member.remove", map[string]any{"member": h.id("mod")})
		}, adp.CodePermissionDenied},
		{"§10.5 removing a non-member without ban", publicRoom, func(h *harness) error {
			return h.post("creator", "room.member.remove", map[string]any{"member": h.id("zed")})
		}, adp.CodePermissionDenied},
		{"§10.5 pre-emptive ban of a non-member", publicRoom, func(h *harness) error {
			h.must("creator", "room.member.remove", map[string]any{"member": h.id("zed"), "ban": true})
			return h.post("zed", "room.join", map[string]any{"role": "observer"})
		}, adp.CodeMemberBanned},
		{"§10.5 removal by a speaker", publicWithSpeaker, func(h *harness) error {
			h.join("bob", adp.RoleSpeaker)
			return h.post("alice", "room.member.remove", map[string]any{"member": h.id("bob")})
		}, adp.CodePermissionDenied},
		{"§10.5 ban must be boolean", publicWithSpeaker, func(h *harness) error {
			return h.post("creator", "room.member.remove", map[string]any{"member": h.id("alice"), "ban": "yes"})
		}, adp.CodeInvalidEvent},
		{"§10.5 removed member may rejoin a public room", publicWithSpeaker, func(h *harness) error {
			h.must("creator", "room.member.remove", map[string]any{"member": h.id("alice")})
			return h.post("alice", "room.join", map[string]any{"role": "speaker"})
		}, ""},
		{"§10.5 approving a banned agent's request lifts the ban", func(h *harness) {
			restrictedWithRequest(h)
			h.must("creator", "room.member.remove", map[string]any{"member": h.id("bob"), "ban": true})
		}, func(h *harness) error {
			h.must("creator", "room.join.review", review(h, "approve", "speaker"))
			if h.st.Banned(h.id("bob")) {
				t.Fatal("ban not lifted")
			}
			return h.post("bob", "room.join", map[string]any{"role": "speaker", "request_id": "jr_bob"})
		}, ""},
	})
}

// §11: room.join.review.
func TestRulesReview(t *testing.T) {
	runRules(t, []ruleCase{
		{"§11 approve", restrictedWithRequest, func(h *harness) error {
			return h.post("creator", "room.join.review", review(h, "approve", "speaker"))
		}, ""},
		{"§11 approve a different role", restrictedWithRequest, func(h *harness) error {
			h.must("creator", "room.join.review", review(h, "approve", "observer"))
			return h.post("bob", "room.join", map[string]any{"role": "observer", "request_id": "jr_bob"})
		}, ""},
		{"§11 review by a speaker", func(h *harness) {
			restrictedWithRequest(h)
		}, func(h *harness) error {
			return h.post("alice", "room.join.review", review(h, "approve", "speaker"))
		}, adp.CodePermissionDenied},
		{"§11 reviewed twice", restrictedApproved, func(h *harness) error {
			return h.post("creator", "room.join.review", review(h, "reject", ""))
		}, adp.CodePermissionDenied},
		{"§11 unknown request", restrictedWithRequest, func(h *harness) error {
			p := review(h, "approve", "speaker")
			p["request"].(map[string]any)["id"] = "jr_other"
			return h.post("creator", "room.join.review", p)
		}, adp.CodeJoinRequestNotFound},
		{"§11 request of another room", restrictedWithRequest, func(h *harness) error {
			p := review(h, "approve", "speaker")
			p["request"].(map[string]any)["room_id"] = "d8ftedhpqhsusbg00000"
			return h.post("creator", "room.join.review", p)
		}, adp.CodeInvalidEvent},
		{"§11 request object altered", restrictedWithRequest, func(h *harness) error {
			p := review(h, "approve", "speaker")
			p["request"].(map[string]any)["role"] = "moderator"
			return h.post("creator", "room.join.review", p)
		}, adp.CodeInvalidEvent},
		{"§11 request object carries transport metadata", restrictedWithRequest, func(h *harness) error {
			p := review(h, "approve", "speaker")
			p["request"].(map[string]any)["jwt"] = "eyJ..."
			return h.post("creator", "room.join.review", p)
		}, adp.CodeInvalidEvent},
		{"§11 approve without role", restrictedWithRequest, func(h *harness) error {
			return h.post("creator", "room.join.review", review(h, "approve", ""))
		}, adp.CodeInvalidEvent},
		{"§11 unknown decision (DECISIONS 19)", restrictedWithRequest, func(h *harness) error {
			p := review(h, "approve", "speaker")
			p["decision"] = "maybe"
			return h.post("creator", "room.join.review", p)
		}, adp.CodeInvalidEvent},
		{"§11 approve a role the policy forbids", func(h *harness) {
			h.create(Restricted, map[string]any{"policy": map[string]any{"observer_allowed": false}})
			fact := `{"applicant":"` + string(h.id("bob")) + `","created_at":1,"expires_at":` + itoa(h.now+30*minute) + `,"extra":{},"id":"jr_bob","perspective":"replication","role":"speaker","room_id":"` + h.st.ID + `"}`
			h.jr["jr_bob"] = &JoinRequest{ID: "jr_bob", RoomID: h.st.ID, Applicant: h.id("bob"), Role: adp.RoleSpeaker, Perspective: "replication",
				ExpiresAt: h.now + 30*minute, Status: "pending", Fact: []byte(fact)}
		}, func(h *harness) error {
			p := review(h, "approve", "observer")
			p["request"].(map[string]any)["created_at"] = 1
			return h.post("creator", "room.join.review", p)
		}, adp.CodeRoleNotAllowed},
		{"§11 approve beyond max_speakers", func(h *harness) {
			restrictedWithRequest(h)
			h.must("creator", "room.update", map[string]any{"policy": map[string]any{"max_speakers": 1}})
		}, func(h *harness) error {
			return h.post("creator", "room.join.review", review(h, "approve", "speaker"))
		}, adp.CodeMaxSpeakersExceeded},
		{"§11 review of an expired request", restrictedWithRequest, func(h *harness) error {
			h.now += 31 * minute
			return h.post("creator", "room.join.review", review(h, "approve", "speaker"))
		}, adp.CodeJoinRequestExpired},
		{"§11 review of an auto-approved request", restrictedWithRequest, func(h *harness) error {
			h.jr["jr_bob"].Status = "approved"
			return h.post("creator", "room.join.review", review(h, "approve", "speaker"))
		}, adp.CodePermissionDenied},
	})
}

// §12: message.create.
func TestRulesMessage(t *testing.T) {
	runRules(t, []ruleCase{
		{"§12 speaker posts", publicWithSpeaker, func(h *harness) error {
			return h.post("alice", "message.create", map[string]any{"content_type": "text/markdown", "content": "# hi", "extra": map[string]any{}})
		}, ""},
		{"§12 observer may not post", publicRoom, func(h *harness) error {
			h.join("obs", adp.RoleObserver)
			return h.post("obs", "message.create", msg("x"))
		}, adp.CodePermissionDenied},
		{"§12 non-member may not post", publicRoom, func(h *harness) error {
			return h.post("zed", "message.create", msg("x"))
		}, adp.CodePermissionDenied},
		{"§12 empty content_type", publicWithSpeaker, func(h *harness) error {
			return h.post("alice", "message.create", map[string]any{"content_type": "", "content": "x"})
		}, adp.CodeInvalidEvent},
		{"§12 content_type not a MIME type", publicWithSpeaker, func(h *harness) error {
			return h.post("alice", "message.create", map[string]any{"content_type": "plain", "content": "x"})
		}, adp.CodeInvalidEvent},
		{"§12 missing content", publicWithSpeaker, func(h *harness) error {
			return h.post("alice", "message.create", map[string]any{"content_type": "text/plain"})
		}, adp.CodeInvalidEvent},
		{"§12 content is a number", publicWithSpeaker, func(h *harness) error {
			return h.post("alice", "message.create", map[string]any{"content_type": "text/plain", "content": 5})
		}, adp.CodeInvalidEvent},
		{"§12 object content with a JSON type", publicWithSpeaker, func(h *harness) error {
			return h.post("alice", "message.create", map[string]any{"content_type": "application/json", "content": map[string]any{"a": 1}})
		}, ""},
		{"§12 object content with text/plain", publicWithSpeaker, func(h *harness) error {
			return h.post("alice", "message.create", map[string]any{"content_type": "text/plain", "content": map[string]any{"a": 1}})
		}, adp.CodeInvalidEvent},
		{"§12 reference to a record of the room", publicWithSpeaker, func(h *harness) error {
			return h.post("alice", "message.create", map[string]any{"content_type": "text/plain", "content": "re", "references": []string{h.envs[0].Hash, h.recs[1].Hash}})
		}, ""},
		{"§12 reference to a foreign hash", publicWithSpeaker, func(h *harness) error {
			return h.post("alice", "message.create", map[string]any{"content_type": "text/plain", "content": "re", "references": []string{"GDt8oHZQfQ3jl5ZUfyNxKZu07yAJdDYuaw_jf_JjLYs"}})
		}, adp.CodeInvalidEvent},
		{"§12 reference not a hash", publicWithSpeaker, func(h *harness) error {
			return h.post("alice", "message.create", map[string]any{"content_type": "text/plain", "content": "re", "references": []string{"abc"}})
		}, adp.CodeInvalidEvent},
		{"§12 unknown payload field", publicWithSpeaker, func(h *harness) error {
			return h.post("alice", "message.create", map[string]any{"content_type": "text/plain", "content": "x", "mentions": []string{}})
		}, adp.CodeInvalidEvent},
	})
}

var findingType = map[string]any{
	"type": "review.finding", "kind": "message", "title": "Review finding",
	"schema": map[string]any{
		"type": "object", "required": []string{"severity", "summary"},
		"properties": map[string]any{
			"severity": map[string]any{"type": "string", "enum": []string{"low", "medium", "high"}},
			"summary":  map[string]any{"type": "string", "minLength": 1},
		},
		"additionalProperties": false,
	},
}

func withTypes(h *harness) {
	h.create(Public, map[string]any{"types": []any{map[string]any{"use": "adp:reactions/1.0"}, findingType,
		map[string]any{"use": "adp:deliberation/1.0", "overrides": map[string]any{"poll.vote": map[string]any{"roles": []string{"moderator", "speaker", "observer"}}}}}})
	h.join("alice", adp.RoleSpeaker)
	h.join("obs", adp.RoleObserver)
}

// §13: the type system in the room.
func TestRulesTypes(t *testing.T) {
	finding := map[string]any{"severity": "high", "summary": "retry loop starves the writer"}
	react := func(h *harness) map[string]any {
		return map[string]any{"event_id": h.envs[0].Hash, "reaction": "agree"}
	}
	runRules(t, []ruleCase{
		{"§13.2 undefined type", publicWithSpeaker, func(h *harness) error {
			return h.post("alice", "review.finding", finding)
		}, adp.CodeTypeNotDefined},
		{"§13.6 inline type accepted", withTypes, func(h *harness) error {
			return h.post("alice", "review.finding", finding)
		}, ""},
		{"§13.6 schema violation", withTypes, func(h *harness) error {
			return h.post("alice", "review.finding", map[string]any{"severity": "critical", "summary": "x"})
		}, adp.CodePayloadSchemaViolation},
		{"§13.6 observer may react (signal)", withTypes, func(h *harness) error {
			return h.post("obs", "reaction.create", react(h))
		}, ""},
		{"§13.6 observer may not send a message-kind type", withTypes, func(h *harness) error {
			return h.post("obs", "review.finding", finding)
		}, adp.CodePermissionDenied},
		{"§13.5 roles override lets observers vote", withTypes, func(h *harness) error {
			return h.post("obs", "poll.vote", map[string]any{"poll_event_id": h.envs[0].Hash, "option_ids": []string{"a"}})
		}, ""},
		{"§13.1 signal types use the anchor rule", withTypes, func(h *harness) error {
			rh, _, _ := h.st.RecordHash(1)
			return h.post("obs", "reaction.create", react(h), base(1, rh))
		}, ""},
		{"§13.1 message-kind custom types use the head CAS", withTypes, func(h *harness) error {
			rh, _, _ := h.st.RecordHash(1)
			h.must("creator", "message.create", msg("new head"))
			return h.post("alice", "review.finding", finding, base(1, rh))
		}, adp.CodeRoomHeadMismatch},
		{"§13.4 type.define by a speaker", withTypes, func(h *harness) error {
			return h.post("alice", "type.define", map[string]any{"use": "adp:curation/1.0"})
		}, adp.CodePermissionDenied},
		{"§13.4 redefinition keeps kind", withTypes, func(h *harness) error {
			d := map[string]any{}
			for k, v := range findingType {
				d[k] = v
			}
			d["title"] = "Finding v2"
			return h.post("creator", "type.define", d)
		}, ""},
		{"§13.4 redefinition changing kind", withTypes, func(h *harness) error {
			d := map[string]any{}
			for k, v := range findingType {
				d[k] = v
			}
			d["kind"] = "signal"
			return h.post("creator", "type.define", d)
		}, adp.CodeInvalidEvent},
		{"§13.4 disabled type blocks new events", withTypes, func(h *harness) error {
			d := map[string]any{}
			for k, v := range findingType {
				d[k] = v
			}
			d["status"] = "disabled"
			h.must("creator", "type.define", d)
			return h.post("alice", "review.finding", finding)
		}, adp.CodeTypeDisabled},
		{"§13.4 latest definition governs", withTypes, func(h *harness) error {
			d := map[string]any{}
			for k, v := range findingType {
				d[k] = v
			}
			d["schema"] = map[string]any{"type": "object", "required": []string{"ticket"}}
			h.must("creator", "type.define", d)
			return h.post("alice", "review.finding", finding)
		}, adp.CodePayloadSchemaViolation},
		{"§13.4 deprecated types still accepted", withTypes, func(h *harness) error {
			d := map[string]any{}
			for k, v := range findingType {
				d[k] = v
			}
			d["status"] = "deprecated"
			h.must("creator", "type.define", d)
			return h.post("alice", "review.finding", finding)
		}, ""},
		{"§13.3 reserved prefix", publicRoom, func(h *harness) error {
			return h.post("creator", "type.define", map[string]any{"type": "type.thing", "kind": "signal", "title": "x", "schema": map[string]any{}})
		}, adp.CodeInvalidEvent},
		{"§13.3 built-in name", publicRoom, func(h *harness) error {
			return h.post("creator", "type.define", map[string]any{"type": "message.create", "kind": "message", "title": "x", "schema": map[string]any{}})
		}, adp.CodeInvalidEvent},
		{"§13.3 remote $ref", publicRoom, func(h *harness) error {
			return h.post("creator", "type.define", map[string]any{"type": "x.y", "kind": "signal", "title": "x", "schema": map[string]any{"$ref": "https://example.com/s.json"}})
		}, adp.CodeInvalidEvent},
		{"§13.5 override of kind", publicRoom, func(h *harness) error {
			return h.post("creator", "type.define", map[string]any{"use": "adp:reactions/1.0", "overrides": map[string]any{"reaction.create": map[string]any{"kind": "message"}}})
		}, adp.CodeInvalidEvent},
		{"§13.5 types subset", publicRoom, func(h *harness) error {
			h.must("creator", "type.define", map[string]any{"use": "adp:deliberation/1.0", "types": []string{"poll.create", "poll.vote"}})
			if _, ok := h.st.Registry.Lookup("question.create"); ok {
				t.Fatal("question.create imported outside the subset")
			}
			return h.post("creator", "poll.create", map[string]any{"poll_id": "p1", "question": "which?", "options": []any{map[string]any{"id": "a", "label": "A"}, map[string]any{"id": "b", "label": "B"}}})
		}, ""},
		{"§21 64 types per room", publicRoom, func(h *harness) error {
			for i := 0; i < 64; i++ {
				if err := h.post("creator", "type.define", map[string]any{"type": "t.n" + itoa(int64(i)), "kind": "signal", "title": "x", "schema": map[string]any{}}); err != nil {
					t.Fatalf("type %d: %v", i, err)
				}
			}
			return h.post("creator", "type.define", map[string]any{"type": "t.extra", "kind": "signal", "title": "x", "schema": map[string]any{}})
		}, adp.CodeInvalidEvent},
		{"§13.2 creator passes a roles override", func(h *harness) {
			h.create(Public, map[string]any{"types": []any{map[string]any{"type": "x.only.obs", "kind": "signal", "title": "x", "roles": []string{"observer"}, "schema": map[string]any{}}}})
		}, func(h *harness) error {
			return h.post("creator", "x.only.obs", map[string]any{})
		}, ""},
		{"§13.2 roles override narrows", func(h *harness) {
			h.create(Public, map[string]any{"types": []any{map[string]any{"type": "x.only.obs", "kind": "signal", "title": "x", "roles": []string{"observer"}, "schema": map[string]any{}}}})
			h.join("alice", adp.RoleSpeaker)
		}, func(h *harness) error {
			return h.post("alice", "x.only.obs", map[string]any{})
		}, adp.CodePermissionDenied},
		{"§14 control kind needs a moderator", func(h *harness) {
			h.create(Public, map[string]any{"types": []any{map[string]any{"use": "adp:moderation/1.0"}}})
			h.join("alice", adp.RoleSpeaker)
		}, func(h *harness) error {
			return h.post("alice", "turn.update", map[string]any{"turn_id": 1, "speaker": h.id("alice")})
		}, adp.CodePermissionDenied},
		{"§14 control kind by a moderator", func(h *harness) {
			h.create(Public, map[string]any{"types": []any{map[string]any{"use": "adp:moderation/1.0"}}})
			h.join("alice", adp.RoleSpeaker)
		}, func(h *harness) error {
			return h.post("creator", "turn.update", map[string]any{"turn_id": 1, "speaker": h.id("alice")})
		}, ""},
	})
}
