package room

import (
	"encoding/json"
	"strings"

	"github.com/adpnode/adpnode/adp"
	"github.com/adpnode/adpnode/adp/identity"
	"github.com/adpnode/adpnode/adp/record"
	"github.com/adpnode/adpnode/adp/types"
)

var createFields = []string{"topic", "agenda", "guidance", "visibility", "start_time", "end_time",
	"tags", "language", "policy", "types", "extra"}

var updateFields = []string{"topic", "agenda", "guidance", "tags", "language", "policy", "start_time", "end_time"}

// admitCreate applies §9 / §9.1 / §9.3 to room.create.
func (s *State) admitCreate(a *Admission) error {
	ev := &a.Env.Event
	if ev.RoomID != nil || ev.BaseSeq != nil || ev.BaseHash != nil {
		return invalid("create_has_base", "room.create must not carry room_id, base_seq or base_hash")
	}
	a.Kind = adp.KindControl
	if err := s.checkPayloadSize(a); err != nil {
		return err
	}
	o, err := parseObject("room.create payload", ev.Payload, createFields...)
	if err != nil {
		return err
	}
	var c Contract
	for _, f := range []string{"topic", "visibility", "start_time", "end_time"} {
		if !o.has(f) {
			return invalid("missing_field", "room.create payload requires %q", f)
		}
	}
	if err := parseContract(o, &c); err != nil {
		return err
	}
	vis, _, err := o.str("visibility")
	if err != nil {
		return err
	}
	if vis != Public && vis != Restricted && vis != Private {
		return invalid("bad_visibility", "visibility must be public, restricted or private")
	}
	c.Visibility = vis
	if c.Extra, err = o.extra(); err != nil {
		return err
	}
	if err := s.checkTimes(c.StartTime, c.EndTime, a.Now); err != nil {
		return err
	}
	if err := s.checkPolicyCaps(c.Policy); err != nil {
		return err
	}
	reg := types.NewRegistry()
	var imports []types.Import
	if raw, ok := o.Get("types"); ok {
		var decls []json.RawMessage
		if raw[0] != '[' || json.Unmarshal(raw, &decls) != nil {
			return o.fieldErr("types", "an array of type declarations")
		}
		for _, d := range decls {
			defs, imp, err := types.ParseDeclaration(d, s.cfg.Packs, s.cfg.Limits.Types)
			if err != nil {
				return err
			}
			if err := reg.Define(defs, s.cfg.Limits.Types); err != nil {
				return err
			}
			if imp != nil {
				imports = appendImport(imports, *imp)
			}
		}
	}
	a.commit = func(s *State, rec *record.Record) {
		s.ID = rec.RoomID
		s.Creator = ev.Actor
		s.CreatedAt = ev.CreatedAt
		s.Contract = c
		s.Registry = reg
		s.Imports = imports
		s.setRole(ev.Actor, adp.RoleModerator, "", rec.Seq, true)
	}
	return nil
}

// parseContract reads the updatable contract fields present in o into c.
func parseContract(o object, c *Contract) error {
	var err error
	if s, ok, e := o.str("topic"); e != nil {
		return e
	} else if ok {
		if strings.TrimSpace(s) == "" {
			return invalid("empty_topic", "topic must not be empty")
		}
		c.Topic = s
	}
	for _, f := range []struct {
		name string
		dst  *string
	}{{"agenda", &c.Agenda}, {"guidance", &c.Guidance}, {"language", &c.Language}} {
		if v, ok, e := o.str(f.name); e != nil {
			return e
		} else if ok {
			*f.dst = v
		}
	}
	if v, ok, e := o.strs("tags"); e != nil {
		return e
	} else if ok {
		c.Tags = v
		if len(v) == 0 {
			c.Tags = nil
		}
	}
	if v, ok, e := o.integer("start_time"); e != nil {
		return e
	} else if ok {
		c.StartTime = v
	}
	if v, ok, e := o.integer("end_time"); e != nil {
		return e
	} else if ok {
		c.EndTime = v
	}
	if raw, ok := o.Get("policy"); ok {
		if c.Policy, err = parsePolicy(raw); err != nil {
			return err
		}
	}
	return nil
}

// parsePolicy applies the §9.3 policy rules.
func parsePolicy(raw json.RawMessage) (Policy, error) {
	var p Policy
	o, err := parseObject("policy", raw, "moderator_agent_ids", "max_speakers", "observer_allowed", "extra")
	if err != nil {
		return p, err
	}
	ids, _, err := o.strs("moderator_agent_ids")
	if err != nil {
		return p, err
	}
	for _, s := range ids {
		id, err := identity.ParseAgentID(s)
		if err != nil {
			return p, invalid("bad_agent_id", "policy.moderator_agent_ids has a malformed Agent ID %q", s)
		}
		p.ModeratorAgentIDs = append(p.ModeratorAgentIDs, id)
	}
	if raw, ok := o.Get("max_speakers"); ok {
		var n json.Number
		if json.Unmarshal(raw, &n) != nil {
			return p, o.fieldErr("max_speakers", "an integer")
		}
		v, err := n.Int64()
		if err != nil || v < 1 {
			return p, invalid("bad_max_speakers", "policy.max_speakers must be an integer of at least 1")
		}
		p.MaxSpeakers = v
	}
	if b, ok, err := o.boolean("observer_allowed"); err != nil {
		return p, err
	} else if ok {
		p.ObserverAllowed = &b
	}
	if p.Extra, err = o.extra(); err != nil {
		return p, err
	}
	return p, nil
}

