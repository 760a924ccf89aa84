//go:build e2e

package hostapi_test

import (
	"encoding/json"
	"net/http"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/adpnode/adpnode/adp"
	"github.com/adpnode/adpnode/hostapi"
	"github.com/adpnode/adpnode/internal/adptest"
	"github.com/adpnode/adpnode/node"
)

// The web viewer's HTTP side: embedded assets with a strict CSP, and the
// viewer-token extension (POST /v1/viewer-tokens, GET …/events/view).

var viewerAssets = []string{"/", "/ui/app.js", "/ui/sha3.js", "/ui/verify.js", "/ui/markdown.js", "/ui/style.css", "/ui/favicon.svg"}

func TestViewerAssets(t *testing.T) {
	h := adptest.StartHost(t, node.Config{})
	for _, p := range viewerAssets {
		r := adptest.Do(t, http.MethodGet, h.URL+p, "", nil)
		expectStatus(t, r, http.StatusOK)
		csp := r.Header.Get("Content-Security-Policy")
		if csp != hostapi.ViewerCSP || !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe") {
			t.Fatalf("%s: Content-Security-Policy %q", p, csp)
		}
		if r.Header.Get("X-Content-Type-Options") != "nosniff" {
			t.Fatalf("%s: no nosniff", p)
		}
		want := "text/html"
		if i := strings.LastIndex(p, "."); i >= 0 {
			want = map[string]string{".js": "text/javascript", ".css": "text/css", ".svg": "image/svg+xml"}[p[i:]]
		}
		if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, want) {
			t.Fatalf("%s: Content-Type %q, want %s", p, ct, want)
		}
		// Revalidation.
		req, _ := http.NewRequest(http.MethodGet, h.URL+p, nil)
		req.Header.Set("If-None-Match", r.Header.Get("ETag"))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotModified {
			t.Fatalf("%s with its ETag: %d", p, resp.StatusCode)
		}
	}
	// No inline script, handler attribute or inline style in the shell.
	page := string(adptest.Do(t, http.MethodGet, h.URL+"/", "", nil).Body)
	for _, tag := range regexp.MustCompile(`(?is)<script[^>]*>`).FindAllString(page, -1) {
		if !strings.Contains(tag, `src="/ui/`) {
			t.Fatalf("index.html has an inline script: %s", tag)
		}
	}
	if regexp.MustCompile(`(?is)<script[^>]*>\s*[^<\s]`).MatchString(page) || regexp.MustCompile(`(?i)\son[a-z]+\s*=|\sstyle\s*=`).MatchString(page) {
		t.Fatal("index.html has inline script, a handler attribute or an inline style")
	}
	// index.html loads every embedded script, each from /ui/ with the CSP,
	// and no script writes HTML strings into the page.
	var loaded []string
	for _, m := range regexp.MustCompile(`<script src="(/ui/[a-z0-9]+\.js)" defer></script>`).FindAllStringSubmatch(page, -1) {
		loaded = append(loaded, m[1])
	}
	embedded, _ := filepath.Glob("web/*.js")
	if len(loaded) != len(embedded) || len(loaded) < 10 {
		t.Fatalf("index.html loads %q; embedded scripts %q", loaded, embedded)
	}
	for _, f := range embedded {
		if !slices.Contains(loaded, "/ui/"+filepath.Base(f)) {
			t.Fatalf("index.html does not load %s (loads %q)", f, loaded)
		}
	}
	sinks := regexp.MustCompile(`innerHTML|outerHTML|insertAdjacentHTML|document\.write|\beval\(|new Function|createContextualFragment|DOMParser`)
	for _, p := range loaded {
		r := adptest.Do(t, http.MethodGet, h.URL+p, "", nil)
		expectStatus(t, r, http.StatusOK)
		if r.Header.Get("Content-Security-Policy") != hostapi.ViewerCSP {
			t.Fatalf("%s: Content-Security-Policy %q", p, r.Header.Get("Content-Security-Policy"))
		}
		if m := sinks.FindString(string(r.Body)); m != "" {
			t.Fatalf("%s uses %s", p, m)
		}
	}
	for _, p := range []string{"/ui/nope.js", "/ui/../go.mod", "/ui/index.html", "/ui/"} {
		r := adptest.Do(t, http.MethodGet, h.URL+p, "", nil)
		if r.Status != http.StatusNotFound {
			t.Fatalf("%s: %s", p, r)
		}
	}
}

