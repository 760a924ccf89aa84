package types

import (
	"encoding/json"
	"fmt"
	"net/url"

	"github.com/adpnode/adpnode/adp"
)

// PackSource supplies external pack documents (§13.5).
type PackSource interface {
	// ExternalPack returns the raw bytes of the external pack document at uri,
	// pinned by digest. The host fetches it (with digest check and caching);
	// offline verification serves it from the archive.
	ExternalPack(uri, digest string) ([]byte, error)
}

// Import is one pack document used by a declaration, for the archive.
type Import struct {
	Pack   string          // registered id or external URI
	Digest string          // "" for registered packs
	Raw    json.RawMessage // registered: the compact pack object; external: the exact fetched bytes
}

var (
	useFields  = set("use", "types", "overrides")
	packRefs   = set("pack", "digest", "types", "overrides")
	overrideOK = set("roles", "instructions", "status", "rate_hint", "max_payload_hint")
)

// ParseDeclaration parses one type declaration (§13.4, §13.5): one entry of
// room.create.payload.types or one type.define payload. It is an inline
// definition (has "type"), a registered pack import {"use", "types"?,
// "overrides"?} or an external pack import {"pack", "digest", "types"?,
// "overrides"?}. It returns the materialized definitions in pack order, and
// for imports the pack document used (nil for inline definitions).
//
// Errors: malformed declarations, unknown subset types and invalid overrides
// are invalid_event; an unknown registered pack id, a failing PackSource, a
// bad digest or a digest mismatch are pack_unavailable.
func ParseDeclaration(raw []byte, src PackSource, lim Limits) ([]*Definition, *Import, error) {
	lim = lim.norm()
	members, err := objectMembers(raw, "type declaration")
	if err != nil {
		return nil, nil, err
	}
	m := map[string]json.RawMessage{}
	for _, x := range members {
		m[x.Key] = x.Value
	}
	_, hasType := m["type"]
	_, hasUse := m["use"]
	_, hasPack := m["pack"]
	switch {
	case hasType && !hasUse && !hasPack:
		d, err := ParseDefinition(raw, lim)
		if err != nil {
			return nil, nil, err
		}
		return []*Definition{d}, nil, nil
	case hasUse && !hasType && !hasPack:
		return parseUse(members, m)
	case hasPack && !hasType && !hasUse:
		return parseExternal(members, m, src, lim)
	case !hasType && !hasUse && !hasPack:
		return nil, nil, invalid(ReasonMissingField, "", `type declaration needs "type", "use" or "pack"`)
	default:
		return nil, nil, invalid(ReasonAmbiguousDecl, "", `type declaration must have exactly one of "type", "use" and "pack"`)
	}
}

func parseUse(members []member, m map[string]json.RawMessage) ([]*Definition, *Import, error) {
	for _, x := range members {
		if !useFields[x.Key] {
			return nil, nil, invalid(ReasonUnknownField, x.Key, "unknown pack import member "+quote(x.Key))
		}
	}
	id, err := jsonString(m["use"], "use")
	if err != nil {
		return nil, nil, err
	}
	p, ok := RegisteredPack(id)
	if !ok {
		e := unavailable(ReasonUnknownPack, "unknown registered pack "+quote(id))
		e.Data["pack"] = id
		return nil, nil, e
	}
	defs, err := importPack(p, m)
	if err != nil {
		return nil, nil, err
	}
	return defs, &Import{Pack: p.ID, Raw: p.Raw}, nil
}

