package types

import (
	"encoding/json"
	"fmt"
	"maps"
	"strings"
	"testing"

	"github.com/adpnode/adpnode/adp"
)

// baseDef is the §13.4 example inline definition.
func baseDef() map[string]any {
	return map[string]any{
		"type":  "review.finding",
		"kind":  "message",
		"title": "Review finding",
		"schema": map[string]any{
			"type":     "object",
			"required": []any{"severity", "summary"},
			"properties": map[string]any{
				"severity":      map[string]any{"type": "string", "enum": []any{"low", "medium", "high"}},
				"summary":       map[string]any{"type": "string", "minLength": 1},
				"suggested_fix": map[string]any{"type": "string"},
			},
			"additionalProperties": false,
		},
	}
}

func with(kv ...any) map[string]any {
	d := baseDef()
	for i := 0; i < len(kv); i += 2 {
		k := kv[i].(string)
		if kv[i+1] == nil {
			delete(d, k)
		} else {
			d[k] = kv[i+1]
		}
	}
	return d
}

func js(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

func rawJSON(s string) json.RawMessage { return json.RawMessage(s) }

func schemaDef(schema string) []byte { return js(with("schema", rawJSON(schema))) }

func TestParseDefinitionFields(t *testing.T) {
	bad := adp.CodeInvalidEvent
	cases := []struct {
		name   string
		raw    []byte
		code   adp.Code
		reason string
	}{
		{"§13.3 minimal definition", js(baseDef()), "", ""},
		{"§13.3 every optional field", js(with("description", "d", "roles", []string{"moderator"}, "instructions", "i",
			"version", "1.0", "status", "deprecated", "rate_hint", 5, "max_payload_hint", 1024, "extra", map[string]any{"a": 1})), "", ""},
		{"§13.3 not an object", []byte(`["type"]`), bad, ReasonNotObject},
		{"§13.3 not JSON", []byte(`{"type":`), bad, ReasonBadJSON},
		{"§13.3 trailing data", []byte(string(js(baseDef())) + `{}`), bad, ReasonBadJSON},
		{"§13.3 duplicate member", []byte(`{"type":"a.b","type":"a.c","kind":"message","title":"t","schema":{}}`), bad, ReasonBadJSON},
		{"§13.3 unknown member", js(with("color", "red")), bad, ReasonUnknownField},
		{"§13.3 pack member is not a definition field", js(with("pack", "adp:reactions/1.0")), bad, ReasonUnknownField},
		{"§13.3 missing type", js(with("type", nil)), bad, ReasonMissingField},
		{"§13.3 missing kind", js(with("kind", nil)), bad, ReasonMissingField},
		{"§13.3 missing title", js(with("title", nil)), bad, ReasonMissingField},
		{"§13.3 missing schema", js(with("schema", nil)), bad, ReasonMissingField},
		{"§13.3 type not a string", js(with("type", 5)), bad, ReasonBadField},
		{"§13.3 reserved prefix room.", js(with("type", "room.steer")), bad, ReasonReservedPrefix},
		{"§13.3 reserved prefix type.", js(with("type", "type.x")), bad, ReasonReservedPrefix},
		{"§13.3 built-in name", js(with("type", "message.create")), bad, ReasonBuiltinType},
		{"§13.3 bad name", js(with("type", "Review")), bad, ReasonBadTypeName},
		{"§13.1 kind unknown", js(with("kind", "lifecycle")), bad, ReasonBadField},
		{"§13.1 kind not a string", js(with("kind", true)), bad, ReasonBadField},
		{"§13.3 title empty", js(with("title", "")), bad, ReasonBadField},
		{"§13.3 title not a string", js(with("title", 1)), bad, ReasonBadField},
		{"§13.3 title null", js(with("title", rawJSON("null"))), bad, ReasonBadField},
		{"§13.3 description not a string", js(with("description", []string{"x"})), bad, ReasonBadField},
		{"§13.3 instructions not a string", js(with("instructions", 3)), bad, ReasonBadField},
		{"§13.3 version not a string", js(with("version", 1.0)), bad, ReasonBadField},
		{"§13.3 schema not an object", js(with("schema", true)), bad, ReasonBadField},
		{"§13.3 schema array", js(with("schema", []any{})), bad, ReasonBadField},
		{"§13.3 roles not an array", js(with("roles", "moderator")), bad, ReasonBadField},
		{"§13.3 roles unknown role", js(with("roles", []string{"moderator", "admin"})), bad, ReasonBadField},
		{"§13.3 roles duplicate", js(with("roles", []string{"speaker", "speaker"})), bad, ReasonBadField},
		{"§13.3 roles non-string", js(with("roles", []any{1})), bad, ReasonBadField},
		{"§13.3 roles empty is allowed", js(with("roles", []string{})), "", ""},
		{"§13.3 status unknown", js(with("status", "retired")), bad, ReasonBadField},
		{"§13.3 status not a string", js(with("status", 1)), bad, ReasonBadField},
		{"§13.3 status disabled", js(with("status", "disabled")), "", ""},
		{"§13.3 rate_hint zero", js(with("rate_hint", 0)), bad, ReasonBadField},
		{"§13.3 rate_hint negative", js(with("rate_hint", -5)), bad, ReasonBadField},
		{"§13.3 rate_hint fraction", js(with("rate_hint", 1.5)), bad, ReasonBadField},
		{"§13.3 rate_hint string", js(with("rate_hint", "5")), bad, ReasonBadField},
		{"§13.3 rate_hint integral exponent", js(with("rate_hint", rawJSON("1e2"))), "", ""},
		{"§13.3 rate_hint beyond safe integer", js(with("rate_hint", rawJSON("9007199254740992"))), bad, ReasonBadField},
		{"§13.3 max_payload_hint zero", js(with("max_payload_hint", 0)), bad, ReasonBadField},
		{"§13.3 max_payload_hint bool", js(with("max_payload_hint", true)), bad, ReasonBadField},
		{"§13.3 extra any JSON", js(with("extra", []any{1, "a"})), "", ""},
		{"§13.3 invalid UTF-8", []byte("{\"type\":\"a.b\xff\",\"kind\":\"message\",\"title\":\"t\",\"schema\":{}}"), bad, ReasonBadJSON},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d, err := ParseDefinition(c.raw, DefaultLimits())
			wantCode(t, err, c.code, c.reason)
			if c.code == "" && d == nil {
				t.Fatal("nil definition")
			}
		})
	}
}

