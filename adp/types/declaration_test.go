package types

import (
	"bytes"
	"errors"
	"slices"
	"testing"

	"github.com/adpnode/adpnode/adp"
)

// packSource serves external packs from memory and counts fetches.
type packSource struct {
	docs  map[string][]byte
	calls int
}

func (s *packSource) ExternalPack(uri, digest string) ([]byte, error) {
	s.calls++
	if b, ok := s.docs[uri]; ok {
		return b, nil
	}
	return nil, errors.New("connection refused")
}

func names(defs []*Definition) []string {
	var out []string
	for _, d := range defs {
		out = append(out, d.Type)
	}
	return out
}

func TestParseDeclarationInline(t *testing.T) {
	defs, imp, err := ParseDeclaration(js(baseDef()), nil, DefaultLimits())
	wantCode(t, err, "", "")
	if imp != nil || len(defs) != 1 || defs[0].Type != "review.finding" || defs[0].Pack != "" {
		t.Fatalf("§13.4 inline declaration: %v %v", names(defs), imp)
	}
	_, _, err = ParseDeclaration(js(with("kind", "bogus")), nil, DefaultLimits())
	wantCode(t, err, adp.CodeInvalidEvent, ReasonBadField)
}

func TestParseDeclarationUse(t *testing.T) {
	bad := adp.CodeInvalidEvent
	cases := []struct {
		name   string
		decl   string
		code   adp.Code
		reason string
		types  []string
	}{
		{"§13.5 use whole pack", `{"use":"adp:deliberation/1.0"}`, "", "", []string{"question.create", "proposal.create", "poll.create", "poll.vote"}},
		{"§13.5 use subset keeps pack order", `{"use":"adp:deliberation/1.0","types":["poll.vote","poll.create"]}`, "", "", []string{"poll.create", "poll.vote"}},
		{"§13.5 subset names an unknown type", `{"use":"adp:deliberation/1.0","types":["poll.close"]}`, bad, ReasonUnknownPackType, nil},
		{"§13.5 subset names a type of another pack", `{"use":"adp:deliberation/1.0","types":["reaction.create"]}`, bad, ReasonUnknownPackType, nil},
		{"§13.5 subset repeats a type", `{"use":"adp:deliberation/1.0","types":["poll.vote","poll.vote"]}`, bad, ReasonBadField, nil},
		{"§13.5 subset empty", `{"use":"adp:deliberation/1.0","types":[]}`, bad, ReasonBadField, nil},
		{"§13.5 subset not strings", `{"use":"adp:deliberation/1.0","types":[1]}`, bad, ReasonBadField, nil},
		{"§13.5 unknown registered pack", `{"use":"adp:unknown/1.0"}`, adp.CodePackUnavailable, ReasonUnknownPack, nil},
		{"§13.5 use not a string", `{"use":1}`, bad, ReasonBadField, nil},
		{"§13.5 unknown import member", `{"use":"adp:reactions/1.0","digest":"sha256:x"}`, bad, ReasonUnknownField, nil},
		{"§13.4 use together with type", `{"use":"adp:reactions/1.0","type":"a.b"}`, bad, ReasonAmbiguousDecl, nil},
		{"§13.4 use together with pack", `{"use":"adp:reactions/1.0","pack":"https://example.com/p"}`, bad, ReasonAmbiguousDecl, nil},
		{"§13.4 empty declaration", `{}`, bad, ReasonMissingField, nil},
		{"§13.4 declaration not an object", `"adp:reactions/1.0"`, bad, ReasonNotObject, nil},
		{"§13.5 override roles", `{"use":"adp:deliberation/1.0","overrides":{"poll.vote":{"roles":["moderator","speaker","observer"]}}}`, "", "", []string{"question.create", "proposal.create", "poll.create", "poll.vote"}},
		{"§13.5 override every allowed field", `{"use":"adp:moderation/1.0","overrides":{"turn.update":{"roles":["moderator","speaker"],"instructions":"Claim tasks.","status":"deprecated","rate_hint":2,"max_payload_hint":4096}}}`, "", "", []string{"turn.update", "steer.create"}},
		{"§13.5 empty override", `{"use":"adp:reactions/1.0","overrides":{"reaction.create":{}}}`, "", "", []string{"reaction.create"}},
		{"§13.5 override kind rejected", `{"use":"adp:deliberation/1.0","overrides":{"poll.vote":{"kind":"message"}}}`, bad, ReasonOverrideField, nil},
		{"§13.5 override schema rejected", `{"use":"adp:deliberation/1.0","overrides":{"poll.vote":{"schema":{}}}}`, bad, ReasonOverrideField, nil},
		{"§13.5 override title rejected", `{"use":"adp:deliberation/1.0","overrides":{"poll.vote":{"title":"Vote"}}}`, bad, ReasonOverrideField, nil},
		{"§13.5 override of a type outside the subset", `{"use":"adp:deliberation/1.0","types":["poll.create"],"overrides":{"poll.vote":{"roles":["observer"]}}}`, bad, ReasonOverrideType, nil},
		{"§13.5 override of a type not in the pack", `{"use":"adp:reactions/1.0","overrides":{"poll.vote":{"roles":["observer"]}}}`, bad, ReasonOverrideType, nil},
		{"§13.5 override invalid role", `{"use":"adp:reactions/1.0","overrides":{"reaction.create":{"roles":["admin"]}}}`, bad, ReasonBadField, nil},
		{"§13.5 override invalid status", `{"use":"adp:reactions/1.0","overrides":{"reaction.create":{"status":"gone"}}}`, bad, ReasonBadField, nil},
		{"§13.5 override invalid rate_hint", `{"use":"adp:reactions/1.0","overrides":{"reaction.create":{"rate_hint":0}}}`, bad, ReasonBadField, nil},
		{"§13.5 override value not an object", `{"use":"adp:reactions/1.0","overrides":{"reaction.create":"x"}}`, bad, ReasonNotObject, nil},
		{"§13.5 overrides not an object", `{"use":"adp:reactions/1.0","overrides":[]}`, bad, ReasonNotObject, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			defs, imp, err := ParseDeclaration([]byte(c.decl), nil, DefaultLimits())
			wantCode(t, err, c.code, c.reason)
			if c.code != "" {
				return
			}
			if !slices.Equal(names(defs), c.types) {
				t.Fatalf("types %v want %v", names(defs), c.types)
			}
			if imp == nil || imp.Digest != "" || imp.Pack != defs[0].Pack || len(imp.Raw) == 0 {
				t.Fatalf("import %+v", imp)
			}
			p := mustPack(t, imp.Pack)
			if !bytes.Equal(imp.Raw, p.Raw) {
				t.Fatal("import raw is not the pack document")
			}
		})
	}

	t.Run("§13.5 overrides applied, pack definition untouched", func(t *testing.T) {
		defs, _, err := ParseDeclaration([]byte(`{"use":"adp:moderation/1.0","overrides":{"turn.update":{"roles":["moderator","speaker"],"instructions":"Claim tasks.","status":"deprecated","rate_hint":2,"max_payload_hint":4096}}}`), nil, DefaultLimits())
		if err != nil {
			t.Fatal(err)
		}
		d := defs[0]
		orig := mustType(t, "turn.update")
		if !d.RoleAllowed(adp.RoleSpeaker) || d.Instructions != "Claim tasks." || d.Status != StatusDeprecated || d.RateHint != 2 || d.MaxPayloadHint != 4096 {
			t.Fatalf("override not applied: %+v", d)
		}
		if d.Kind != orig.Kind || !bytes.Equal(d.Schema, orig.Schema) || d.Pack != "adp:moderation/1.0" {
			t.Fatal("override changed kind, schema or pack")
		}
		if orig.RoleAllowed(adp.RoleSpeaker) || orig.Status != StatusActive {
			t.Fatal("registered definition mutated")
		}
		if defs[1] != mustType(t, "steer.create") {
			t.Fatal("non-overridden definitions should be shared")
		}
		wantCode(t, d.ValidatePayload([]byte(`{"turn_id":1,"speaker":"`+agentID+`"}`)), "", "")
	})
}

