package adptest

import (
	"net/http"
	"testing"

	"github.com/adpnode/adpnode/adp/types"
)

// Head is a room head as the room resource reports it.
type Head struct {
	Seq  int64  `json:"seq"`
	Hash string `json:"hash"`
}

// RoomPayload returns a valid room.create payload for a room that starts now
// and lasts an hour, with the registered reactions pack.
func (h *Host) RoomPayload(visibility string) map[string]any {
	now := h.Clock.Ms()
	return map[string]any{"topic": "Test room", "visibility": visibility, "start_time": now, "end_time": now + 3_600_000,
		"types": []any{map[string]any{"use": "adp:reactions/1.0"}}}
}

// BundledPacks returns the declarations of the node's bundled packs with
// these IDs (as client.BundledPack gives them), to add to a payload's types.
func (h *Host) BundledPacks(t testing.TB, ids ...string) []any {
	t.Helper()
	decls := make([]any, 0, len(ids))
	for _, id := range ids {
		b, ok := types.BundledPackByID(id)
		if !ok {
			t.Fatalf("no bundled pack %q", id)
		}
		decls = append(decls, b.Declaration(h.URL))
	}
	return decls
}

// CreateRoom submits room.create and returns the new room ID.
func (h *Host) CreateRoom(t testing.TB, a *Agent, payload map[string]any) string {
	t.Helper()
	r := Do(t, http.MethodPost, h.URL+"/v1/rooms", "", a.Envelope(h.Clock.Ms(), "room.create", "", 0, "", payload))
	if r.Status != http.StatusCreated {
		t.Fatalf("create room: %s", r)
	}
	var out struct {
		ID string `json:"id"`
	}
	_ = r.JSON(&out)
	return out.ID
}

// Head reads the room's head (authenticating as a).
func (h *Host) Head(t testing.TB, a *Agent, roomID string) Head {
	t.Helper()
	r := Do(t, http.MethodGet, h.URL+"/v1/rooms/"+roomID, a.Token(h.URL, h.Clock.Ms()), nil)
	if r.Status != http.StatusOK {
		t.Fatalf("get room: %s", r)
	}
	var out struct {
		Head Head `json:"head"`
	}
	_ = r.JSON(&out)
	return out.Head
}

// Post signs an event on the current head and submits it.
func (h *Host) Post(t testing.TB, a *Agent, roomID, typ string, payload any) *Response {
	t.Helper()
	head := h.Head(t, a, roomID)
	return Do(t, http.MethodPost, h.URL+"/v1/rooms/"+roomID, "", a.Envelope(h.Clock.Ms(), typ, roomID, head.Seq, head.Hash, payload))
}

// MustPost is Post that fails the test unless the write was accepted.
func (h *Host) MustPost(t testing.TB, a *Agent, roomID, typ string, payload any) *Response {
	t.Helper()
	r := h.Post(t, a, roomID, typ, payload)
	if r.Status != http.StatusCreated {
		t.Fatalf("%s by %s: %s", typ, a.Name, r)
	}
	return r
}