func TestParseDefinitionSchema(t *testing.T) {
	bad := adp.CodeInvalidEvent
	cases := []struct {
		name   string
		schema string
		reason string // "" = accepted
	}{
		{"§13.3 internal $ref #/$defs/x resolves", `{"$defs":{"x":{"type":"string"}},"properties":{"a":{"$ref":"#/$defs/x"}}}`, ""},
		{"§13.3 internal $ref to $anchor", `{"$defs":{"x":{"$anchor":"sev","type":"string"}},"properties":{"a":{"$ref":"#sev"}}}`, ""},
		{"§13.3 recursive internal $ref", `{"properties":{"children":{"type":"array","items":{"$ref":"#"}}}}`, ""},
		{"§13.3 $schema draft 2020-12 explicit", `{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object"}`, ""},
		{"§13.3 $id with remote base does not load", `{"$id":"https://example.com/s.json","$defs":{"x":{"type":"string"}},"properties":{"a":{"$ref":"#/$defs/x"}}}`, ""},
		{"§13.3 property named $ref is not a reference", `{"properties":{"$ref":{"type":"string"}}}`, ""},
		{"§13.3 $ref inside const is data", `{"const":{"$ref":"https://example.com/x"}}`, ""},
		{"§13.3 remote $ref", `{"properties":{"a":{"$ref":"https://example.com/schema.json"}}}`, ReasonSchemaRemoteRef},
		{"§13.3 relative $ref", `{"properties":{"a":{"$ref":"other.json#/x"}}}`, ReasonSchemaRemoteRef},
		{"§13.3 $ref to the draft metaschema", `{"$ref":"https://json-schema.org/draft/2020-12/schema"}`, ReasonSchemaRemoteRef},
		{"§13.3 remote $ref under $id", `{"$id":"https://example.com/s.json","properties":{"a":{"$ref":"other.json"}}}`, ReasonSchemaRemoteRef},
		{"§13.3 remote $dynamicRef", `{"properties":{"a":{"$dynamicRef":"https://example.com/x#m"}}}`, ReasonSchemaRemoteRef},
		{"§13.3 remote $ref in unknown keyword", `{"x-hidden":{"$ref":"https://example.com/x"},"$ref":"#/x-hidden"}`, ReasonSchemaRemoteRef},
		{"§13.3 missing internal pointer", `{"properties":{"a":{"$ref":"#/$defs/missing"}}}`, ReasonSchemaInvalid},
		{"§13.3 missing internal anchor", `{"properties":{"a":{"$ref":"#nowhere"}}}`, ReasonSchemaInvalid},
		{"§13.3 $schema draft-07", `{"$schema":"http://json-schema.org/draft-07/schema#","type":"object"}`, ReasonSchemaDraft},
		{"§13.3 $schema draft 2019-09", `{"$schema":"https://json-schema.org/draft/2019-09/schema","type":"object"}`, ReasonSchemaDraft},
		{"§13.3 $schema custom metaschema", `{"$schema":"https://example.com/meta","type":"object"}`, ReasonSchemaDraft},
		{"§13.3 nested $schema draft-07", `{"$defs":{"x":{"$id":"urn:x","$schema":"http://json-schema.org/draft-07/schema#"}}}`, ReasonSchemaDraft},
		{"§13.3 invalid against metaschema", `{"type":5}`, ReasonSchemaInvalid},
		{"§13.3 non-RE2 pattern", `{"pattern":"(?=x)"}`, ReasonSchemaInvalid},
		{"§13.3 in-place reference cycle", `{"$ref":"#"}`, ReasonSchemaTooExpensive},
		{"§13.3 exponential anyOf chain", exponentialSchema(20), ReasonSchemaTooExpensive},
		{"§13.3 exponential recursion", `{"anyOf":[{"properties":{"a":{"$ref":"#"}}},{"properties":{"a":{"$ref":"#"}}}]}`, ReasonSchemaTooExpensive},
		{"§13.3 items plus contains recursion", `{"items":{"$ref":"#"},"contains":{"$ref":"#"}}`, ReasonSchemaTooExpensive},
		{"§13.3 binary tree recursion is linear", `{"properties":{"left":{"$ref":"#"},"right":{"$ref":"#"}}}`, ""},
		{"§13.3 converging wrappers are linear", `{"properties":{"a":{"properties":{"x":{"$ref":"#"}}},"b":{"properties":{"x":{"$ref":"#"}}}}}`, ""},
		{"§13.3 dynamic reference", `{"$dynamicAnchor":"m","properties":{"c":{"$dynamicRef":"#m"}}}`, ""},
		{"§13.3 small combinator fan-out", exponentialSchema(3), ""},
		{"§13.3 duplicate key inside schema", `{"type":"object","type":"string"}`, ReasonBadField},
		{"§13.3 regexp program too large", `{"pattern":"[a-z]{300}"}`, ReasonSchemaInvalid},
		{"§13.3 regexps on one value too large", `{"allOf":[{"pattern":"^[a-z]{100}$"},{"pattern":"^[a-z]{100}$"},{"pattern":"^[a-z]{100}$"}]}`, ReasonSchemaTooExpensive},
		{"§13.3 nesting deeper than 64", strings.Repeat(`{"not":`, 70) + `{}` + strings.Repeat(`}`, 70), ReasonSchemaTooExpensive},
		{"§13.3 nesting of 64 levels", strings.Repeat(`{"properties":{"a":`, 31) + `{}` + strings.Repeat(`}}`, 31), ""},
		{"§13.3 root value may need many evaluations", allOfSchema("", 200), ""},
		{"§13.3 root value evaluations capped", allOfSchema("", 300), ReasonSchemaTooExpensive},
		{"§13.3 member value evaluations capped", `{"items":` + allOfSchema("", 20) + `}`, ReasonSchemaTooExpensive},
		{"§13.3 member value within cap", `{"items":` + allOfSchema("", 10) + `}`, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d, err := ParseDefinition(schemaDef(c.schema), DefaultLimits())
			if c.reason == "" {
				wantCode(t, err, "", "")
				if d.compiled == nil {
					t.Fatal("not compiled")
				}
				return
			}
			wantCode(t, err, bad, c.reason)
		})
	}
}

