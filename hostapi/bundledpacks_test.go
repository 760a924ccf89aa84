//go:build e2e

package hostapi_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/adpnode/adpnode/adp/types"
	"github.com/adpnode/adpnode/internal/adptest"
	"github.com/adpnode/adpnode/node"
)

// The bundled packs are listed in discovery, served byte for byte at the
// URI discovery names, and importable as external packs: from this host's
// URI or any other URI with the same digest, without the network, also
// after a restart. The host checks the turns' shape (schema) and answers a
// violation in the error shape.
func TestBundledPacksServedAndImported(t *testing.T) {
	h := adptest.StartHostAt(t, node.Config{DataDir: t.TempDir()}, adptest.NewClock())
	r := adptest.Do(t, http.MethodGet, h.URL+"/.well-known/agent-discourse", "", nil)
	var d struct {
		Features []string `json:"features"`
		Bundled  []struct {
			ID, Title, Pack, Digest string
			Types                   []string
		} `json:"bundled_packs"`
	}
	if err := r.JSON(&d); err != nil || !slices.Contains(d.Features, "bundled-packs") || len(d.Bundled) != len(types.BundledPacks()) {
		t.Fatalf("discovery: %v %s", err, r)
	}
	var decls []any
	for _, b := range d.Bundled {
		if !strings.HasPrefix(b.Pack, h.URL+"/v1/packs/") || len(b.Types) == 0 {
			t.Fatalf("bundled entry %+v", b)
		}
		got := adptest.Do(t, http.MethodGet, b.Pack, "", nil)
		if got.Status != http.StatusOK || types.Digest(got.Body) != b.Digest || !strings.HasPrefix(got.Header.Get("Content-Type"), "application/json") {
			t.Fatalf("GET %s: %d, digest %s want %s", b.Pack, got.Status, types.Digest(got.Body), b.Digest)
		}
		if nm := adptest.Do(t, http.MethodGet, b.Pack, "", nil); nm.Status != http.StatusOK {
			t.Fatal(nm)
		}
		decls = append(decls, map[string]any{"pack": b.Pack, "digest": b.Digest})
	}
	if nf := adptest.Do(t, http.MethodGet, h.URL+"/v1/packs/..%2f..%2fetc%2fpasswd", "", nil); nf.Status != http.StatusNotFound || nf.ErrorCode() != "not_found" {
		t.Fatalf("unknown pack: %s", nf)
	}

	a := adptest.NewAgent("alice")
	p := h.RoomPayload("public")
	p["types"] = decls
	roomID := h.CreateRoom(t, a, p)
	turn := map[string]any{"type": "propose", "text": "Shall we?", "goal": "a deal", "options": []any{map[string]any{"id": "a", "title": "Plan A"}}}
	h.MustPost(t, a, roomID, "round.turn", turn)

	// Hostile shapes: the spec's error body with payload_schema_violation.
	huge := make([]any, 1000)
	for i := range huge {
		huge[i] = map[string]any{"id": "o", "title": "t"}
	}
	for _, bad := range []map[string]any{
		{"type": "rewind", "text": "x", "ref": strings.Repeat("A", 43)},
		{"type": "counter", "text": "x", "ref": strings.Repeat("A", 43), "options": huge},
		{"type": "deliver", "text": "x", "ref": strings.Repeat("A", 43), "options": []any{map[string]any{"id": "f", "title": "file", "data": strings.Repeat("A", 2000)}}},
	} {
		r := h.Post(t, a, roomID, "round.turn", bad)
		if r.Status/100 != 4 || r.ErrorCode() != "payload_schema_violation" {
			t.Fatalf("bad turn accepted or wrong error: %s", r)
		}
		var body struct {
			Error struct{ Code, Message string } `json:"error"`
		}
		if json.Unmarshal(r.Body, &body) != nil || body.Error.Message == "" {
			t.Fatalf("error shape: %s", r)
		}
	}

	// A room on another host's URI with the same digest resolves from the
	// bundled copy (the digest pins the bytes): no fetch, no failure.
	deal, _ := types.BundledPackByID("adpnode:deal/1.0")
	p2 := h.RoomPayload("public")
	p2["types"] = []any{json.RawMessage(deal.Declaration("https://elsewhere.example"))}
	room2 := h.CreateRoom(t, a, p2)

	h = h.Restart(t)
	h.MustPost(t, a, roomID, "round.turn", map[string]any{"type": "cancel", "text": "never mind", "ref": strings.Repeat("A", 43)})
	if r := h.Post(t, a, room2, "round.turn", turn); r.Status/100 != 4 {
		t.Fatalf("round.turn in a room without the coordination pack: %s", r)
	}
}
