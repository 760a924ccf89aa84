package room

import (
	"fmt"

	"github.com/adpnode/adpnode/adp"
	"github.com/adpnode/adpnode/adp/identity"
	"github.com/adpnode/adpnode/adp/record"
	"github.com/adpnode/adpnode/adp/types"
)

// JoinRequest is the host's view of a join request resource (§11). The state
// machine consults it for requests that no room.join.review in the chain
// describes: auto-approved ones, and pending ones under review.
type JoinRequest struct {
	ID           string
	RoomID       string
	Applicant    identity.AgentID
	Role         adp.Role
	Perspective  string
	ExpiresAt    int64
	Status       string   // "pending", "approved" or "rejected"; expiry is derived from ExpiresAt
	ApprovedRole adp.Role // set when approved
	// Fact is the canonical JSON of the immutable request object, which a
	// room.join.review must carry unchanged.
	Fact []byte
}

// JoinRequests looks up join requests. Live admission (Admit) judges a
// request the chain does not describe by what the host's store says of it.
// Replay (Apply) judges every record from the chain alone and takes only an
// immutable fact from it: the perspective of an auto-approved request, which
// no record carries. It may be nil (offline verification).
type JoinRequests interface {
	JoinRequest(id string) (*JoinRequest, bool)
}

// Admission is an envelope that passed every room rule at a given time. The
// host stores its record, then calls Commit.
type Admission struct {
	Env  *identity.Envelope
	Now  int64
	Type string
	// Kind is the class that decides the freshness rule: KindSignal never
	// advances the head; lifecycle events report KindControl.
	Kind adp.Kind
	// Def is the room-defined type of a custom event (nil for built-ins).
	Def *types.Definition

	// replay is set by Apply: the record is already part of a chain.
	replay bool

	// Effects the host acts on besides the chain.
	ConsumedRequest string           // join request consumed by this room.join
	Reviewed        *ReviewedRequest // request decided by this room.join.review
	ClearStatus     identity.AgentID // member whose agent status must be cleared (§17.4)

	seq    int64 // state seq the admission was computed against
	commit func(s *State, rec *record.Record)
}

// AdvancesHead reports whether the record will become the room head.
func (a *Admission) AdvancesHead() bool { return a.Kind != adp.KindSignal }

// Admit checks env against every room rule at time now (Unix ms) and returns
// the admission, or an *adp.Error with the §20 code of the first rule broken.
//
// Admit checks: protocol, the ADP event fields and mentions, room state for
// the event type, the base_seq/base_hash anchor or head CAS, type registry,
// membership, roles, per-type rules and payload schema and size. It does not
// check the envelope hash and signature, the time window, nonces or rates.
func (s *State) Admit(env *identity.Envelope, now int64, jr JoinRequests) (*Admission, error) {
	return s.admit(env, now, jr, false)
}

