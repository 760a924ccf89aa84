package types

import (
	"bytes"
	"encoding/json"
	"slices"
	"sync"

	"github.com/gowebpki/jcs"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/adpnode/adpnode/adp"
)

// Limits are the type-system limits of ADP §21 (DECISIONS 9). A zero or
// negative field means its default.
type Limits struct {
	MaxSchemaBytes int // default 16384, measured on the JCS-serialized schema
	MaxTypes       int // default 64 distinct types per room
}

// Default limits (ADP §21).
const (
	DefaultMaxSchemaBytes = 16 * 1024
	DefaultMaxTypes       = 64
)

// DefaultLimits returns the §21 defaults.
func DefaultLimits() Limits {
	return Limits{MaxSchemaBytes: DefaultMaxSchemaBytes, MaxTypes: DefaultMaxTypes}
}

// norm replaces non-positive limits with the defaults.
func (l Limits) norm() Limits {
	if l.MaxSchemaBytes <= 0 {
		l.MaxSchemaBytes = DefaultMaxSchemaBytes
	}
	if l.MaxTypes <= 0 {
		l.MaxTypes = DefaultMaxTypes
	}
	return l
}

// Type definition status values (§13.3).
const (
	StatusActive     = "active"
	StatusDeprecated = "deprecated"
	StatusDisabled   = "disabled"
)

func validStatus(s string) bool {
	return s == StatusActive || s == StatusDeprecated || s == StatusDisabled
}

// Definition is one materialized type definition (§13.3). It is immutable
// once built and may be shared.
type Definition struct {
	Type           string
	Kind           adp.Kind
	Title          string
	Description    string          // "" = absent
	Schema         json.RawMessage // canonical JCS bytes of the schema object
	Roles          []adp.Role      // nil = kind default; non-nil empty = no role (creator only)
	Instructions   string          // "" = absent
	Version        string          // "" = absent
	Status         string          // "active" (default when absent), "deprecated", "disabled"
	RateHint       int64           // 0 = absent
	MaxPayloadHint int64           // 0 = absent
	Extra          json.RawMessage // canonical JCS bytes; nil = absent
	Pack           string          // "" for inline; pack id (registered) or pack URI (external) it came from

	compiled *jsonschema.Schema
	lazy     *lazySchema // set instead of compiled for restored definitions
}

// lazySchema compiles a restored definition's schema on first use, so that
// restoring many rooms' registries costs no schema compilation up front.
type lazySchema struct {
	once  sync.Once
	canon []byte
	sch   *jsonschema.Schema
	err   error
}

func (l *lazySchema) get() (*jsonschema.Schema, error) {
	l.once.Do(func() { l.sch, l.err = compileSchema(l.canon) })
	return l.sch, l.err
}

// built reports whether d came from this package (parsed or restored).
func (d *Definition) built() bool { return d != nil && (d.compiled != nil || d.lazy != nil) }

// AllowedRoles returns the roles that may send the type: Roles, or the kind
// default (§13.1) when Roles is nil. The result is a fresh slice.
func (d *Definition) AllowedRoles() []adp.Role {
	if d.Roles != nil {
		return slices.Clone(d.Roles)
	}
	return d.Kind.DefaultRoles()
}

// RoleAllowed reports whether role r may send the type (§13.6 step 3). The
// creator's bypass is the caller's business.
func (d *Definition) RoleAllowed(r adp.Role) bool {
	if d.Roles != nil {
		return slices.Contains(d.Roles, r)
	}
	return slices.Contains(d.Kind.DefaultRoles(), r)
}

// Usable reports whether events of the type may be sent (status active or
// deprecated, §13.6 step 2).
func (d *Definition) Usable() bool { return d.Status != StatusDisabled }

