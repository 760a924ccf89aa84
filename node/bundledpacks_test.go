//go:build e2e

package node_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/adpnode/adpnode/adp/types"
	"github.com/adpnode/adpnode/internal/adptest"
	"github.com/adpnode/adpnode/node"
)

// A bundled pack's digest is resolved from the bundled copy on every path
// that reads external packs (a write, a mirror's replay source, recovery):
// the URI is never dialled, even when it answers.
func TestBundledPacksNeverFetched(t *testing.T) {
	var fetches atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fetches.Add(1)
		http.Error(w, "no", http.StatusTeapot)
	}))
	defer srv.Close()
	h := adptest.StartHostAt(t, node.Config{DataDir: t.TempDir(), Packs: node.PackFetchConfig{AllowPrivate: true}}, adptest.NewClock())
	alice := adptest.NewAgent("alice")
	var decls []any
	for _, b := range types.BundledPacks() {
		decls = append(decls, json.RawMessage(b.Declaration(srv.URL)))
		got, err := h.Node.ExternalPacks().ExternalPack(b.URI(srv.URL), b.Digest) // the mirrors' source
		if err != nil || !bytes.Equal(got, b.Raw) {
			t.Fatalf("%s from the mirror source: %v", b.ID, err)
		}
	}
	p := h.RoomPayload("public")
	p["types"] = decls
	id := h.CreateRoom(t, alice, p)
	turn := map[string]any{"type": "propose", "text": "t", "goal": "g", "options": []any{map[string]any{"id": "a", "title": "A"}}}
	h.MustPost(t, alice, id, "round.turn", turn)
	h = h.Restart(t) // recovery reads packs without the network
	h.MustPost(t, alice, id, "round.turn", turn)
	if n := fetches.Load(); n != 0 {
		t.Fatalf("bundled pack URI dialled %d times", n)
	}
}
