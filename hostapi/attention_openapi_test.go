//go:build e2e

package hostapi_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/adpnode/adpnode/adp"
	"github.com/adpnode/adpnode/internal/adptest"
	"github.com/adpnode/adpnode/node"
)

// The attention endpoints over HTTP, each answer validated against the
// OpenAPI document. Property: hollow and hostile create bodies ({}, null,
// a null filter, NUL, a TTL out of 1 s … 30 days or one that would
// overflow) are 400; every 429 carries Retry-After; after=0 honours limit
// and its continuation (room_after) is documented; a cursor beyond the
// head is 400 with this feed's stream_id and reset_required without one,
// and a foreign stream_id is reset_required whatever its after.
func TestAttentionOpenAPIConformance(t *testing.T) {
	spec := loadSpec(t)
	h := adptest.StartHost(t, node.Config{Rates: highRates()})
	alice, bob := adptest.NewAgent("alice"), adptest.NewAgent("bob")
	do := func(opID, method, path string, a *adptest.Agent, body []byte) *adptest.Response {
		t.Helper()
		r := oaDo(t, method, h.URL+path, tok(h, a), body)
		spec.check(t, opID, r)
		if r.Status == http.StatusTooManyRequests {
			if s, err := strconv.Atoi(r.Header.Get("Retry-After")); err != nil || s < 1 {
				t.Errorf("%s: 429 without a Retry-After of at least 1 s: %q", opID, r.Header.Get("Retry-After"))
			}
		}
		return r
	}
	want := func(r *adptest.Response, status int, code adp.Code) {
		t.Helper()
		if r.Status != status || code != "" && r.ErrorCode() != string(code) {
			t.Fatalf("want %d %s, got %s", status, code, short(r))
		}
	}
	for i := 0; i < 3; i++ {
		p := roomPayload("public", h.Clock.Ms(), time.Hour)
		p["tags"] = []string{"oa"}
		createRoom(t, h, bob, p)
	}
	for _, body := range []string{`{}`, `null`, `{"filter":null}`, `{"filter":{"keyword":"a\u0000"}}`,
		`{"filter":{},"ttl_seconds":0}`, `{"filter":{},"ttl_seconds":2592001}`, `{"filter":{},"ttl_seconds":9223372036}`} {
		want(do("createSubscription", "POST", "/v1/me/subscriptions", alice, []byte(body)), 400, adp.CodeInvalidRequest)
	}
	body := []byte(`{"filter":{"tags":["OA"]},"ttl_seconds":3600}`)
	spec.checkRequest(t, "createSubscription", body)
	r := do("createSubscription", "POST", "/v1/me/subscriptions", alice, body)
	want(r, 201, "")
	sub := decode[struct{ ID string }](t, r).ID
	for i := 1; i < 20; i++ {
		want(do("createSubscription", "POST", "/v1/me/subscriptions", alice, []byte(`{"filter":{"keyword":"x"}}`)), 201, "")
	}
	r = do("createSubscription", "POST", "/v1/me/subscriptions", alice, []byte(`{"filter":{}}`))
	want(r, 429, adp.CodeRateLimited)
	if s, _ := strconv.Atoi(r.Header.Get("Retry-After")); s < 3000 || s > 3600 {
		t.Fatalf("subscription_cap Retry-After %q: the first subscription expires in an hour", r.Header.Get("Retry-After"))
	}
	want(do("listSubscriptions", "GET", "/v1/me/subscriptions", alice, nil), 200, "")

	// The snapshot, one room a page.
	feed := "/v1/me/subscriptions/" + sub + "/feed"
	type page struct {
		StreamID      string `json:"stream_id"`
		NextAfter     int64  `json:"next_after"`
		HasMore       bool   `json:"has_more"`
		ResetRequired bool   `json:"reset_required"`
		NextRoomAfter string `json:"next_room_after"`
		Items         []json.RawMessage
	}
	r = do("subscriptionFeed", "GET", feed+"?after=0&limit=1", alice, nil)
	want(r, 200, "")
	p := decode[page](t, r)
	rooms := len(p.Items)
	for p.HasMore {
		if len(p.Items) != 1 || p.NextRoomAfter == "" {
			t.Fatalf("snapshot page %+v", p)
		}
		r = do("subscriptionFeed", "GET", fmt.Sprintf("%s?after=%d&stream_id=%s&room_after=%s&limit=1", feed, p.NextAfter, p.StreamID, url.QueryEscape(p.NextRoomAfter)), alice, nil)
		want(r, 200, "")
		p = decode[page](t, r)
		rooms += len(p.Items)
	}
	if rooms != 3 {
		t.Fatalf("snapshot of %d rooms, want 3", rooms)
	}
	want(do("subscriptionFeed", "GET", fmt.Sprintf("%s?after=%d&stream_id=%s", feed, p.NextAfter, p.StreamID), alice, nil), 200, "")
	want(do("subscriptionFeed", "GET", fmt.Sprintf("%s?after=%d&stream_id=%s", feed, p.NextAfter+5, p.StreamID), alice, nil), 400, adp.CodeInvalidRequest)
	for _, q := range []string{fmt.Sprintf("?after=%d", p.NextAfter+5), fmt.Sprintf("?after=%d&stream_id=other.%s", p.NextAfter+5, sub)} {
		r = do("subscriptionFeed", "GET", feed+q, alice, nil)
		want(r, 200, "")
		if !decode[page](t, r).ResetRequired {
			t.Fatalf("%s: %s", q, r.Body)
		}
	}
	want(do("subscriptionFeed", "GET", feed+"?stream_id=a%00b", alice, nil), 400, adp.CodeInvalidRequest)
	want(do("mentions", "GET", "/v1/me/mentions?after=0&limit=1", alice, nil), 200, "")
	r = do("mentions", "GET", "/v1/me/mentions?after=7", alice, nil)
	want(r, 200, "")
	if !decode[page](t, r).ResetRequired {
		t.Fatalf("inbox cursor beyond the head without a stream: %s", r.Body)
	}

	// The fifth stream: 429 with Retry-After.
	for i := 0; i < 4; i++ {
		if st, ans := oaStream(t, h.URL+"/v1/me/stream", tok(h, alice)); st == nil {
			t.Fatalf("stream %d: %s", i, short(ans))
		}
	}
	want(do("agentStream", "GET", "/v1/me/stream", alice, nil), 429, adp.CodeRateLimited)
	want(do("deleteSubscription", "DELETE", "/v1/me/subscriptions/"+sub, alice, nil), 204, "")
}
