package types

import (
	"bytes"
	"crypto/sha256"
	"crypto/sha3"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/adpnode/adpnode/adp"
)

func TestRegisteredPacksAppendixA(t *testing.T) {
	type typ struct {
		name     string
		kind     adp.Kind
		roles    []adp.Role // effective roles
		required []string
	}
	all := []adp.Role{"moderator", "speaker", "observer"}
	ms := []adp.Role{"moderator", "speaker"}
	mod := []adp.Role{"moderator"}
	want := []struct {
		id    string
		types []typ
	}{
		{"adp:reactions/1.0", []typ{{"reaction.create", adp.KindSignal, all, []string{"event_id", "reaction"}}}},
		{"adp:deliberation/1.0", []typ{
			{"question.create", adp.KindMessage, ms, []string{"question"}},
			{"proposal.create", adp.KindMessage, ms, []string{"proposal_id", "title", "body"}},
			{"poll.create", adp.KindMessage, ms, []string{"poll_id", "question", "options"}},
			{"poll.vote", adp.KindSignal, ms, []string{"poll_event_id", "option_ids"}},
		}},
		{"adp:curation/1.0", []typ{
			{"resource.add", adp.KindMessage, ms, []string{"resource_type"}},
			{"graph.update", adp.KindControl, mod, []string{"operation"}},
			{"artifact.create", adp.KindControl, mod, []string{"artifact_id", "format", "title"}},
		}},
		{"adp:moderation/1.0", []typ{
			{"turn.update", adp.KindControl, mod, []string{"turn_id", "speaker"}},
			{"steer.create", adp.KindSignal, ms, []string{"instruction"}},
		}},
		{"adp:realtime/1.0", []typ{
			{"session.offer", adp.KindSignal, ms, []string{"session_id", "session_type", "media", "description"}},
			{"session.answer", adp.KindSignal, ms, []string{"session_id", "offer_event_id", "description"}},
			{"session.candidate", adp.KindSignal, ms, []string{"session_id"}},
			{"session.close", adp.KindSignal, ms, []string{"session_id"}},
		}},
	}
	var ids []string
	for _, w := range want {
		ids = append(ids, w.id)
		t.Run("Appendix A "+w.id, func(t *testing.T) {
			p := mustPack(t, w.id)
			if p.ID != w.id || p.Title == "" || len(p.Raw) == 0 {
				t.Fatalf("pack header %q %q raw=%d", p.ID, p.Title, len(p.Raw))
			}
			if len(p.Types) != len(w.types) {
				t.Fatalf("%d types, want %d", len(p.Types), len(w.types))
			}
			for i, wt := range w.types {
				d := p.Types[i]
				if d.Type != wt.name || d.Kind != wt.kind {
					t.Errorf("type %d = %s/%s want %s/%s", i, d.Type, d.Kind, wt.name, wt.kind)
				}
				if !slices.Equal(d.AllowedRoles(), wt.roles) {
					t.Errorf("%s roles %v want %v", d.Type, d.AllowedRoles(), wt.roles)
				}
				if d.Pack != w.id || d.Status != StatusActive || d.compiled == nil {
					t.Errorf("%s pack=%q status=%q", d.Type, d.Pack, d.Status)
				}
				var sch struct{ Required []string }
				json.Unmarshal(d.Schema, &sch)
				if !slices.Equal(sch.Required, wt.required) {
					t.Errorf("%s required %v want %v", d.Type, sch.Required, wt.required)
				}
			}
		})
	}
	if !slices.Equal(RegisteredPackIDs(), ids) {
		t.Fatalf("RegisteredPackIDs = %v", RegisteredPackIDs())
	}
	if _, ok := RegisteredPack("adp:unknown/1.0"); ok {
		t.Fatal("unknown pack found")
	}
}

func TestRegisteredPacksDocument(t *testing.T) {
	src, err := os.ReadFile("packs/agent-discourse-1.0.packs.json")
	if err != nil {
		t.Fatal(err)
	}
	doc := RegisteredPacksDocument()
	if !bytes.Equal(doc, src) {
		t.Fatal("embedded document differs from packs/agent-discourse-1.0.packs.json")
	}
	doc[0] = 'x'
	if RegisteredPacksDocument()[0] == 'x' {
		t.Fatal("RegisteredPacksDocument exposes the embedded bytes")
	}
	// Each pack's Raw is the compact form of its object in the file.
	var file struct{ Packs []json.RawMessage }
	json.Unmarshal(src, &file)
	for i, id := range RegisteredPackIDs() {
		var buf bytes.Buffer
		json.Compact(&buf, file.Packs[i])
		if !bytes.Equal(buf.Bytes(), mustPack(t, id).Raw) {
			t.Errorf("%s Raw differs from the file", id)
		}
	}
}