func parseExternal(members []member, m map[string]json.RawMessage, src PackSource, lim Limits) ([]*Definition, *Import, error) {
	for _, x := range members {
		if !packRefs[x.Key] {
			return nil, nil, invalid(ReasonUnknownField, x.Key, "unknown pack import member "+quote(x.Key))
		}
	}
	uri, err := jsonString(m["pack"], "pack")
	if err != nil {
		return nil, nil, err
	}
	if u, err := url.Parse(uri); err != nil || !u.IsAbs() || u.Host == "" && u.Opaque == "" {
		return nil, nil, invalid(ReasonBadField, "pack", "pack must be an absolute URI")
	}
	dv, ok := m["digest"]
	if !ok {
		return nil, nil, invalid(ReasonMissingField, "digest", "external pack import lacks digest")
	}
	digest, err := jsonString(dv, "digest")
	if err != nil {
		return nil, nil, err
	}
	if _, _, err := parseDigest(digest); err != nil {
		return nil, nil, err
	}
	if src == nil {
		return nil, nil, unavailable(ReasonPackFetch, "external packs are not available here")
	}
	raw, err := src.ExternalPack(uri, digest)
	if err != nil {
		e := unavailable(ReasonPackFetch, "external pack "+quote(uri)+" unavailable: "+truncate(err.Error()))
		e.Data["pack"] = uri
		return nil, nil, e
	}
	p, err := ParseExternalPack(uri, digest, raw, lim)
	if err != nil {
		if ae, ok := err.(*adp.Error); ok && ae.Code == adp.CodePackUnavailable {
			return nil, nil, ae.WithData("pack", uri)
		}
		return nil, nil, withField(err, "pack")
	}
	defs, err := importPack(p, m)
	if err != nil {
		return nil, nil, err
	}
	return defs, &Import{Pack: uri, Digest: digest, Raw: json.RawMessage(raw)}, nil
}

// importPack applies the optional "types" subset and "overrides" of a pack
// import to p's definitions.
func importPack(p *Pack, m map[string]json.RawMessage) ([]*Definition, error) {
	selected := map[string]bool{}
	if tv, ok := m["types"]; ok {
		names, err := jsonStrings(tv, "types")
		if err != nil {
			return nil, err
		}
		if len(names) == 0 {
			return nil, invalid(ReasonBadField, "types", "types subset must not be empty")
		}
		for _, n := range names {
			if selected[n] {
				return nil, invalid(ReasonBadField, "types", "types subset repeats "+quote(n))
			}
			if _, ok := p.Type(n); !ok {
				return nil, invalid(ReasonUnknownPackType, "types", "pack "+quote(p.ID)+" has no type "+quote(n))
			}
			selected[n] = true
		}
	} else {
		for _, d := range p.Types {
			selected[d.Type] = true
		}
	}
	overrides := map[string][]member{}
	if ov, ok := m["overrides"]; ok {
		entries, err := objectMembers(ov, "overrides")
		if err != nil {
			return nil, withField(err, "overrides")
		}
		for _, e := range entries {
			if !selected[e.Key] {
				return nil, invalid(ReasonOverrideType, "overrides", "override of "+quote(e.Key)+", which this declaration does not import")
			}
			fields, err := objectMembers(e.Value, "override")
			if err != nil {
				return nil, withField(err, "overrides."+e.Key)
			}
			for _, f := range fields {
				if !overrideOK[f.Key] {
					return nil, invalid(ReasonOverrideField, "overrides."+e.Key+"."+f.Key,
						"overrides may set only roles, instructions, status, rate_hint and max_payload_hint, not "+quote(f.Key))
				}
			}
			overrides[e.Key] = fields
		}
	}
	var out []*Definition
	for _, d := range p.Types {
		if !selected[d.Type] {
			continue
		}
		if fields, ok := overrides[d.Type]; ok {
			od, err := applyOverride(d, fields)
			if err != nil {
				return nil, withField(err, "overrides."+d.Type)
			}
			d = od
		}
		out = append(out, d)
	}
	return out, nil
}

// applyOverride returns a copy of d with the overridden fields set. The
// compiled schema is shared.
func applyOverride(d *Definition, fields []member) (*Definition, error) {
	c := *d
	var err error
	for _, f := range fields {
		switch f.Key {
		case "roles":
			c.Roles, err = parseRoles(f.Value)
		case "instructions":
			c.Instructions, err = jsonString(f.Value, "instructions")
		case "status":
			c.Status, err = parseStatus(f.Value)
		case "rate_hint":
			c.RateHint, err = positiveInt(f.Value, "rate_hint")
		case "max_payload_hint":
			c.MaxPayloadHint, err = positiveInt(f.Value, "max_payload_hint")
		default:
			err = fmt.Errorf("unreachable override %q", f.Key)
		}
		if err != nil {
			return nil, err
		}
	}
	return &c, nil
}
