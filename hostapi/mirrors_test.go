package hostapi_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/adpnode/adpnode/adp/room"
	"github.com/adpnode/adpnode/internal/adptest"
	"github.com/adpnode/adpnode/internal/fedtest"
)

// POST /v1/mirrors answers a room target that cannot be mirrored in the
// spec's error shape with the status of its code and data.reason (a
// restricted room: 403 room_not_public; a private one: 404; a host that
// is not listening: 503 host_unreachable), and stores nothing.
func TestMirrorAddRefusalShape(t *testing.T) {
	peers := fedtest.Network(t, 2, nil, fedtest.Options{Mirror: true})
	a, b := peers[0], peers[1]
	alice := adptest.NewAgent("alice")
	restricted := fedtest.CreateRoom(t, a, alice, room.Restricted, "restricted")
	private := fedtest.CreateRoom(t, a, alice, room.Private, "private")
	for _, c := range []struct {
		url    string
		status int
		code   string
		reason string
	}{
		{a.Node.RoomURL(restricted), 403, "permission_denied", "room_not_public"},
		{a.Node.RoomURL(private), 404, "room_not_found", "room_not_found"},
		{"http://127.0.0.1:1/v1/rooms/" + restricted, 503, "unavailable", "host_unreachable"},
		{"not a url", 400, "invalid_request", "target"},
	} {
		body, _ := json.Marshal(map[string]string{"kind": "room", "value": c.url})
		req, _ := http.NewRequest(http.MethodPost, b.URL+"/v1/mirrors", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+b.OperatorToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var out struct {
			Error struct {
				Code    string         `json:"code"`
				Message string         `json:"message"`
				Data    map[string]any `json:"data"`
			} `json:"error"`
		}
		json.NewDecoder(resp.Body).Decode(&out)
		resp.Body.Close()
		if resp.StatusCode != c.status || out.Error.Code != c.code || out.Error.Data["reason"] != c.reason || out.Error.Message == "" {
			t.Errorf("%s: %d %+v (want %d %s %s)", c.url, resp.StatusCode, out.Error, c.status, c.code, c.reason)
		}
	}
	if n := len(b.Mir.Targets()); n != 0 {
		t.Fatalf("%d refused targets stored", n)
	}
}
