package room

import (
	"bytes"

	"github.com/adpnode/adpnode/adp"
	"github.com/adpnode/adpnode/adp/identity"
	"github.com/adpnode/adpnode/adp/record"
)

// admitJoin applies §10.2 and the join-request rules of §11.
func (s *State) admitJoin(a *Admission, jr JoinRequests) error {
	if err := s.checkPayloadSize(a); err != nil {
		return err
	}
	actor := a.Env.Event.Actor
	o, err := parseObject("room.join payload", a.Env.Event.Payload, "role", "perspective", "request_id", "reason", "extra")
	if err != nil {
		return err
	}
	role, _, err := o.role("role", true)
	if err != nil {
		return err
	}
	perspective, hasPerspective, err := o.str("perspective")
	if err != nil {
		return err
	}
	reqID, hasReq, err := o.str("request_id")
	if err != nil {
		return err
	}
	if err := o.reason(); err != nil {
		return err
	}
	if _, err := o.extra(); err != nil {
		return err
	}
	if hasReq && hasPerspective {
		return invalid("perspective_with_request", "perspective must be absent when request_id is present; the join request's perspective is authoritative")
	}
	if s.IsActiveMember(actor) {
		return adp.Reason(adp.CodePermissionDenied, "already_member", "actor is already an active member of the room")
	}
	if hasReq {
		p, err := s.checkJoinRequest(actor, reqID, role, a.Now, jr, a.replay)
		if err != nil {
			return err
		}
		perspective = p
		a.ConsumedRequest = reqID
	} else {
		// The creator may rejoin its own room directly: it could approve
		// its own request anyway (creator permission, §10.1).
		if actor != s.Creator {
			if s.banned[actor] {
				return adp.Errorf(adp.CodeMemberBanned, "actor is banned from this room")
			}
			if s.Visibility != Public {
				return adp.Errorf(adp.CodeApprovalRequired, "this %s room requires an approved join request (request_id)", s.Visibility)
			}
			if role == adp.RoleModerator && !s.Policy.ListedModerator(actor) {
				return adp.Reason(adp.CodePermissionDenied, "moderator_not_listed",
					"joining as moderator requires an approved request or a listing in policy.moderator_agent_ids")
			}
		}
	}
	if err := s.roleAdmissible(role, ""); err != nil {
		return err
	}
	a.commit = func(s *State, rec *record.Record) {
		if hasReq {
			s.consumed[reqID] = true
		}
		s.setRole(actor, role, perspective, rec.Seq, true)
	}
	return nil
}

// checkJoinRequest validates a room.join's request_id and returns the
// perspective the request declared. Requests reviewed in the chain are
// judged from the chain; others live from the host's join requests, and on
// replay by whether auto-approval applied (§11, DECISIONS 15), with the
// perspective taken from the request's immutable fact where the host has it.
func (s *State) checkJoinRequest(actor identity.AgentID, id string, role adp.Role, now int64, jr JoinRequests, replay bool) (string, error) {
	if s.consumed[id] {
		return "", adp.Reason(adp.CodeJoinRequestExpired, "consumed", "this join request was already used by a room.join")
	}
	if r, ok := s.requests[id]; ok {
		switch {
		case r.Applicant != actor:
			return "", adp.Errorf(adp.CodeJoinRequestNotFound, "no join request %q for this actor in this room", id)
		case !r.Approved:
			return "", adp.Reason(adp.CodeJoinRequestNotApproved, "rejected", "the join request was rejected")
		case s.banned[actor]:
			return "", adp.Errorf(adp.CodeMemberBanned, "actor was banned after its request was approved")
		case now >= r.ExpiresAt:
			return "", adp.Reason(adp.CodeJoinRequestExpired, "expired", "the join request has expired")
		case role != r.Role:
			return "", &adp.Error{Code: adp.CodeJoinRequestRoleMismatch, Message: "payload.role differs from the approved role",
				Data: map[string]any{"approved_role": string(r.Role)}}
		}
		return r.Perspective, nil
	}
	if replay {
		if err := s.autoApprovable(actor, role); err != nil {
			return "", err
		}
		if jr != nil {
			if r, ok := jr.JoinRequest(id); ok && r.RoomID == s.ID && r.Applicant == actor {
				return r.Perspective, nil
			}
		}
		return "", nil
	}
	if jr != nil {
		r, ok := jr.JoinRequest(id)
		if !ok || r.RoomID != s.ID || r.Applicant != actor {
			return "", adp.Errorf(adp.CodeJoinRequestNotFound, "no join request %q for this actor in this room", id)
		}
		switch {
		case now >= r.ExpiresAt:
			return "", adp.Reason(adp.CodeJoinRequestExpired, "expired", "the join request has expired")
		case r.Status == "rejected":
			return "", adp.Reason(adp.CodeJoinRequestNotApproved, "rejected", "the join request was rejected")
		case r.Status != "approved":
			return "", adp.Reason(adp.CodeJoinRequestNotApproved, "pending", "the join request has not been approved")
		case role != r.ApprovedRole:
			return "", &adp.Error{Code: adp.CodeJoinRequestRoleMismatch, Message: "payload.role differs from the approved role",
				Data: map[string]any{"approved_role": string(r.ApprovedRole)}}
		}
		// An approval the chain does not record is an auto-approval; it
		// must still be one the rules allow now (a ban since, say).
		if err := s.autoApprovable(actor, role); err != nil {
			return "", err
		}
		return r.Perspective, nil
	}
	if err := s.autoApprovable(actor, role); err != nil {
		return "", err
	}
	return "", nil
}

