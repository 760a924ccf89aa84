//go:build e2e

package hostapi_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/adpnode/adpnode/internal/adptest"
	"github.com/adpnode/adpnode/node"
)

// roomSecrets are words of a private room's contract that no outsider may
// read anywhere.
var roomSecrets = []string{"Secret topic", "secret agenda", "secret-tag", `"language"`, `"head"`, `"seq"`, `"last_active"`, `"members"`}

func noSecrets(t *testing.T, what string, body []byte) {
	t.Helper()
	for _, s := range roomSecrets {
		if strings.Contains(string(body), s) {
			t.Errorf("%s leaks %s: %s", what, s, body)
		}
	}
}

// An outsider who knows a private room's ID applies and then reads
// /v1/me/rooms and its request; a banned member reads /v1/me/rooms after
// the topic changed. Both learn only their own standing, before and after
// a restart on the same data dir.
func TestAttackPrivateRoomLeaks(t *testing.T) {
	clock := adptest.NewClock()
	h := adptest.StartHostAt(t, node.Config{DataDir: t.TempDir()}, clock)
	c, mallory, banned := adptest.NewAgent("pl-creator"), adptest.NewAgent("pl-mallory"), adptest.NewAgent("pl-banned")
	p := roomPayload("private", h.Clock.Ms(), time.Hour)
	p["topic"], p["agenda"], p["tags"], p["language"] = "Secret topic", "secret agenda", []string{"secret-tag"}, "en"
	id := createRoom(t, h, c, p)
	jr := createJR(t, h, banned, id, "speaker")
	review(t, h, c, id, jr, "approve", "speaker")
	h.MustPost(t, banned, id, "room.join", map[string]any{"role": "speaker", "request_id": jr.id()})
	h.MustPost(t, c, id, "room.member.remove", map[string]any{"member": string(banned.ID), "ban": true})
	h.MustPost(t, c, id, "room.update", map[string]any{"topic": "Secret topic renamed"})

	mr := sendJSON(t, h, mallory, http.MethodPost, "/v1/rooms/"+id+"/join-requests", map[string]any{"role": "speaker"})
	expectStatus(t, mr, http.StatusCreated)
	noSecrets(t, "join request answer", mr.Body)
	mjr := decode[jrView](t, mr)

	check := func(h *adptest.Host) {
		t.Helper()
		for _, a := range []*adptest.Agent{mallory, banned} {
			r := get(t, h, a, "/v1/me/rooms")
			expectStatus(t, r, http.StatusOK)
			noSecrets(t, a.Name+" /v1/me/rooms", r.Body)
			page := decode[struct {
				Result []map[string]any `json:"result"`
			}](t, r)
			if len(page.Result) != 1 || page.Result[0]["id"] != id {
				t.Fatalf("%s: me/rooms %s", a.Name, r.Body)
			}
			if a == mallory {
				want := fmt.Sprintf(`{"id":%q,"join_request":{"id":%q,"status":"pending"},"membership":"pending"}`, id, mjr.id())
				if got := string(mustJSON(t, page.Result[0])); got != want {
					t.Errorf("pending applicant sees %s, want %s", got, want)
				}
			} else if page.Result[0]["membership"] != "former" {
				t.Errorf("banned member: %s", r.Body)
			}
			// A status filter would reveal the room's status: withheld rooms
			// never match one.
			for _, st := range []string{"active", "scheduled", "ended", "cancelled"} {
				if r := get(t, h, a, "/v1/me/rooms?status="+st); strings.Contains(string(r.Body), id) {
					t.Errorf("%s: status=%s reveals the room: %s", a.Name, st, r.Body)
				}
			}
			r = get(t, h, a, "/v1/rooms/"+id+"/join-requests/"+mjr.id())
			if a == mallory {
				expectStatus(t, r, http.StatusOK)
				noSecrets(t, "GET join request", r.Body)
			}
			for _, path := range []string{"", "/events", "/members", "/agent-status", "/archive", "/join-requests"} {
				if r := get(t, h, a, "/v1/rooms/"+id+path); r.Status == http.StatusOK {
					t.Errorf("%s reads %s: %s", a.Name, path, r.Body)
				} else {
					noSecrets(t, path, r.Body)
				}
			}
		}
		// The creator still sees the full summary.
		if r := get(t, h, c, "/v1/me/rooms"); !strings.Contains(string(r.Body), "Secret topic renamed") {
			t.Errorf("creator's me/rooms: %s", r.Body)
		}
	}
	check(h)
	h = h.Restart(t)
	check(h)

	// A rejected applicant is not listed at all.
	review(t, h, c, id, mjr, "reject", "")
	if r := get(t, h, mallory, "/v1/me/rooms"); strings.Contains(string(r.Body), id) {
		t.Errorf("rejected applicant: %s", r.Body)
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// One agent posting 300 join requests to a public room gets 10 an
// hour; the stored requests per agent and room are capped, the cap
// survives a restart, and terminal requests make room again.
func TestAttackJoinRequestFlood(t *testing.T) {
	clock := adptest.NewClock()
	h := adptest.StartHostAt(t, node.Config{DataDir: t.TempDir(), JoinRequestTTL: time.Hour}, clock)
	c, flood, honest := adptest.NewAgent("jf-creator"), adptest.NewAgent("jf-flood"), adptest.NewAgent("jf-honest")
	p := roomPayload("public", h.Clock.Ms(), 48*time.Hour)
	id := createRoom(t, h, c, p)
	post := func(h *adptest.Host, a *adptest.Agent) *adptest.Response {
		return sendJSON(t, h, a, http.MethodPost, "/v1/rooms/"+id+"/join-requests", map[string]any{"role": "speaker"})
	}
	created, limited := 0, 0
	for i := 0; i < 300; i++ {
		switch r := post(h, flood); r.Status {
		case http.StatusCreated:
			created++
		case http.StatusTooManyRequests:
			limited++
			if r.ErrorCode() != "rate_limited" {
				t.Fatalf("flood %d: %s", i, r)
			}
		default:
			t.Fatalf("flood %d: %s", i, r)
		}
	}
	if created != 10 || limited != 290 {
		t.Fatalf("300 requests: %d created, %d rate limited; want 10 and 290", created, limited)
	}
	expectStatus(t, post(h, honest), http.StatusCreated)

	// An hour later the quota allows more, up to the stored cap: the
	// auto-approved requests are live (not terminal) until they expire.
	stored := func(h *adptest.Host) int {
		r := get(t, h, c, "/v1/rooms/"+id+"/join-requests")
		return strings.Count(string(r.Body), string(flood.ID))
	}
	clock.Advance(30 * time.Minute)
	for i := 0; i < 10; i++ {
		post(h, flood)
	}
	clock.Advance(31 * time.Minute) // the first 10 have expired now
	for i := 0; i < 10; i++ {
		post(h, flood)
	}
	if n := stored(h); n > node.MaxStoredJoinRequests {
		t.Fatalf("%d requests stored for one agent, cap %d", n, node.MaxStoredJoinRequests)
	}
	// Restart: what is stored is still capped, and the quota does not
	// reset into a flood (the cap holds).
	h = h.Restart(t)
	for i := 0; i < 30; i++ {
		post(h, flood)
	}
	if n := stored(h); n > node.MaxStoredJoinRequests {
		t.Fatalf("after restart: %d requests stored for one agent, cap %d", n, node.MaxStoredJoinRequests)
	}
	expectStatus(t, get(t, h, nil, "/healthz"), http.StatusOK)
	d := decode[map[string]any](t, get(t, h, nil, "/.well-known/agent-discourse"))
	if v := d["limits"].(map[string]any)["join_requests_per_hour"]; v != float64(10) {
		t.Fatalf("discovery join_requests_per_hour = %v", v)
	}
}