func (s *State) admit(env *identity.Envelope, now int64, jr JoinRequests, replay bool) (*Admission, error) {
	ev := &env.Event
	if ev.Protocol != adp.Protocol {
		return nil, invalid("protocol", "event.protocol must be %q", adp.Protocol)
	}
	if err := s.checkMentions(ev.Mentions); err != nil {
		return nil, err
	}
	a := &Admission{Env: env, Now: now, Type: ev.Type, seq: s.Seq, replay: replay}
	if ev.Type == "room.create" {
		if s.Created() {
			return nil, invalid("room_exists", "room.create must be the first record of a room")
		}
		return a, s.admitCreate(a)
	}
	if !s.Created() {
		return nil, adp.Errorf(adp.CodeRoomNotFound, "room does not exist")
	}
	if ev.RoomID == nil || ev.BaseSeq == nil || ev.BaseHash == nil {
		return nil, invalid("missing_base", "%s requires room_id, base_seq and base_hash", ev.Type)
	}
	if *ev.RoomID != s.ID {
		return nil, invalid("room_mismatch", "event.room_id %q is not this room", *ev.RoomID)
	}
	if _, dup, err := s.seqOf(env.Digest); err != nil {
		return nil, err
	} else if dup {
		// A host answers exact resubmissions from its index before Admit;
		// the same envelope can never be a second record of a room.
		return nil, invalid("duplicate_event", "this envelope is already a record of the room")
	}

	// Room state for this event type (§8, §14).
	status := s.StatusAt(now)
	switch status {
	case StatusEnded:
		return nil, adp.Errorf(adp.CodeRoomEnded, "room has ended")
	case StatusCancelled:
		return nil, adp.Errorf(adp.CodeRoomNotActive, "room was cancelled")
	case StatusScheduled:
		if !allowedWhileScheduled(ev.Type) {
			return nil, adp.Reason(adp.CodeRoomNotActive, "scheduled", fmt.Sprintf("%s is not allowed before the room starts", ev.Type))
		}
	}

	// Class: built-in or registry (§13.2, §13.6).
	if kind, lifecycle := types.BuiltinKind(ev.Type); types.IsBuiltin(ev.Type) {
		a.Kind = kind
		if lifecycle {
			a.Kind = adp.KindControl
		}
	} else {
		def, ok := s.Registry.Lookup(ev.Type)
		if !ok {
			return nil, adp.Errorf(adp.CodeTypeNotDefined, "type %q is not defined in this room", ev.Type)
		}
		if def.Status == "disabled" {
			return nil, adp.Errorf(adp.CodeTypeDisabled, "type %q is disabled in this room", ev.Type)
		}
		a.Kind, a.Def = def.Kind, def
	}

	if err := s.checkAnchor(a.Kind, *ev.BaseSeq, *ev.BaseHash); err != nil {
		return nil, err
	}
	if len(ev.Payload) == 0 || ev.Payload[0] != '{' {
		return nil, invalid("payload_not_object", "event.payload must be a JSON object")
	}

	switch ev.Type {
	case "room.update":
		return a, s.admitUpdate(a, status)
	case "room.close":
		return a, s.admitClose(a, status)
	case "room.cancel":
		return a, s.admitCancel(a, status)
	case "room.join":
		return a, s.admitJoin(a, jr)
	case "room.leave":
		return a, s.admitLeave(a)
	case "room.member.role.update":
		return a, s.admitRoleUpdate(a)
	case "room.member.remove":
		return a, s.admitRemove(a)
	case "room.join.review":
		return a, s.admitReview(a, jr)
	case "type.define":
		return a, s.admitDefine(a)
	case "message.create":
		return a, s.admitMessage(a)
	}
	return a, s.admitCustom(a)
}

func allowedWhileScheduled(t string) bool {
	switch t {
	case "room.join", "room.join.review", "room.member.role.update", "room.member.remove",
		"room.leave", "room.update", "type.define", "room.cancel":
		return true
	}
	return false
}

func (s *State) checkMentions(mentions []string) error {
	if max := s.cfg.Limits.MaxMentions; max > 0 && len(mentions) > max {
		return invalid("too_many_mentions", "mentions has %d entries; the limit is %d", len(mentions), max).WithData("limit", "mentions")
	}
	for _, m := range mentions {
		if _, err := identity.ParseAgentID(m); err != nil {
			return invalid("bad_mention", "mention %q is not a valid Agent ID", m)
		}
	}
	return nil
}

// checkAnchor applies §6.1: signals need an accepted record at base_seq
// with hash base_hash; everything else must name the current head exactly.
func (s *State) checkAnchor(kind adp.Kind, baseSeq int64, baseHash string) error {
	if kind == adp.KindSignal {
		h, ok, err := s.RecordHash(baseSeq)
		if err != nil {
			return err
		}
		if !ok || h != baseHash {
			return &adp.Error{Code: adp.CodeBaseRecordMismatch,
				Message: fmt.Sprintf("base_seq %d / base_hash do not name an accepted record of this room", baseSeq),
				Data:    map[string]any{"base_seq": baseSeq, "base_hash": baseHash, "current_seq": s.Seq}}
		}
		return nil
	}
	if baseSeq != s.Head.Seq || baseHash != s.Head.Hash {
		return &adp.Error{Code: adp.CodeRoomHeadMismatch,
			Message: fmt.Sprintf("base_seq %d is not the room head (head is seq %d)", baseSeq, s.Head.Seq),
			Data: map[string]any{"base_seq": baseSeq, "base_hash": baseHash,
				"current_seq": s.Head.Seq, "current_hash": s.Head.Hash}}
	}
	return nil
}