// allOfSchema returns {"allOf":[n × {"minimum":-i}]}.
func allOfSchema(_ string, n int) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = fmt.Sprintf(`{"minimum":%d}`, -i)
	}
	return `{"allOf":[` + strings.Join(parts, ",") + `]}`
}

func exponentialSchema(n int) string {
	var sb strings.Builder
	sb.WriteString(`{"$ref":"#/$defs/d0","$defs":{`)
	for i := 0; i < n; i++ {
		fmt.Fprintf(&sb, `"d%d":{"anyOf":[{"$ref":"#/$defs/d%d"},{"$ref":"#/$defs/d%d"}]},`, i, i+1, i+1)
	}
	fmt.Fprintf(&sb, `"d%d":{"type":"string"}}}`, n)
	return sb.String()
}

func TestSchemaSizeLimit(t *testing.T) {
	// A schema whose JCS form is exactly n bytes: {"description":"xxx..."}.
	sized := func(n int) string {
		return `{"description":"` + strings.Repeat("x", n-len(`{"description":""}`)) + `"}`
	}
	lim := DefaultLimits()
	t.Run("§21 schema of 16384 bytes accepted", func(t *testing.T) {
		_, err := ParseDefinition(schemaDef(sized(16384)), lim)
		wantCode(t, err, "", "")
	})
	t.Run("§21 schema of 16385 bytes rejected", func(t *testing.T) {
		_, err := ParseDefinition(schemaDef(sized(16385)), lim)
		wantCode(t, err, adp.CodeInvalidEvent, ReasonSchemaTooLarge)
		if err.(*adp.Error).Data["limit"] != "max_schema_bytes" {
			t.Fatalf("data = %v", err.(*adp.Error).Data)
		}
	})
	t.Run("§21 size measured on JCS, not on the raw bytes", func(t *testing.T) {
		raw := "{\n  \"description\" :   \"" + strings.Repeat("x", 100) + "\"\n}"
		_, err := ParseDefinition(schemaDef(raw), Limits{MaxSchemaBytes: len(`{"description":""}`) + 100})
		wantCode(t, err, "", "")
	})
	t.Run("§21 custom limit", func(t *testing.T) {
		_, err := ParseDefinition(schemaDef(sized(200)), Limits{MaxSchemaBytes: 199})
		wantCode(t, err, adp.CodeInvalidEvent, ReasonSchemaTooLarge)
	})
}

