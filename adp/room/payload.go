package room

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/adpnode/adpnode/adp"
	"github.com/adpnode/adpnode/adp/identity"
	"github.com/adpnode/adpnode/adp/jsonobj"
)

// object is a decoded payload object of a built-in type. Payload bytes are
// canonical JSON that already passed the strict parser; jsonobj checks the
// object's shape and closes it.
type object struct {
	what string // for messages, e.g. "room.join payload"
	*jsonobj.Object
}

func invalid(reason, format string, args ...any) *adp.Error {
	return adp.Reason(adp.CodeInvalidEvent, reason, fmt.Sprintf(format, args...))
}

// parseObject decodes raw as a JSON object whose members are all in allowed.
func parseObject(what string, raw json.RawMessage, allowed ...string) (object, error) {
	o := object{what: what}
	var err error
	if len(raw) == 0 || raw[0] != '{' {
		return o, invalid("payload_not_object", "%s must be a JSON object", what)
	}
	if o.Object, err = jsonobj.Closed(raw, allowed...); err != nil {
		if e := err.(*jsonobj.Error); e.Kind == jsonobj.Unknown {
			return o, invalid("unknown_field", "%s has unknown field %q", what, e.Key)
		}
		return o, invalid("payload_not_object", "%s %v", what, err)
	}
	return o, nil
}

func (o object) has(name string) bool { return o.Has(name) }

func (o object) fieldErr(name, want string) *adp.Error {
	return invalid("bad_field", "%s field %q must be %s", o.what, name, want)
}

// str returns a string member; present reports whether it was there.
func (o object) str(name string) (s string, present bool, err error) {
	raw, ok := o.Get(name)
	if !ok {
		return "", false, nil
	}
	s, ok = jsonobj.String(raw)
	if !ok {
		return "", true, o.fieldErr(name, "a string")
	}
	return s, true, nil
}

func (o object) requiredStr(name string) (string, error) {
	s, ok, err := o.str(name)
	if err != nil {
		return "", err
	}
	if !ok {
		return "", invalid("missing_field", "%s requires %q", o.what, name)
	}
	return s, nil
}

// integer returns a non-negative integer member.
func (o object) integer(name string) (n int64, present bool, err error) {
	raw, ok := o.Get(name)
	if !ok {
		return 0, false, nil
	}
	var f json.Number
	if len(raw) == 0 || !(raw[0] == '-' || raw[0] >= '0' && raw[0] <= '9') || json.Unmarshal(raw, &f) != nil {
		return 0, true, o.fieldErr(name, "an integer")
	}
	n, e := f.Int64()
	if e != nil || n < 0 || n > identity.MaxSafeInt {
		return 0, true, o.fieldErr(name, "a non-negative safe integer")
	}
	return n, true, nil
}

func (o object) boolean(name string) (b bool, present bool, err error) {
	raw, ok := o.Get(name)
	if !ok {
		return false, false, nil
	}
	switch string(raw) {
	case "true":
		return true, true, nil
	case "false":
		return false, true, nil
	}
	return false, true, o.fieldErr(name, "a boolean")
}

func (o object) strs(name string) (v []string, present bool, err error) {
	raw, ok := o.Get(name)
	if !ok {
		return nil, false, nil
	}
	if len(raw) == 0 || raw[0] != '[' || json.Unmarshal(raw, &v) != nil {
		return nil, true, o.fieldErr(name, "an array of strings")
	}
	if v == nil {
		v = []string{}
	}
	return v, true, nil
}

// obj returns an object-valued member as raw canonical bytes, copied so
// state that keeps it does not alias the payload.
func (o object) obj(name string) (json.RawMessage, bool, error) {
	raw, ok := o.Get(name)
	if !ok {
		return nil, false, nil
	}
	if len(raw) == 0 || raw[0] != '{' {
		return nil, true, o.fieldErr(name, "an object")
	}
	return bytes.Clone(raw), true, nil
}

func (o object) agentID(name string) (identity.AgentID, error) {
	s, err := o.requiredStr(name)
	if err != nil {
		return "", err
	}
	id, err := identity.ParseAgentID(s)
	if err != nil {
		return "", invalid("bad_agent_id", "%s field %q is not a valid Agent ID", o.what, name)
	}
	return id, nil
}

func (o object) role(name string, required bool) (adp.Role, bool, error) {
	s, ok, err := o.str(name)
	if err != nil {
		return "", ok, err
	}
	if !ok {
		if required {
			return "", false, invalid("missing_field", "%s requires %q", o.what, name)
		}
		return "", false, nil
	}
	r := adp.Role(s)
	if !r.Valid() {
		return "", true, invalid("bad_role", "%s field %q must be moderator, speaker or observer", o.what, name)
	}
	return r, true, nil
}

// references returns payload.references: base64url SHA3-256 hashes.
func (o object) references() ([]string, error) {
	refs, _, err := o.strs("references")
	if err != nil {
		return nil, err
	}
	for _, r := range refs {
		if _, err := identity.DecodeB64Len(r, 32); err != nil {
			return nil, invalid("bad_reference", "%s reference %q is not an event hash", o.what, r)
		}
	}
	return refs, nil
}

// validContentType reports whether ct is a MIME type the host accepts for
// message content: any syntactically valid type/subtype (host policy).
func validContentType(ct string) bool {
	if strings.TrimSpace(ct) == "" || len(ct) > 255 {
		return false
	}
	mt, _, _ := strings.Cut(ct, ";")
	typ, sub, ok := strings.Cut(strings.TrimSpace(mt), "/")
	return ok && isToken(typ) && isToken(sub)
}

// isToken reports whether s is an RFC 2045 token.
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte(`()<>@,;:\"/[]?=`, c) >= 0 {
			return false
		}
	}
	return true
}

// reason checks the optional payload.reason: free text, a string when
// present.
func (o object) reason() error {
	_, _, err := o.str("reason")
	return err
}

// extra returns the optional payload.extra, which must be an object when
// present (nil when absent).
func (o object) extra() (json.RawMessage, error) {
	raw, _, err := o.obj("extra")
	return raw, err
}