// checkTimes applies start < end, the duration limits, and that the room
// does not end before it could be used.
func (s *State) checkTimes(start, end, now int64) error {
	if start >= end {
		return invalid("bad_times", "start_time must be before end_time")
	}
	lim := s.cfg.Limits
	if d := end - start; lim.MinDuration > 0 && d < lim.MinDuration {
		return invalid("duration", "room duration %d ms is below the minimum %d ms", d, lim.MinDuration).WithData("limit", "min_duration")
	} else if lim.MaxDuration > 0 && d > lim.MaxDuration {
		return invalid("duration", "room duration %d ms exceeds the maximum %d ms", d, lim.MaxDuration).WithData("limit", "max_duration")
	}
	if end <= now {
		return invalid("end_passed", "end_time must be later than the moment of acceptance")
	}
	return nil
}

func (s *State) checkPolicyCaps(p Policy) error {
	if p.MaxSpeakers > 0 && s.cfg.Limits.MaxSpeakers > 0 && p.MaxSpeakers > int64(s.cfg.Limits.MaxSpeakers) {
		return invalid("max_speakers", "policy.max_speakers exceeds the host limit of %d", s.cfg.Limits.MaxSpeakers).WithData("limit", "max_speakers")
	}
	return nil
}

func appendImport(list []types.Import, imp types.Import) []types.Import {
	for _, have := range list {
		if have.Pack == imp.Pack && have.Digest == imp.Digest {
			return list
		}
	}
	return append(list, imp)
}

// admitUpdate applies §9.4.
func (s *State) admitUpdate(a *Admission, status Status) error {
	if err := s.requireManager(a); err != nil {
		return err
	}
	if err := s.checkPayloadSize(a); err != nil {
		return err
	}
	o, err := parseObject("room.update payload", a.Env.Event.Payload, updateFields...)
	if err != nil {
		return err
	}
	if len(o.Members) == 0 {
		return invalid("empty_update", "room.update payload must change at least one field")
	}
	if o.has("start_time") && status == StatusActive {
		return invalid("start_time_active", "start_time cannot change once the room is active")
	}
	c := s.Contract
	if o.has("policy") {
		c.Policy = Policy{}
	}
	if err := parseContract(o, &c); err != nil {
		return err
	}
	if err := s.checkPolicyCaps(c.Policy); err != nil {
		return err
	}
	if err := s.checkTimes(c.StartTime, c.EndTime, a.Now); err != nil {
		return err
	}
	a.commit = func(s *State, _ *record.Record) { s.Contract = c }
	return nil
}

// admitClose: creator or moderator, active rooms only (§13.2).
func (s *State) admitClose(a *Admission, status Status) error {
	if err := s.requireManager(a); err != nil {
		return err
	}
	if err := s.checkLifecyclePayload(a, "room.close payload"); err != nil {
		return err
	}
	a.commit = func(s *State, rec *record.Record) {
		s.Closed = true
		s.ClosedAt = rec.ReceivedAt
	}
	return nil
}

// admitCancel: creator or moderator, scheduled rooms only (§13.2).
func (s *State) admitCancel(a *Admission, status Status) error {
	if status != StatusScheduled {
		return adp.Reason(adp.CodeRoomNotActive, "not_scheduled", "room.cancel applies only to scheduled rooms")
	}
	if err := s.requireManager(a); err != nil {
		return err
	}
	if err := s.checkLifecyclePayload(a, "room.cancel payload"); err != nil {
		return err
	}
	a.commit = func(s *State, _ *record.Record) { s.Cancelled = true }
	return nil
}

func (s *State) checkLifecyclePayload(a *Admission, what string) error {
	if err := s.checkPayloadSize(a); err != nil {
		return err
	}
	o, err := parseObject(what, a.Env.Event.Payload, "reason", "references", "extra")
	if err != nil {
		return err
	}
	if err := o.reason(); err != nil {
		return err
	}
	if _, err := o.extra(); err != nil {
		return err
	}
	return s.checkReferences(o)
}

// checkReferences requires every payload.references entry to be the
// envelope hash or record hash of a record of this room (§12).
func (s *State) checkReferences(o object) error {
	refs, err := o.references()
	if err != nil {
		return err
	}
	for _, r := range refs {
		if _, ok, err := s.SeqOf(r); err != nil {
			return err
		} else if !ok {
			return invalid("unknown_reference", "reference %q is not a record of this room", r)
		}
	}
	return nil
}