// viewerToken asks for a viewer token of roomID.
func viewerToken(t testing.TB, h *adptest.Host, roomID string) *adptest.Response {
	t.Helper()
	b, _ := json.Marshal(map[string]string{"room_id": roomID})
	return adptest.Do(t, http.MethodPost, h.URL+"/v1/viewer-tokens", "", b)
}

func mustViewerToken(t testing.TB, h *adptest.Host, roomID string) string {
	t.Helper()
	r := viewerToken(t, h, roomID)
	expectStatus(t, r, http.StatusCreated)
	var out struct {
		Token     string `json:"token"`
		RoomID    string `json:"room_id"`
		ExpiresAt int64  `json:"expires_at"`
		StreamURL string `json:"stream_url"`
	}
	decodeJSON(t, r.Body, &out)
	if out.RoomID != roomID || out.ExpiresAt <= h.Clock.Ms() || out.ExpiresAt > h.Clock.Ms()+5*60_000 ||
		out.StreamURL != h.URL+"/v1/rooms/"+roomID+"/events/view?token="+out.Token {
		t.Fatalf("viewer token answer %s", r.Body)
	}
	return out.Token
}

// dialViewer opens GET …/events/view?token=…; on a non-200 answer it
// returns the answer and a nil stream.
func dialViewer(t testing.TB, h *adptest.Host, roomID, token string) (*sseStream, *adptest.Response) {
	t.Helper()
	s, r := dialStream(t, h.URL+"/v1/rooms/"+roomID+"/events/view?token="+token, "", 1024)
	if s == nil {
		return nil, r
	}
	if it, ok := s.nextAny(20 * time.Second); !ok || it.Comment != "subscribed" {
		t.Fatalf("first viewer item %+v", it)
	}
	return s, nil
}