// checkPayloadSize bounds the canonical payload size (§21, §13.6 step 5).
func (s *State) checkPayloadSize(a *Admission) error {
	lim := s.cfg.Limits
	max := lim.MaxPayloadBytes
	switch {
	case a.Type == "room.create" || a.Type == "type.define":
		max = lim.MaxPayloadCeiling
	case a.Def != nil && a.Def.MaxPayloadHint > 0:
		max = int(a.Def.MaxPayloadHint)
		if lim.MaxPayloadCeiling > 0 && max > lim.MaxPayloadCeiling {
			max = lim.MaxPayloadCeiling
		}
	}
	if n := len(a.Env.Event.Payload); max > 0 && n > max {
		return &adp.Error{Code: adp.CodePayloadTooLarge,
			Message: fmt.Sprintf("payload is %d bytes; the limit for %s is %d", n, a.Type, max),
			Data:    map[string]any{"limit": max, "size": n}}
	}
	return nil
}

// requireMember returns the actor's active membership or permission_denied.
func (s *State) requireMember(a *Admission) (*Member, error) {
	m, ok := s.members[a.Env.Event.Actor]
	if !ok || !m.Active {
		return nil, adp.Reason(adp.CodePermissionDenied, "not_member", "actor is not an active member of the room")
	}
	return m, nil
}

// requireManager allows the creator and moderators (§13.2 built-in table).
func (s *State) requireManager(a *Admission) error {
	m, err := s.requireMember(a)
	if err != nil {
		return err
	}
	if a.Env.Event.Actor != s.Creator && m.Role != adp.RoleModerator {
		return adp.Reason(adp.CodePermissionDenied, "not_moderator", a.Type+" requires the creator or a moderator")
	}
	return nil
}

// Commit applies an admission whose record has been stored. rec must be the
// record built for a.Env at the next seq; Commit panics on a stale admission
// because that is a host bug that would fork the room state.
func (s *State) Commit(a *Admission, rec *record.Record) {
	if a.seq != s.Seq || rec.Seq != s.Seq+1 {
		panic(fmt.Sprintf("room: stale admission (admitted at seq %d, state at %d, record %d)", a.seq, s.Seq, rec.Seq))
	}
	if a.commit != nil {
		a.commit(s, rec)
	}
	h, _ := identity.DecodeB64Len(rec.Hash, 32)
	s.hist.Append(rec.Seq, [32]byte(h), a.Env.Digest)
	s.PreHash = rec.PreHash
	s.Seq = rec.Seq
	s.LastHash = rec.Hash
	s.LastReceivedAt = rec.ReceivedAt
	if a.AdvancesHead() {
		s.Head = Head{Seq: rec.Seq, Hash: rec.Hash}
	}
	s.counts[a.Type]++
}

// Apply admits and commits a record that is already part of a chain, using
// its received_at as the time: the replay path of hosts, mirrors and
// archive verification. env is the record's parsed, verified envelope. It
// also checks that the record continues this state's chain.
func (s *State) Apply(rec *record.Record, env *identity.Envelope, jr JoinRequests) error {
	var prev *record.Record
	if s.Created() {
		prev = &record.Record{RoomID: s.ID, Seq: s.Seq, Hash: s.LastHash, ReceivedAt: s.LastReceivedAt}
	}
	if err := record.Link(prev, rec); err != nil {
		return err
	}
	if rec.Seq == 1 && !record.ValidRoomID(rec.RoomID) {
		return &record.ChainError{Seq: 1, Reason: "room_id is not a valid room ID"}
	}
	if env.Hash != identity.EncodeB64(env.Digest[:]) {
		return adp.Errorf(adp.CodeInvalidEventHash, "envelope hash does not match the event")
	}
	a, err := s.admit(env, rec.ReceivedAt, jr, true)
	if err != nil {
		return err
	}
	s.Commit(a, rec)
	return nil
}