// TestPackPayloads runs sample payloads (valid and invalid) through the
// registered pack schemas (PACKS-NOTES.md "Checks run on the result").
func TestPackPayloads(t *testing.T) {
	e := eventID
	a := agentID
	cases := []struct {
		name    string
		typ     string
		payload string
		valid   bool
	}{
		{"A.1 reaction minimal", "reaction.create", `{"event_id":"` + e + `","reaction":"agree"}`, true},
		{"A.1 reaction score 0.5", "reaction.create", `{"event_id":"` + e + `","reaction":"agree","score":0.5}`, true},
		{"A.1 reaction score -1", "reaction.create", `{"event_id":"` + e + `","reaction":"disagree","score":-1}`, true},
		{"A.1 reaction custom reaction string", "reaction.create", `{"event_id":"` + e + `","reaction":"🎉"}`, true},
		{"A.1 reaction score 1.5", "reaction.create", `{"event_id":"` + e + `","reaction":"agree","score":1.5}`, false},
		{"A.1 reaction score 50", "reaction.create", `{"event_id":"` + e + `","reaction":"agree","score":50}`, false},
		{"A.1 reaction missing reaction", "reaction.create", `{"event_id":"` + e + `"}`, false},
		{"A.1 reaction bad event id", "reaction.create", `{"event_id":"short","reaction":"agree"}`, false},
		{"A.1 reaction unknown member", "reaction.create", `{"event_id":"` + e + `","reaction":"agree","emoji":"x"}`, false},
		{"A.2 question", "question.create", `{"question":"Why?","basis":"graph_gap","priority":50}`, true},
		{"A.2 question bad basis", "question.create", `{"question":"Why?","basis":"whim"}`, false},
		{"A.2 question priority fraction", "question.create", `{"question":"Why?","priority":0.5}`, false},
		{"A.2 proposal", "proposal.create", `{"proposal_id":"p1","title":"T","body":"B"}`, true},
		{"A.2 proposal missing body", "proposal.create", `{"proposal_id":"p1","title":"T"}`, false},
		{"A.2 poll", "poll.create", `{"poll_id":"p","question":"Q","options":[{"id":"a","label":"A"},{"id":"b","label":"B"}],"max_choices":1}`, true},
		{"A.2 poll no options", "poll.create", `{"poll_id":"p","question":"Q","options":[]}`, false},
		{"A.2 poll option without label", "poll.create", `{"poll_id":"p","question":"Q","options":[{"id":"a"}]}`, false},
		{"A.2 vote", "poll.vote", `{"poll_event_id":"` + e + `","option_ids":["a"]}`, true},
		{"A.2 vote duplicate options", "poll.vote", `{"poll_event_id":"` + e + `","option_ids":["a","a"]}`, false},
		{"A.2 vote old field event_id", "poll.vote", `{"event_id":"` + e + `","option_ids":["a"]}`, false},
		{"A.3 resource", "resource.add", `{"resource_type":"web","uri":"https://example.com/x","content_digest":"sha256:abc","retrieved_at":1779753600000}`, true},
		{"A.3 resource missing type", "resource.add", `{"uri":"https://example.com/x"}`, false},
		{"A.3 graph upsert with $defs/node", "graph.update", `{"operation":"upsert_node","node":{"id":"n1","title":"Root","children":[{"id":"n2","title":"Child","parent_id":"n1"}]}}`, true},
		{"A.3 graph upsert without node", "graph.update", `{"operation":"upsert_node"}`, false},
		{"A.3 graph nested child missing title", "graph.update", `{"operation":"upsert_node","node":{"id":"n1","title":"Root","children":[{"id":"n2"}]}}`, false},
		{"A.3 graph move", "graph.update", `{"operation":"move_node","node_id":"n2","to_parent_id":"n3"}`, true},
		{"A.3 graph move without target", "graph.update", `{"operation":"move_node","node_id":"n2"}`, false},
		{"A.3 graph merge", "graph.update", `{"operation":"merge_nodes","node_ids":["a","b"],"node_id":"c"}`, true},
		{"A.3 graph snapshot", "graph.update", `{"operation":"replace_snapshot","nodes":[{"id":"a","title":"A"}]}`, true},
		{"A.3 graph unknown operation", "graph.update", `{"operation":"explode"}`, false},
		{"A.3 artifact", "artifact.create", `{"artifact_id":"r1","format":"markdown","title":"Report","graph_event_id":"` + e + `"}`, true},
		{"A.3 artifact missing format", "artifact.create", `{"artifact_id":"r1","title":"Report"}`, false},
		{"A.4 turn floor", "turn.update", `{"turn_id":1,"speaker":"` + a + `"}`, true},
		{"A.4 turn task lease", "turn.update", `{"turn_id":2,"speaker":"` + a + `","scope":"task","claim_id":"c1","state":"assigned","lease_until":1779757200000}`, true},
		{"A.4 turn bad scope", "turn.update", `{"turn_id":2,"speaker":"` + a + `","scope":"room"}`, false},
		{"A.4 turn id zero", "turn.update", `{"turn_id":0,"speaker":"` + a + `"}`, false},
		{"A.4 turn bad speaker", "turn.update", `{"turn_id":1,"speaker":"alice"}`, false},
		{"A.4 steer", "steer.create", `{"instruction":"Focus on security.","priority":10}`, true},
		{"A.4 steer empty", "steer.create", `{"instruction":""}`, false},
		{"A.5 offer", "session.offer", `{"session_id":"s","session_type":"webrtc","media":["audio"],"description":{"type":"offer","sdp":"v=0"},"to":["` + a + `"]}`, true},
		{"A.5 offer wrong session type", "session.offer", `{"session_id":"s","session_type":"sip","media":["audio"],"description":{"type":"offer","sdp":"v=0"}}`, false},
		{"A.5 answer", "session.answer", `{"session_id":"s","offer_event_id":"` + e + `","description":{"type":"answer","sdp":"v=0"}}`, true},
		{"A.5 answer with offer description", "session.answer", `{"session_id":"s","offer_event_id":"` + e + `","description":{"type":"offer","sdp":"v=0"}}`, false},
		{"A.5 candidate", "session.candidate", `{"session_id":"s","candidate":{"candidate":"candidate:1 1 udp 1 10.0.0.1 9 typ host","sdp_mline_index":0}}`, true},
		{"A.5 end of candidates", "session.candidate", `{"session_id":"s","end_of_candidates":true}`, true},
		{"A.5 candidate neither", "session.candidate", `{"session_id":"s"}`, false},
		{"A.5 candidate end_of_candidates false", "session.candidate", `{"session_id":"s","end_of_candidates":false}`, false},
		{"A.5 close", "session.close", `{"session_id":"s","reason":"done"}`, true},
		{"A.5 close without session", "session.close", `{"reason":"done"}`, false},
		{"§13.6 payload not an object", "session.close", `"s"`, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := mustType(t, c.typ).ValidatePayload([]byte(c.payload))
			if c.valid {
				wantCode(t, err, "", "")
				return
			}
			wantCode(t, err, adp.CodePayloadSchemaViolation, "")
			errs, ok := err.(*adp.Error).Data["errors"].([]map[string]string)
			if !ok || len(errs) == 0 || len(errs) > 10 {
				t.Fatalf("data.errors = %#v", err.(*adp.Error).Data["errors"])
			}
			for _, e := range errs {
				if e["message"] == "" {
					t.Fatalf("empty message in %v", errs)
				}
			}
		})
	}
}