func TestViewerTokens(t *testing.T) {
	h := adptest.StartHost(t, node.Config{Rates: highRates()})
	alice, bob := adptest.NewAgent("alice"), adptest.NewAgent("bob")
	pub := h.CreateRoom(t, alice, h.RoomPayload("public"))
	restricted := h.CreateRoom(t, alice, h.RoomPayload("restricted"))
	private := h.CreateRoom(t, alice, h.RoomPayload("private"))

	// Only public rooms this host holds get tokens.
	expectCode(t, viewerToken(t, h, restricted), adp.CodeMembershipRequired)
	expectCode(t, viewerToken(t, h, private), adp.CodeRoomNotFound)
	expectCode(t, viewerToken(t, h, "00000000000000000000"), adp.CodeRoomNotFound)
	expectCode(t, adptest.Do(t, http.MethodPost, h.URL+"/v1/viewer-tokens", "", []byte(`{"room_id":"../x"}`)), adp.CodeInvalidRequest)
	expectCode(t, adptest.Do(t, http.MethodPost, h.URL+"/v1/viewer-tokens", "", []byte(`nope`)), adp.CodeInvalidRequest)

	tok := mustViewerToken(t, h, pub)
	// Tokens are bound to their room, their expiry and this process's key.
	other := mustViewerToken(t, h, h.CreateRoom(t, alice, h.RoomPayload("public")))
	for _, bad := range []string{"", "x", other, strings.Replace(tok, ".", ".9", 1), tok[:len(tok)-2] + "AA",
		h.API.ViewerToken(restricted, h.Clock.Ms()+60_000), h.API.ViewerToken(pub, h.Clock.Ms()+time.Hour.Milliseconds())} {
		_, r := dialViewer(t, h, pub, bad)
		if r == nil {
			t.Fatalf("token %q opened a viewer stream", bad)
		}
		expectCode(t, r, adp.CodeInvalidToken)
	}
	// A restricted room's stream needs membership, even with a well-signed token.
	_, r := dialViewer(t, h, restricted, h.API.ViewerToken(restricted, h.Clock.Ms()+60_000))
	expectCode(t, r, adp.CodeMembershipRequired)

	// The stream carries room.event records, and membership changes (which
	// re-check agent streams) do not end it.
	s, _ := dialViewer(t, h, pub, tok)
	joinRoom(t, h, bob, pub, "speaker")
	h.MustPost(t, bob, pub, "message.create", msg("hello viewers"))
	h.MustPost(t, alice, pub, "room.member.role.update", map[string]any{"member": bob.ID, "role": "observer"})
	h.MustPost(t, bob, pub, "room.leave", map[string]any{})
	h.MustPost(t, alice, pub, "message.create", msg("still here"))
	for i, want := range []string{"room.join", "message.create", "room.member.role.update", "room.leave", "message.create"} {
		if typ, w := eventType(t, json.RawMessage(s.mustNext("room.event").Data)); typ != want || w.Seq != int64(i+2) {
			t.Fatalf("viewer item %d: %s seq %d, want %s seq %d", i, typ, w.Seq, want, i+2)
		}
	}
	// Nothing but records: agent status is not sent to viewers.
	joinRoom(t, h, bob, pub, "speaker")
	s.mustNext("room.event")
	r = sendJSON(t, h, bob, http.MethodPut, "/v1/rooms/"+pub+"/agent-status", map[string]any{"state": "drafting"})
	expectStatus(t, r, http.StatusOK)
	if it, ok := s.next(300 * time.Millisecond); ok {
		t.Fatalf("viewer stream sent %s %s", it.Event, it.Data)
	}

	// Expired tokens open nothing; a stream already open stays open.
	h.Clock.Advance(hostapi.ViewerTokenTTL + time.Second)
	_, r = dialViewer(t, h, pub, tok)
	expectCode(t, r, adp.CodeInvalidToken)
	h.MustPost(t, alice, pub, "message.create", msg("after expiry"))
	if typ, _ := eventType(t, json.RawMessage(s.mustNext("room.event").Data)); typ != "message.create" {
		t.Fatalf("got %s", typ)
	}

	// Closing the room delivers room.close, then ends the stream; no new
	// tokens or streams after that.
	tok = mustViewerToken(t, h, pub)
	h.MustPost(t, alice, pub, "room.close", map[string]any{})
	reason, items := s.waitEnd(20 * time.Second)
	if len(items) != 1 || reason != "room_ended" {
		t.Fatalf("end of stream: reason %q, items %d", reason, len(items))
	}
	if typ, _ := eventType(t, json.RawMessage(items[0].Data)); typ != "room.close" {
		t.Fatalf("last item %s", typ)
	}
	expectCode(t, viewerToken(t, h, pub), adp.CodeRoomEnded)
	_, r = dialViewer(t, h, pub, tok)
	expectCode(t, r, adp.CodeRoomEnded)
	if n := h.Node.Subscribers(); n != 0 {
		t.Fatalf("%d agent subscribers", n)
	}
}

// Viewer streams end with the node, and DrainViewers ends them too.
func TestViewerStreamsDrain(t *testing.T) {
	h := adptest.StartHost(t, node.Config{})
	alice := adptest.NewAgent("alice")
	id := h.CreateRoom(t, alice, h.RoomPayload("public"))
	s1, _ := dialViewer(t, h, id, mustViewerToken(t, h, id))
	h.Node.DrainViewers()
	if reason, _ := s1.waitEnd(20 * time.Second); reason != "shutdown" {
		t.Fatalf("drain: %q", reason)
	}
	s2, _ := dialViewer(t, h, id, mustViewerToken(t, h, id))
	h.Close()
	if reason, _ := s2.waitEnd(20 * time.Second); reason != "" && reason != "shutdown" {
		t.Fatalf("close: %q", reason)
	}
}