// The evaluation cost of the registered pack schemas is far below the caps.
func TestPackSchemaCost(t *testing.T) {
	for _, id := range RegisteredPackIDs() {
		for _, d := range mustPack(t, id).Types {
			c, err := schemaCost(d.compiled)
			if err != nil || c > maxEvalMember/2 {
				t.Errorf("§13.3 %s member cost %d %v", d.Type, c, err)
			}
		}
	}
}

// A worst-case accepted schema validates a 64 KiB payload in bounded time.
func TestWorstCasePayloadCost(t *testing.T) {
	if testing.Short() {
		t.Skip("slow")
	}
	d, err := ParseDefinition(schemaDef(`{"items":`+allOfSchema("", maxEvalMember-2)+`}`), DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	payload := []byte("[" + strings.Repeat("0,", 32767) + "0]")
	wantCode(t, d.ValidatePayload(payload), "", "")
	d, err = ParseDefinition(schemaDef(`{"pattern":"[a-z]{250}$"}`), DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	wantCode(t, d.ValidatePayload([]byte(`"`+strings.Repeat("ab", 32765)+`"`)), "", "")
}

// A large but ordinary schema (hundreds of properties) must be accepted and
// analysed quickly.
func TestLargeSchemaAccepted(t *testing.T) {
	props := map[string]any{}
	for i := 0; len(js(props)) < 15000; i++ {
		props[fmt.Sprintf("p%03d", i)] = map[string]any{"type": "array", "items": map[string]any{"$ref": "#/$defs/n"}}
	}
	schema := map[string]any{"$defs": map[string]any{"n": map[string]any{"properties": map[string]any{"next": map[string]any{"$ref": "#/$defs/n"}}}}, "properties": props}
	if _, err := ParseDefinition(js(with("schema", schema)), DefaultLimits()); err != nil {
		t.Fatal(err)
	}
}

func TestDefinitionJSON(t *testing.T) {
	in := with("description", "Finding.", "roles", []string{"speaker"}, "instructions", "One per event.", "version", "2",
		"rate_hint", 3, "max_payload_hint", 2048, "extra", map[string]any{"b": 2, "a": 1})
	d, err := ParseDefinition(js(in), DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(js(d), &got); err != nil {
		t.Fatal(err)
	}
	want := maps.Clone(in)
	want["status"] = "active"
	if string(js(got)) != string(js(want)) {
		t.Fatalf("§13.3 round trip\n got %s\nwant %s", js(got), js(want))
	}
	if string(d.Schema) != string(js(in["schema"])) { // json.Marshal of maps sorts keys like JCS here
		t.Fatalf("schema not canonical: %s", d.Schema)
	}
	if string(d.Extra) != `{"a":1,"b":2}` {
		t.Fatalf("extra not canonical: %s", d.Extra)
	}

	t.Run("§13.3 absent fields omitted, status always present", func(t *testing.T) {
		d, _ := ParseDefinition(js(baseDef()), DefaultLimits())
		var m map[string]any
		json.Unmarshal(js(d), &m)
		for _, k := range []string{"description", "roles", "instructions", "version", "rate_hint", "max_payload_hint", "extra", "pack"} {
			if _, ok := m[k]; ok {
				t.Errorf("%s present", k)
			}
		}
		if m["status"] != "active" {
			t.Errorf("status = %v", m["status"])
		}
	})
	t.Run("§13.3 explicit empty roles kept", func(t *testing.T) {
		d, _ := ParseDefinition(js(with("roles", []string{})), DefaultLimits())
		if !strings.Contains(string(js(d)), `"roles":[]`) {
			t.Fatalf("%s", js(d))
		}
		if d.RoleAllowed(adp.RoleModerator) || len(d.AllowedRoles()) != 0 {
			t.Fatal("empty roles must allow no role")
		}
	})
	t.Run("§13.5 pack member for imported definitions", func(t *testing.T) {
		if !strings.Contains(string(js(mustType(t, "poll.vote"))), `"pack":"adp:deliberation/1.0"`) {
			t.Fatalf("%s", js(mustType(t, "poll.vote")))
		}
	})
}

func TestRoles(t *testing.T) {
	cases := []struct {
		name  string
		kind  string
		roles []string
		want  []adp.Role
	}{
		{"§13.1 message default", "message", nil, []adp.Role{"moderator", "speaker"}},
		{"§13.1 signal default", "signal", nil, []adp.Role{"moderator", "speaker", "observer"}},
		{"§13.1 control default", "control", nil, []adp.Role{"moderator"}},
		{"§13.1 roles replace the default", "control", []string{"speaker", "observer"}, []adp.Role{"speaker", "observer"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := with("kind", c.kind)
			if c.roles != nil {
				in["roles"] = c.roles
			}
			d, err := ParseDefinition(js(in), DefaultLimits())
			if err != nil {
				t.Fatal(err)
			}
			got := d.AllowedRoles()
			if fmt.Sprint(got) != fmt.Sprint(c.want) {
				t.Fatalf("AllowedRoles = %v want %v", got, c.want)
			}
			for _, r := range []adp.Role{adp.RoleModerator, adp.RoleSpeaker, adp.RoleObserver} {
				in := false
				for _, w := range c.want {
					in = in || w == r
				}
				if d.RoleAllowed(r) != in {
					t.Errorf("RoleAllowed(%s) = %v", r, !in)
				}
			}
			got[0] = "mutated"
			if d.AllowedRoles()[0] == "mutated" {
				t.Fatal("AllowedRoles exposes internal slice")
			}
		})
	}
}