func TestPayloadErrorsCapped(t *testing.T) {
	var sb strings.Builder
	sb.WriteString(`{`)
	for i := 0; i < 30; i++ {
		fmt.Fprintf(&sb, `"p%02d":1,`, i)
	}
	sb.WriteString(`"q":{"type":"object"}}`)
	schema := `{"properties":{` + strings.TrimSuffix(strings.ReplaceAll(sb.String()[1:], `:1,`, `:{"type":"string"},`), `,"q":{"type":"object"}}`) + `}}`
	d, err := ParseDefinition(schemaDef(schema), DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	var payload strings.Builder
	payload.WriteString(`{`)
	for i := 0; i < 30; i++ {
		if i > 0 {
			payload.WriteString(",")
		}
		fmt.Fprintf(&payload, `"p%02d":1`, i)
	}
	payload.WriteString(`}`)
	err = d.ValidatePayload([]byte(payload.String()))
	wantCode(t, err, adp.CodePayloadSchemaViolation, "")
	errs := err.(*adp.Error).Data["errors"].([]map[string]string)
	if len(errs) != 10 {
		t.Fatalf("§13.6 data.errors has %d entries, want 10", len(errs))
	}
	if errs[0]["path"] != "/p00" || errs[9]["path"] != "/p09" {
		t.Fatalf("§13.6 errors not sorted by path: %v", errs)
	}
	// Deterministic across runs despite map iteration in the validator.
	for i := 0; i < 5; i++ {
		again := d.ValidatePayload([]byte(payload.String())).(*adp.Error).Data["errors"]
		if fmt.Sprint(again) != fmt.Sprint(errs) {
			t.Fatal("§13.6 data.errors not deterministic")
		}
	}
}

// Numbers are validated as the IEEE doubles JCS signs, so giant exponents
// cost nothing and numbers outside the double range are rejected.
func TestPayloadNumbers(t *testing.T) {
	d := mustType(t, "reaction.create")
	ok := `{"event_id":"` + eventID + `","reaction":"a","score":`
	wantCode(t, d.ValidatePayload([]byte(ok+`1e-100000000}`)), "", "")
	wantCode(t, d.ValidatePayload([]byte(ok+`1e400}`)), adp.CodePayloadSchemaViolation, "")
	wantCode(t, d.ValidatePayload([]byte(ok+`-0}`)), "", "")
	turn := mustType(t, "turn.update")
	wantCode(t, turn.ValidatePayload([]byte(`{"turn_id":1.0,"speaker":"`+agentID+`"}`)), "", "")
	wantCode(t, turn.ValidatePayload([]byte(`{"turn_id":1e3,"speaker":"`+agentID+`"}`)), "", "")
}

func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

func sha256Digest(raw []byte) string { s := sha256.Sum256(raw); return "sha256:" + b64(s[:]) }
func sha3Digest(raw []byte) string   { s := sha3.Sum256(raw); return "sha3-256:" + b64(s[:]) }

const triagePack = `{
  "id": "example:triage/1.0",
  "title": "Triage",
  "description": "Bug triage.",
  "types": [
    {"type": "triage.label", "kind": "signal", "title": "Label", "schema": {"type": "object", "required": ["label"], "properties": {"label": {"type": "string"}}}},
    {"type": "triage.assign", "kind": "control", "title": "Assign", "roles": ["moderator", "speaker"], "schema": {"type": "object"}}
  ]
}`

func TestParseExternalPack(t *testing.T) {
	raw := []byte(triagePack)
	uri := "https://example.com/packs/triage-1.0.json"
	cases := []struct {
		name   string
		digest string
		raw    []byte
		code   adp.Code
		reason string
	}{
		{"§13.5 sha256 digest ok", sha256Digest(raw), raw, "", ""},
		{"§13.5 sha3-256 digest ok", sha3Digest(raw), raw, "", ""},
		{"§13.5 digest over raw bytes (whitespace matters)", sha256Digest(raw), append(bytes.Clone(raw), '\n'), adp.CodePackUnavailable, ReasonDigestMismatch},
		{"§13.5 digest mismatch", sha256Digest([]byte("x")), raw, adp.CodePackUnavailable, ReasonDigestMismatch},
		{"§13.5 unknown algorithm", "md5:" + b64(make([]byte, 16)), raw, adp.CodePackUnavailable, ReasonBadDigest},
		{"§13.5 padded base64", sha256Digest(raw) + "=", raw, adp.CodePackUnavailable, ReasonBadDigest},
		{"§13.5 standard base64 alphabet", "sha256:+" + sha256Digest(raw)[8:], raw, adp.CodePackUnavailable, ""},
		{"§13.5 wrong length", "sha256:" + b64(make([]byte, 31)), raw, adp.CodePackUnavailable, ReasonBadDigest},
		{"§13.5 no algorithm", b64(make([]byte, 32)), raw, adp.CodePackUnavailable, ReasonBadDigest},
		{"§13.5 content not JSON", sha256Digest([]byte("{")), []byte("{"), adp.CodeInvalidEvent, ReasonBadJSON},
		{"§13.5 content not a pack object", sha256Digest([]byte("[]")), []byte("[]"), adp.CodeInvalidEvent, ReasonNotObject},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, err := ParseExternalPack(uri, c.digest, c.raw, DefaultLimits())
			wantCode(t, err, c.code, c.reason)
			if err != nil {
				return
			}
			if p.ID != "example:triage/1.0" || len(p.Types) != 2 || !bytes.Equal(p.Raw, raw) {
				t.Fatalf("pack %+v", p)
			}
			for _, d := range p.Types {
				if d.Pack != uri {
					t.Fatalf("definition Pack = %q, want the URI", d.Pack)
				}
			}
		})
	}
	// The canonical-encoding check: a digest whose last character carries
	// non-zero padding bits decodes to the same bytes in lax decoders.
	good := sha256Digest(raw)
	last := good[len(good)-1]
	alphabet := "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	idx := strings.IndexByte(alphabet, last)
	t.Run("§13.5 non-canonical base64url", func(t *testing.T) {
		alt := good[:len(good)-1] + string(alphabet[idx^1])
		_, err := ParseExternalPack(uri, alt, raw, DefaultLimits())
		wantCode(t, err, adp.CodePackUnavailable, ReasonBadDigest)
	})
}

