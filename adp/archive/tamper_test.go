package archive

import (
	"bufio"
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// edit applies fn to the archive as a generic JSON document (as someone
// editing the file would) and parses the result again.
func edit(t *testing.T, a *Archive, fn func(doc map[string]any)) *Archive {
	t.Helper()
	b, _ := json.Marshal(a)
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	fn(doc)
	b, _ = json.Marshal(doc)
	out, err := ParseJSON(b)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func obj(doc map[string]any, k string) map[string]any { return doc[k].(map[string]any) }

// Every field an archive shows a reader is derived from the verified chain
// or checked against it: an edited copy fails, naming the field.
func TestVerifyFailsEditedShownFields(t *testing.T) {
	h := generate(t, 60)
	a := h.archive(t)
	if _, err := Verify(a, Options{}); err != nil {
		t.Fatalf("pristine archive: %v", err)
	}
	cases := []struct {
		field string
		fn    func(doc map[string]any)
		want  string
	}{
		{"room.topic", func(d map[string]any) { obj(d, "room")["topic"] = "A different topic" }, "room.topic"},
		{"room.creator", func(d map[string]any) {
			obj(d, "room")["creator"] = "did:agent:z6MkhaXgBZDvotDkL5257faiztiGiC2QtKLGpbnnEGta2doK"
		}, "room.creator"},
		{"room.status", func(d map[string]any) { obj(d, "room")["status"] = "active" }, "room.status"},
		{"room.visibility", func(d map[string]any) { obj(d, "room")["visibility"] = "private" }, "room.visibility"},
		{"room.extra member", func(d map[string]any) { obj(d, "room")["verified_by"] = "trust me" }, "room.verified_by"},
		{"manifest.host", func(d map[string]any) { obj(d, "manifest")["host"] = "adp.example.org" }, "manifest url"},
		{"manifest.url", func(d map[string]any) {
			obj(d, "manifest")["url"] = "http://127.0.0.1:8080/v1/rooms/d0000000000000000000"
		}, "does not name room"},
		{"manifest.formats", func(d map[string]any) {
			obj(d, "manifest")["formats"] = map[string]any{"json": "https://evil.example/archive"}
		}, "formats.json"},
		{"pack document.title", func(d map[string]any) {
			obj(d["packs"].([]any)[0].(map[string]any), "document")["title"] = "Edited title"
		}, "document.title"},
		{"pack dropped", func(d map[string]any) { d["packs"] = d["packs"].([]any)[:1] }, "pack documents"},
	}
	for _, c := range cases {
		t.Run(c.field, func(t *testing.T) {
			_, err := Verify(edit(t, a, c.fn), Options{})
			f, ok := err.(*Failure)
			if !ok {
				t.Fatalf("edited %s: got %v, want a Failure", c.field, err)
			}
			if !strings.Contains(f.Reason, c.want) {
				t.Errorf("edited %s: reason %q does not name %q", c.field, f.Reason, c.want)
			}
		})
	}
}

// The JSONL form carries no room resource, but its manifest and the pack
// documents under extra.packs are checked the same way.
func TestVerifyJSONLFailsEditedFields(t *testing.T) {
	h := generate(t, 40)
	a := h.archive(t)
	var buf bytes.Buffer
	w := bufio.NewWriter(&buf)
	if err := WriteJSONL(w, a.Manifest, a.Packs, h.recs); err != nil {
		t.Fatal(err)
	}
	pristine := buf.String()
	first, rest, _ := strings.Cut(pristine, "\n")
	for name, fn := range map[string]func(m map[string]any){
		"manifest.host": func(m map[string]any) { m["host"] = "adp.example.org" },
		"manifest.url":  func(m map[string]any) { m["url"] = "https://adp.example.org/v1/rooms/" + roomID },
		"pack document.title": func(m map[string]any) {
			p := m["extra"].(map[string]any)["packs"].([]any)[1].(map[string]any)
			p["document"].(map[string]any)["title"] = "Edited"
		},
	} {
		t.Run(name, func(t *testing.T) {
			var m map[string]any
			json.Unmarshal([]byte(first), &m)
			fn(m)
			line, _ := json.Marshal(m)
			pm, packs, recs, err := ParseJSONL([]byte(string(line) + "\n" + rest))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := VerifyRecords(pm, packs, recs, Options{}); err == nil {
				t.Fatalf("edited %s verified", name)
			}
		})
	}
	pm, packs, recs, _ := ParseJSONL([]byte(pristine))
	rep, err := VerifyRecords(pm, packs, recs, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.HostAsserted.Host != "127.0.0.1:8080" || !strings.HasSuffix(rep.HostAsserted.URL, "/"+roomID) {
		t.Errorf("host-asserted fields %+v", rep.HostAsserted)
	}
}