// ValidatePayload validates payload (the JSON bytes of event.payload) against
// the definition's schema (§13.6 step 4). On failure it returns
// payload_schema_violation with data.errors: up to 10 {"path","message"}
// entries, path being a JSON Pointer into the payload.
func (d *Definition) ValidatePayload(payload []byte) error {
	sch := d.compiled
	if sch == nil && d.lazy != nil {
		var err error
		if sch, err = d.lazy.get(); err != nil {
			return adp.Errorf(adp.CodeInternal, "type %s: stored schema does not compile: %v", d.Type, err)
		}
	}
	if sch == nil {
		return adp.Errorf(adp.CodeInternal, "type %s has no compiled schema", d.Type)
	}
	return validatePayload(sch, payload)
}

// definitionJSON is the wire form of a definition, in the member order of
// the registered packs file.
type definitionJSON struct {
	Type           string          `json:"type"`
	Kind           adp.Kind        `json:"kind"`
	Title          string          `json:"title"`
	Description    string          `json:"description,omitempty"`
	Version        string          `json:"version,omitempty"`
	Status         string          `json:"status"`
	Roles          *[]adp.Role     `json:"roles,omitempty"` // pointer: an explicit [] is kept
	RateHint       int64           `json:"rate_hint,omitempty"`
	MaxPayloadHint int64           `json:"max_payload_hint,omitempty"`
	Schema         json.RawMessage `json:"schema"`
	Instructions   string          `json:"instructions,omitempty"`
	Extra          json.RawMessage `json:"extra,omitempty"`
	Pack           string          `json:"pack,omitempty"`
}

// MarshalJSON encodes the definition object of §13.3 as listed in the room
// resource: absent fields are omitted, "status" is always present, and
// "pack" names the pack the definition was imported from, if any.
func (d *Definition) MarshalJSON() ([]byte, error) {
	status := d.Status
	if status == "" {
		status = StatusActive
	}
	w := definitionJSON{
		Type: d.Type, Kind: d.Kind, Title: d.Title, Description: d.Description, Version: d.Version,
		Status: status, RateHint: d.RateHint, MaxPayloadHint: d.MaxPayloadHint, Schema: d.Schema,
		Instructions: d.Instructions, Extra: d.Extra, Pack: d.Pack,
	}
	if w.Schema == nil {
		w.Schema = json.RawMessage("{}")
	}
	if d.Roles != nil {
		w.Roles = &d.Roles
	}
	return json.Marshal(w)
}

// definitionFields are the members of a definition object (§13.3).
var definitionFields = set("type", "kind", "title", "description", "schema", "roles", "instructions",
	"version", "status", "rate_hint", "max_payload_hint", "extra")

// ParseDefinition parses and validates one inline type definition object
// (§13.3) and compiles its schema. Every failure is invalid_event with
// data.reason (and data.field where it applies).
func ParseDefinition(raw []byte, lim Limits) (*Definition, error) {
	return parseDefinition(raw, lim, true)
}

// RestoreDefinition rebuilds a definition from its MarshalJSON form (as a
// room-state snapshot stores it). The schema is the one that compiled when
// the definition was first accepted: definitions imported from a registered
// pack share that pack's compiled schema, others compile on first use.
func RestoreDefinition(raw []byte) (*Definition, error) {
	members, err := objectMembers(raw, "stored type definition")
	if err != nil {
		return nil, err
	}
	var pack string
	kept := members[:0]
	for _, m := range members {
		if m.Key == "pack" {
			if pack, err = jsonString(m.Value, "pack"); err != nil {
				return nil, err
			}
			continue
		}
		kept = append(kept, m)
	}
	d, err := parseDefinition(encodeMembers(kept), Limits{MaxSchemaBytes: 1 << 30, MaxTypes: 1 << 30}, false)
	if err != nil {
		return nil, err
	}
	d.Pack = pack
	if p, ok := RegisteredPack(pack); ok {
		if r, ok := p.Type(d.Type); ok && bytes.Equal(r.Schema, d.Schema) && r.compiled != nil {
			d.compiled = r.compiled
			return d, nil
		}
	}
	d.lazy = &lazySchema{canon: d.Schema}
	return d, nil
}