func TestExternalPackContent(t *testing.T) {
	pack := func(m map[string]any) []byte { return js(m) }
	def := func(name string) map[string]any {
		return map[string]any{"type": name, "kind": "signal", "title": "T", "schema": map[string]any{}}
	}
	cases := []struct {
		name   string
		doc    []byte
		reason string
	}{
		{"§13.5 unknown pack member", pack(map[string]any{"id": "x", "title": "X", "types": []any{def("a.b")}, "color": 1}), ReasonUnknownField},
		{"§13.5 missing id", pack(map[string]any{"title": "X", "types": []any{def("a.b")}}), ReasonMissingField},
		{"§13.5 empty id", pack(map[string]any{"id": "", "title": "X", "types": []any{def("a.b")}}), ReasonBadField},
		{"§13.5 missing types", pack(map[string]any{"id": "x", "title": "X"}), ReasonMissingField},
		{"§13.5 empty types", pack(map[string]any{"id": "x", "title": "X", "types": []any{}}), ReasonBadField},
		{"§13.5 types not an array", pack(map[string]any{"id": "x", "title": "X", "types": map[string]any{}}), ReasonBadField},
		{"§13.5 duplicate type", pack(map[string]any{"id": "x", "title": "X", "types": []any{def("a.b"), def("a.b")}}), ReasonDuplicateType},
		{"§13.5 invalid definition", pack(map[string]any{"id": "x", "title": "X", "types": []any{def("room.x")}}), ReasonReservedPrefix},
		{"§13.5 definition with remote $ref", pack(map[string]any{"id": "x", "title": "X", "types": []any{
			map[string]any{"type": "a.b", "kind": "signal", "title": "T", "schema": map[string]any{"$ref": "https://example.com/s"}}}}), ReasonSchemaRemoteRef},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseExternalPack("https://example.com/p.json", sha256Digest(c.doc), c.doc, DefaultLimits())
			wantCode(t, err, adp.CodeInvalidEvent, c.reason)
		})
	}
	t.Run("§13.5 nested error names its field", func(t *testing.T) {
		doc := pack(map[string]any{"id": "x", "title": "X", "types": []any{def("a.b"), def("Bad")}})
		_, err := ParseExternalPack("https://example.com/p.json", sha256Digest(doc), doc, DefaultLimits())
		if f := err.(*adp.Error).Data["field"]; f != "types[1].type" {
			t.Fatalf("data.field = %v", f)
		}
	})
	if Digest([]byte(triagePack)) != sha256Digest([]byte(triagePack)) {
		t.Fatal("Digest helper")
	}
}

func BenchmarkValidatePayload(b *testing.B) {
	d := mustType(b, "reaction.create")
	payload := []byte(`{"event_id":"` + eventID + `","reaction":"agree","score":0.5,"extra":{"note":"benchmark"}}`)
	b.ReportAllocs()
	for b.Loop() {
		if err := d.ValidatePayload(payload); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkValidatePayloadGraph(b *testing.B) {
	d := mustType(b, "graph.update")
	payload := []byte(`{"operation":"upsert_node","node":{"id":"n1","title":"Root","children":[{"id":"n2","title":"A"},{"id":"n3","title":"B","children":[{"id":"n4","title":"C"}]}]}}`)
	b.ReportAllocs()
	for b.Loop() {
		if err := d.ValidatePayload(payload); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkParseDefinition(b *testing.B) {
	raw := js(baseDef())
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseDefinition(raw, DefaultLimits()); err != nil {
			b.Fatal(err)
		}
	}
}