// autoApprovable reports whether a join request by actor for role may be
// approved without review: public rooms, or listed moderators asking for
// moderator (§11, DECISIONS 15); never for a banned agent (§10.5).
func (s *State) autoApprovable(actor identity.AgentID, role adp.Role) error {
	if s.banned[actor] {
		return adp.Errorf(adp.CodeMemberBanned, "actor is banned from this room")
	}
	if role == adp.RoleModerator {
		if s.Policy.ListedModerator(actor) {
			return nil
		}
		return adp.Reason(adp.CodeJoinRequestNotApproved, "not_reviewed", "a moderator request needs review unless the applicant is listed in policy.moderator_agent_ids")
	}
	if s.Visibility == Public {
		return nil
	}
	return adp.Reason(adp.CodeJoinRequestNotApproved, "not_reviewed", "the join request was not approved by a room.join.review")
}

// AutoApprovable is the host's check for auto-approving a new join request.
func (s *State) AutoApprovable(actor identity.AgentID, role adp.Role) bool {
	return s.autoApprovable(actor, role) == nil && s.roleAdmissible(role, "") == nil
}

// admitLeave applies §10.3: any active member may leave.
func (s *State) admitLeave(a *Admission) error {
	if _, err := s.requireMember(a); err != nil {
		return err
	}
	if err := s.checkLifecyclePayload(a, "room.leave payload"); err != nil {
		return err
	}
	actor := a.Env.Event.Actor
	a.ClearStatus = actor
	a.commit = func(s *State, rec *record.Record) { s.deactivate(actor, rec.Seq) }
	return nil
}

// admitRoleUpdate applies §10.4.
func (s *State) admitRoleUpdate(a *Admission) error {
	if err := s.requireManager(a); err != nil {
		return err
	}
	if err := s.checkPayloadSize(a); err != nil {
		return err
	}
	o, err := parseObject("room.member.role.update payload", a.Env.Event.Payload, "member", "role", "reason", "extra")
	if err != nil {
		return err
	}
	target, err := o.agentID("member")
	if err != nil {
		return err
	}
	role, _, err := o.role("role", true)
	if err != nil {
		return err
	}
	if err := o.reason(); err != nil {
		return err
	}
	if _, err := o.extra(); err != nil {
		return err
	}
	m, ok := s.members[target]
	if !ok || !m.Active {
		return adp.Reason(adp.CodePermissionDenied, "not_member", "payload.member is not an active member")
	}
	if err := s.roleAdmissible(role, m.Role); err != nil {
		return err
	}
	if role == adp.RoleObserver {
		a.ClearStatus = target
	}
	a.commit = func(s *State, rec *record.Record) { s.setRole(target, role, "", rec.Seq, false) }
	return nil
}

// admitRemove applies §10.5.
func (s *State) admitRemove(a *Admission) error {
	if err := s.requireManager(a); err != nil {
		return err
	}
	if err := s.checkPayloadSize(a); err != nil {
		return err
	}
	o, err := parseObject("room.member.remove payload", a.Env.Event.Payload, "member", "ban", "reason", "references", "extra")
	if err != nil {
		return err
	}
	target, err := o.agentID("member")
	if err != nil {
		return err
	}
	ban, _, err := o.boolean("ban")
	if err != nil {
		return err
	}
	if err := o.reason(); err != nil {
		return err
	}
	if _, err := o.extra(); err != nil {
		return err
	}
	if err := s.checkReferences(o); err != nil {
		return err
	}
	switch {
	case target == s.Creator:
		return adp.Reason(adp.CodePermissionDenied, "remove_creator", "the room creator cannot be removed or banned")
	case target == a.Env.Event.Actor:
		return adp.Reason(adp.CodePermissionDenied, "remove_self", "use room.leave to leave the room")
	case !s.IsActiveMember(target) && !ban:
		return adp.Reason(adp.CodePermissionDenied, "not_member", "payload.member is not an active member (set ban to ban a non-member)")
	}
	a.ClearStatus = target
	a.commit = func(s *State, rec *record.Record) {
		s.deactivate(target, rec.Seq)
		if ban {
			s.banned[target] = true
		}
	}
	return nil
}

