//go:build e2e

package node_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/adpnode/adpnode/adp/types"
	"github.com/adpnode/adpnode/internal/adptest"
	"github.com/adpnode/adpnode/node"
)

const triagePack = `{"id":"example:triage/1.0","title":"Triage","types":[
 {"type":"triage.label","kind":"signal","title":"Label","schema":{"type":"object","required":["label"],"properties":{"label":{"type":"string"}}}}]}`

// External packs (§13.5, DECISIONS 11): fetched, verified against the digest
// over the raw bytes, cached by digest, refused from private addresses
// unless allowed.
func TestExternalPacks(t *testing.T) {
	var fetches atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fetches.Add(1)
		w.Write([]byte(triagePack))
	}))
	defer srv.Close()
	digest := types.Digest([]byte(triagePack))
	decl := func(d string) []any { return []any{map[string]any{"pack": srv.URL + "/triage.json", "digest": d}} }

	t.Run("allowed", func(t *testing.T) {
		h := adptest.StartHost(t, node.Config{Packs: node.PackFetchConfig{AllowPrivate: true}})
		alice := adptest.NewAgent("alice")
		p := h.RoomPayload("public")
		p["types"] = decl(digest)
		id := h.CreateRoom(t, alice, p)
		h.MustPost(t, alice, id, "triage.label", map[string]any{"label": "bug"})
		if r := h.Post(t, alice, id, "triage.label", map[string]any{"label": 5}); r.ErrorCode() != "payload_schema_violation" {
			t.Fatalf("schema from the external pack not enforced: %s", r)
		}
		// A second room with the same digest uses the cache.
		before := fetches.Load()
		h.CreateRoom(t, alice, p)
		if fetches.Load() != before {
			t.Fatal("pack fetched again despite the digest cache")
		}
		// Digest mismatch.
		bad := h.RoomPayload("public")
		bad["types"] = decl("sha256:" + strings.Repeat("A", 43))
		r := adptest.Do(t, http.MethodPost, h.URL+"/v1/rooms", "", alice.Envelope(h.Clock.Ms(), "room.create", "", 0, "", bad))
		if r.ErrorCode() != "pack_unavailable" || r.Status != http.StatusUnprocessableEntity {
			t.Fatalf("digest mismatch: %s", r)
		}
		// Unreachable.
		gone := h.RoomPayload("public")
		gone["types"] = []any{map[string]any{"pack": "http://127.0.0.1:1/x.json", "digest": "sha256:" + strings.Repeat("B", 43)}}
		r = adptest.Do(t, http.MethodPost, h.URL+"/v1/rooms", "", alice.Envelope(h.Clock.Ms(), "room.create", "", 0, "", gone))
		if r.ErrorCode() != "pack_unavailable" {
			t.Fatalf("unreachable pack: %s", r)
		}
	})

	t.Run("ssrf guard", func(t *testing.T) {
		h := adptest.StartHost(t, node.Config{})
		alice := adptest.NewAgent("alice")
		p := h.RoomPayload("public")
		p["types"] = decl(digest)
		before := fetches.Load()
		r := adptest.Do(t, http.MethodPost, h.URL+"/v1/rooms", "", alice.Envelope(h.Clock.Ms(), "room.create", "", 0, "", p))
		if r.ErrorCode() != "pack_unavailable" {
			t.Fatalf("plain-http loopback pack accepted: %s", r)
		}
		// HTTPS to a loopback address is refused at connect time.
		tls := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			fetches.Add(1)
			w.Write([]byte(triagePack))
		}))
		defer tls.Close()
		p["types"] = []any{map[string]any{"pack": tls.URL + "/triage.json", "digest": digest}}
		r = adptest.Do(t, http.MethodPost, h.URL+"/v1/rooms", "", alice.Envelope(h.Clock.Ms(), "room.create", "", 0, "", p))
		if r.ErrorCode() != "pack_unavailable" || !strings.Contains(r.String(), "not a public address") {
			t.Fatalf("https loopback pack: %s", r)
		}
		if fetches.Load() != before {
			t.Fatal("the guard let a request through to a loopback address")
		}
	})
}
