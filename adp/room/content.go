package room

import (
	"github.com/adpnode/adpnode/adp"
	"github.com/adpnode/adpnode/adp/record"
	"github.com/adpnode/adpnode/adp/types"
)

// admitDefine applies §13.4: one declaration per type.define, creator or
// moderator only (built-in rules, no roles override).
func (s *State) admitDefine(a *Admission) error {
	if err := s.requireManager(a); err != nil {
		return err
	}
	if err := s.checkPayloadSize(a); err != nil {
		return err
	}
	defs, imp, err := types.ParseDeclaration(a.Env.Event.Payload, s.cfg.Packs, s.cfg.Limits.Types)
	if err != nil {
		return err
	}
	reg := s.Registry.Clone()
	if err := reg.Define(defs, s.cfg.Limits.Types); err != nil {
		return err
	}
	a.commit = func(s *State, _ *record.Record) {
		s.Registry = reg
		if imp != nil {
			s.Imports = appendImport(s.Imports, *imp)
		}
	}
	return nil
}

// admitMessage applies §12.
func (s *State) admitMessage(a *Admission) error {
	m, err := s.requireMember(a)
	if err != nil {
		return err
	}
	if !m.Role.Speaking() && a.Env.Event.Actor != s.Creator {
		return adp.Reason(adp.CodePermissionDenied, "role", "message.create requires a speaking role")
	}
	if err := s.checkPayloadSize(a); err != nil {
		return err
	}
	o, err := parseObject("message.create payload", a.Env.Event.Payload, "content_type", "content", "references", "extra")
	if err != nil {
		return err
	}
	ct, err := o.requiredStr("content_type")
	if err != nil {
		return err
	}
	if !validContentType(ct) {
		return invalid("content_type", "content_type %q is empty or not a MIME type", ct)
	}
	content, ok := o.Get("content")
	if !ok {
		return invalid("missing_field", "message.create payload requires content")
	}
	if content[0] != '"' && content[0] != '{' {
		return invalid("content", "content must be a JSON string or a JSON object")
	}
	if content[0] == '{' && !jsonContentType(ct) {
		return invalid("content", "object content requires a JSON content_type")
	}
	if _, err := o.extra(); err != nil {
		return err
	}
	return s.checkReferences(o)
}

// jsonContentType reports whether ct names a JSON media type.
func jsonContentType(ct string) bool {
	mt := ct
	for i := 0; i < len(ct); i++ {
		if ct[i] == ';' {
			mt = ct[:i]
			break
		}
	}
	for len(mt) > 0 && (mt[len(mt)-1] == ' ' || mt[len(mt)-1] == '\t') {
		mt = mt[:len(mt)-1]
	}
	return mt == "application/json" || len(mt) > 5 && mt[len(mt)-5:] == "+json"
}

// admitCustom applies §13.6 and §14 to a room-defined type.
func (s *State) admitCustom(a *Admission) error {
	m, err := s.requireMember(a)
	if err != nil {
		return err
	}
	if a.Env.Event.Actor != s.Creator && !a.Def.RoleAllowed(m.Role) {
		return adp.Reason(adp.CodePermissionDenied, "role", "the actor's role may not send "+a.Type)
	}
	if err := s.checkPayloadSize(a); err != nil {
		return err
	}
	return a.Def.ValidatePayload(a.Env.Event.Payload)
}