func parseDefinition(raw []byte, lim Limits, compile bool) (*Definition, error) {
	lim = lim.norm()
	members, err := objectMembers(raw, "type definition")
	if err != nil {
		return nil, err
	}
	d := &Definition{}
	var schemaRaw json.RawMessage
	have := map[string]bool{}
	for _, m := range members {
		if !definitionFields[m.Key] {
			return nil, invalid(ReasonUnknownField, m.Key, "unknown type definition member "+quote(m.Key))
		}
		have[m.Key] = true
		switch m.Key {
		case "type":
			if d.Type, err = jsonString(m.Value, "type"); err != nil {
				return nil, err
			}
		case "kind":
			s, err := jsonString(m.Value, "kind")
			if err != nil {
				return nil, err
			}
			if !adp.Kind(s).Valid() {
				return nil, invalid(ReasonBadField, "kind", "kind must be message, signal or control")
			}
			d.Kind = adp.Kind(s)
		case "title":
			if d.Title, err = jsonString(m.Value, "title"); err != nil {
				return nil, err
			}
			if d.Title == "" {
				return nil, invalid(ReasonBadField, "title", "title must not be empty")
			}
		case "description":
			if d.Description, err = jsonString(m.Value, "description"); err != nil {
				return nil, err
			}
		case "schema":
			schemaRaw = m.Value
		case "roles":
			if d.Roles, err = parseRoles(m.Value); err != nil {
				return nil, err
			}
		case "instructions":
			if d.Instructions, err = jsonString(m.Value, "instructions"); err != nil {
				return nil, err
			}
		case "version":
			if d.Version, err = jsonString(m.Value, "version"); err != nil {
				return nil, err
			}
		case "status":
			if d.Status, err = parseStatus(m.Value); err != nil {
				return nil, err
			}
		case "rate_hint":
			if d.RateHint, err = positiveInt(m.Value, "rate_hint"); err != nil {
				return nil, err
			}
		case "max_payload_hint":
			if d.MaxPayloadHint, err = positiveInt(m.Value, "max_payload_hint"); err != nil {
				return nil, err
			}
		case "extra":
			c, err := jcs.Transform(m.Value)
			if err != nil {
				return nil, invalid(ReasonBadField, "extra", "extra is not canonicalizable JSON")
			}
			d.Extra = c
		}
	}
	for _, f := range []string{"type", "kind", "title", "schema"} {
		if !have[f] {
			return nil, invalid(ReasonMissingField, f, "type definition lacks "+quote(f))
		}
	}
	if err := ValidTypeName(d.Type); err != nil {
		return nil, err
	}
	if d.Status == "" {
		d.Status = StatusActive
	}
	canon, err := canonicalSchema(schemaRaw, lim)
	if err != nil {
		return nil, err
	}
	d.Schema = canon
	if !compile {
		return d, nil
	}
	if d.compiled, err = compileSchema(canon); err != nil {
		return nil, err
	}
	return d, nil
}

func parseRoles(v json.RawMessage) ([]adp.Role, error) {
	ss, err := jsonStrings(v, "roles")
	if err != nil {
		return nil, err
	}
	roles := make([]adp.Role, 0, len(ss))
	for _, s := range ss {
		r := adp.Role(s)
		if !r.Valid() {
			return nil, invalid(ReasonBadField, "roles", "unknown role "+quote(s))
		}
		if slices.Contains(roles, r) {
			return nil, invalid(ReasonBadField, "roles", "duplicate role "+quote(s))
		}
		roles = append(roles, r)
	}
	return roles, nil
}

func parseStatus(v json.RawMessage) (string, error) {
	s, err := jsonString(v, "status")
	if err != nil {
		return "", err
	}
	if !validStatus(s) {
		return "", invalid(ReasonBadField, "status", "status must be active, deprecated or disabled")
	}
	return s, nil
}