var requestFields = []string{"id", "room_id", "applicant", "role", "perspective", "reason", "created_at", "expires_at", "extra"}

// admitReview applies the room.join.review rules of §11.
func (s *State) admitReview(a *Admission, jr JoinRequests) error {
	if err := s.requireManager(a); err != nil {
		return err
	}
	if err := s.checkPayloadSize(a); err != nil {
		return err
	}
	o, err := parseObject("room.join.review payload", a.Env.Event.Payload, "request", "decision", "role", "reason", "extra")
	if err != nil {
		return err
	}
	reqRaw, ok, err := o.obj("request")
	if err != nil {
		return err
	}
	if !ok {
		return invalid("missing_field", "room.join.review payload requires the request object")
	}
	req, err := parseObject("review request", reqRaw, requestFields...)
	if err != nil {
		return err
	}
	id, err := req.requiredStr("id")
	if err != nil {
		return err
	}
	roomID, err := req.requiredStr("room_id")
	if err != nil {
		return err
	}
	if roomID != s.ID {
		return invalid("request_room", "request.room_id is not this room")
	}
	applicant, err := req.agentID("applicant")
	if err != nil {
		return err
	}
	if _, _, err := req.role("role", true); err != nil {
		return err
	}
	perspective, _, err := req.str("perspective")
	if err != nil {
		return err
	}
	if err := req.reason(); err != nil {
		return err
	}
	if _, ok, err := req.integer("created_at"); err != nil || !ok {
		return invalid("missing_field", "request.created_at must be present and an integer")
	}
	expires, ok, err := req.integer("expires_at")
	if err != nil || !ok {
		return invalid("missing_field", "request.expires_at must be present and an integer")
	}
	if _, err := req.extra(); err != nil {
		return err
	}
	decision, err := o.requiredStr("decision")
	if err != nil {
		return err
	}
	if decision != "approve" && decision != "reject" {
		return invalid("bad_decision", "decision must be approve or reject")
	}
	approvedRole, hasRole, err := o.role("role", false)
	if err != nil {
		return err
	}
	if err := o.reason(); err != nil {
		return err
	}
	if _, err := o.extra(); err != nil {
		return err
	}
	if _, done := s.requests[id]; done || s.consumed[id] {
		return adp.Reason(adp.CodePermissionDenied, "already_reviewed", "this join request has already been reviewed")
	}
	if jr != nil && !a.replay {
		r, ok := jr.JoinRequest(id)
		if !ok || r.RoomID != s.ID {
			return adp.Errorf(adp.CodeJoinRequestNotFound, "no join request %q in this room", id)
		}
		if r.Status != "pending" {
			return adp.Reason(adp.CodePermissionDenied, "already_reviewed", "this join request is not pending")
		}
		if a.Now >= r.ExpiresAt {
			return adp.Reason(adp.CodeJoinRequestExpired, "expired", "the join request has expired")
		}
		if !bytes.Equal(reqRaw, r.Fact) {
			return invalid("request_mismatch", "payload.request does not match the stored join request")
		}
	}
	rr := &ReviewedRequest{ID: id, Applicant: applicant, Perspective: perspective, ExpiresAt: expires, Approved: decision == "approve"}
	if rr.Approved {
		if !hasRole {
			return invalid("missing_field", "an approving review requires role")
		}
		current := adp.Role("")
		if m, ok := s.members[applicant]; ok && m.Active {
			current = m.Role
		}
		if err := s.roleAdmissible(approvedRole, current); err != nil {
			return err
		}
		rr.Role = approvedRole
	}
	a.Reviewed = rr
	a.commit = func(s *State, rec *record.Record) {
		rr.ReviewSeq = rec.Seq
		s.requests[id] = rr
		if rr.Approved {
			delete(s.banned, applicant) // explicit re-admission lifts a ban (§10.5)
		}
	}
	return nil
}
