package types

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/adpnode/adpnode/adp"
)

// FuzzParseDefinition checks that ParseDefinition never panics, returns only
// *adp.Error values, and that accepted definitions round-trip through
// MarshalJSON and validate payloads without panicking.
func FuzzParseDefinition(f *testing.F) {
	f.Add(js(baseDef()))
	f.Add(schemaDef(`{"$defs":{"n":{"properties":{"c":{"type":"array","items":{"$ref":"#/$defs/n"}}}}},"$ref":"#/$defs/n"}`))
	f.Add(schemaDef(`{"anyOf":[{"properties":{"a":{"$ref":"#"}}},{"properties":{"a":{"$ref":"#"}}}]}`))
	f.Add(schemaDef(`{"$ref":"https://example.com/x"}`))
	for _, id := range RegisteredPackIDs() {
		for _, d := range mustPack(f, id).Types {
			b, _ := json.Marshal(d)
			var m map[string]json.RawMessage
			json.Unmarshal(b, &m)
			delete(m, "pack")
			f.Add(js(m))
		}
	}
	payloads := [][]byte{[]byte(`{}`), []byte(`{"a":[1,{"b":"c"}],"severity":"low","summary":"s"}`), []byte(`[]`), []byte(`"x"`), []byte(`1e308`)}
	f.Fuzz(func(t *testing.T, raw []byte) {
		d, err := ParseDefinition(raw, DefaultLimits())
		if err != nil {
			var ae *adp.Error
			if !errors.As(err, &ae) || ae.Code != adp.CodeInvalidEvent {
				t.Fatalf("error %T %v", err, err)
			}
			return
		}
		b, err := json.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		d2, err := ParseDefinition(b, DefaultLimits())
		if err != nil {
			t.Fatalf("re-parse of %s: %v", b, err)
		}
		b2, _ := json.Marshal(d2)
		if string(b) != string(b2) {
			t.Fatalf("round trip\n%s\n%s", b, b2)
		}
		for _, p := range payloads {
			if err := d.ValidatePayload(p); err != nil {
				var ae *adp.Error
				if !errors.As(err, &ae) || ae.Code != adp.CodePayloadSchemaViolation {
					t.Fatalf("validate error %T %v", err, err)
				}
			}
		}
	})
}
