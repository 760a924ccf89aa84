//go:build e2e

package hostapi_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"runtime"
	"testing"
	"time"

	"github.com/adpnode/adpnode/adp/room"
	"github.com/adpnode/adpnode/internal/adptest"
	"github.com/adpnode/adpnode/internal/fedtest"
	"github.com/adpnode/adpnode/internal/testwait"
	"github.com/adpnode/adpnode/mirror"
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

// Mirror streams are written by the one SSE writer: they get the record
// items, and a close reason as their last item — mirror_removed when the
// operator purges the room, shutdown when the mirror closes (every stream,
// none left open, the handler goroutines gone).
func TestMirrorStreamCloseReasons(t *testing.T) {
	peers := fedtest.Network(t, 2, nil, fedtest.Options{Mirror: true})
	a, b := peers[0], peers[1]
	alice := adptest.NewAgent("alice")
	purged := fedtest.CreateRoom(t, a, alice, room.Public, "purged")
	kept := fedtest.CreateRoom(t, a, alice, room.Public, "kept")
	purgedTarget, err := b.Mir.AddTarget(mirror.TargetRoom, a.Node.RoomURL(purged))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Mir.AddTarget(mirror.TargetRoom, a.Node.RoomURL(kept)); err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, 30*time.Second, "B verified both rooms' creation", func() bool {
		r1, ok1 := b.Mir.Room(purged, "")
		r2, ok2 := b.Mir.Room(kept, "")
		return ok1 && ok2 && r1.Tip() == 1 && r2.Tip() == 1
	})
	base := runtime.NumGoroutine()
	purgedStream, ans := oaStream(t, b.URL+"/v1/mirrors/rooms/"+purged+"/events/live", "")
	if purgedStream == nil {
		t.Fatalf("mirror stream: %s", short(ans))
	}
	const n = 4
	streams := make([]*sseStream, n)
	for i := range streams {
		if streams[i], ans = oaStream(t, b.URL+"/v1/mirrors/rooms/"+kept+"/events/live", ""); streams[i] == nil {
			t.Fatalf("mirror stream: %s", short(ans))
		}
	}
	if got := b.Mir.Streams(); got != n+1 {
		t.Fatalf("open mirror streams %d, want %d", got, n+1)
	}
	fedtest.MustSubmit(t, a, alice, "message.create", kept, msg("mirrored live"))
	for _, s := range streams {
		if rec := s.nextRecord(); rec.RoomID != kept || rec.Seq != 2 {
			t.Fatalf("mirror stream item %+v", rec)
		}
	}

	if err := b.Mir.RemoveTarget(purgedTarget.ID, true); err != nil {
		t.Fatal(err)
	}
	if reason, _ := purgedStream.waitEnd(10 * time.Second); reason != "mirror_removed" {
		t.Fatalf("purged room's stream ended with %q, want mirror_removed", reason)
	}

	b.Mir.Close()
	for i, s := range streams {
		if reason, _ := s.waitEnd(10 * time.Second); reason != "shutdown" {
			t.Fatalf("stream %d ended with %q, want shutdown", i, reason)
		}
	}
	if got := b.Mir.Streams(); got != 0 {
		t.Fatalf("%d mirror streams open after Close", got)
	}
	testwait.Until(t, 10*time.Second, "goroutines back to the baseline", func() bool { return runtime.NumGoroutine() <= base })
}