func TestParseDeclarationExternal(t *testing.T) {
	raw := []byte(triagePack)
	uri := "https://example.com/packs/triage-1.0.json"
	src := &packSource{docs: map[string][]byte{uri: raw}}
	decl := func(extra string) []byte {
		return []byte(`{"pack":"` + uri + `","digest":"` + sha256Digest(raw) + `"` + extra + `}`)
	}
	bad := adp.CodeInvalidEvent
	cases := []struct {
		name   string
		decl   []byte
		src    PackSource
		code   adp.Code
		reason string
		types  []string
	}{
		{"§13.5 external pack", decl(""), src, "", "", []string{"triage.label", "triage.assign"}},
		{"§13.5 external subset and override", decl(`,"types":["triage.assign"],"overrides":{"triage.assign":{"roles":["moderator"]}}`), src, "", "", []string{"triage.assign"}},
		{"§13.5 external override of schema", decl(`,"overrides":{"triage.assign":{"schema":{}}}`), src, bad, ReasonOverrideField, nil},
		{"§13.5 external subset unknown type", decl(`,"types":["triage.close"]`), src, bad, ReasonUnknownPackType, nil},
		{"§13.5 digest mismatch", []byte(`{"pack":"` + uri + `","digest":"` + sha256Digest([]byte("other")) + `"}`), src, adp.CodePackUnavailable, ReasonDigestMismatch, nil},
		{"§13.5 unresolvable pack", []byte(`{"pack":"https://example.com/missing.json","digest":"` + sha256Digest(raw) + `"}`), src, adp.CodePackUnavailable, ReasonPackFetch, nil},
		{"§13.5 no pack source", decl(""), nil, adp.CodePackUnavailable, ReasonPackFetch, nil},
		{"§13.5 malformed digest", []byte(`{"pack":"` + uri + `","digest":"sha1:abc"}`), src, adp.CodePackUnavailable, ReasonBadDigest, nil},
		{"§13.5 missing digest", []byte(`{"pack":"` + uri + `"}`), src, bad, ReasonMissingField, nil},
		{"§13.5 digest not a string", []byte(`{"pack":"` + uri + `","digest":5}`), src, bad, ReasonBadField, nil},
		{"§13.5 relative pack URI", []byte(`{"pack":"packs/triage.json","digest":"` + sha256Digest(raw) + `"}`), src, bad, ReasonBadField, nil},
		{"§13.5 unknown member", decl(`,"use":"adp:reactions/1.0"`), src, bad, ReasonAmbiguousDecl, nil},
		{"§13.5 unknown member on external import", decl(`,"color":"red"`), src, bad, ReasonUnknownField, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			defs, imp, err := ParseDeclaration(c.decl, c.src, DefaultLimits())
			wantCode(t, err, c.code, c.reason)
			if c.code != "" {
				return
			}
			if !slices.Equal(names(defs), c.types) {
				t.Fatalf("types %v", names(defs))
			}
			if imp.Pack != uri || imp.Digest != sha256Digest(raw) || !bytes.Equal(imp.Raw, raw) {
				t.Fatalf("import %+v", imp)
			}
			for _, d := range defs {
				if d.Pack != uri {
					t.Fatalf("definition pack %q", d.Pack)
				}
			}
		})
	}
	t.Run("§13.5 malformed digest is not fetched", func(t *testing.T) {
		s := &packSource{docs: src.docs}
		ParseDeclaration([]byte(`{"pack":"`+uri+`","digest":"sha256:!!"}`), s, DefaultLimits())
		if s.calls != 0 {
			t.Fatal("fetched despite a malformed digest")
		}
	})
	t.Run("§13.5 invalid external content is invalid_event", func(t *testing.T) {
		doc := []byte(`{"id":"x","title":"X","types":[{"type":"room.x","kind":"signal","title":"T","schema":{}}]}`)
		s := &packSource{docs: map[string][]byte{uri: doc}}
		_, _, err := ParseDeclaration([]byte(`{"pack":"`+uri+`","digest":"`+sha256Digest(doc)+`"}`), s, DefaultLimits())
		wantCode(t, err, bad, ReasonReservedPrefix)
	})
}
