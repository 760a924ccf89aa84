//go:build e2e

package hostapi_test

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/adpnode/adpnode/adp"
	"github.com/adpnode/adpnode/directory"
	"github.com/adpnode/adpnode/internal/adptest"
	"github.com/adpnode/adpnode/node"
)

type summaryPage struct {
	Result     []directory.Entry `json:"result"`
	NextCursor *string           `json:"next_cursor"`
}

func ids(list []directory.Entry) []string {
	out := make([]string, len(list))
	for i, s := range list {
		out[i] = s.ID
	}
	return out
}

// TestPublicDirectory covers GET /v1/rooms/public: every §18 filter, the
// order (active before scheduled, then recent activity) and cursor paging.
func TestPublicDirectory(t *testing.T) {
	h := adptest.StartHost(t, node.Config{Rates: highRates()})
	a, b := adptest.NewAgent("dir-a"), adptest.NewAgent("dir-b")
	t0 := h.Clock.Ms()
	step := func() { h.Clock.Advance(time.Second) }
	mk := func(by *adptest.Agent, vis string, start int64, d time.Duration, edit map[string]any) string {
		step()
		p := roomPayload(vis, start, d)
		for k, v := range edit {
			p[k] = v
		}
		return createRoom(t, h, by, p)
	}
	// active rooms
	p1 := mk(a, "public", t0, time.Hour, map[string]any{"topic": "Alpha consensus", "tags": []string{"go", "research"}, "language": "en"})
	p2 := mk(b, "public", t0, 20*time.Minute, map[string]any{"topic": "Beta", "agenda": "Discuss CONSENSUS protocols", "tags": []string{"research"}, "language": "de"})
	p4 := mk(b, "restricted", t0, time.Hour, map[string]any{"topic": "Delta", "tags": []string{"security"}, "language": "en"})
	// scheduled rooms
	p3 := mk(a, "public", t0+2*time.Hour.Milliseconds(), time.Hour, map[string]any{"topic": "Gamma", "tags": []string{"Research"}})
	p8 := mk(b, "public", t0+3*time.Hour.Milliseconds(), time.Hour, map[string]any{"topic": "Theta"})
	// never listed by default / at all
	p5 := mk(a, "private", t0, time.Hour, map[string]any{"topic": "Secret consensus", "tags": []string{"research"}})
	p6 := mk(a, "public", h.Clock.Ms(), time.Hour, map[string]any{"topic": "Ended"})
	h.MustPost(t, a, p6, "room.close", map[string]any{})
	p7 := mk(b, "public", t0+2*time.Hour.Milliseconds(), time.Hour, map[string]any{"topic": "Cancelled"})
	h.MustPost(t, b, p7, "room.cancel", map[string]any{})
	// Activity: p1 gets the most recent record.
	step()
	h.MustPost(t, a, p1, "message.create", msg("latest activity"))

	dir := func(q string) summaryPage {
		t.Helper()
		r := get(t, h, nil, "/v1/rooms/public"+q)
		expectStatus(t, r, http.StatusOK)
		p := decode[summaryPage](t, r)
		if p.Result == nil {
			t.Fatalf("directory%s: result must be an array", q)
		}
		return p
	}
	cases := []struct {
		q    string
		want []string
	}{
		// active (most recent activity first), then scheduled (same
		// activity order: p8 created after p3).
		{"", []string{p1, p4, p2, p8, p3}},
		{"?status=active", []string{p1, p4, p2}},
		{"?status=scheduled", []string{p8, p3}},
		{"?status=ended", []string{p6}},
		{"?status=cancelled", []string{p7}},
		{"?status=ended,active", []string{p1, p4, p2, p6}},
		{"?tag=research", []string{p1, p2, p3}},
		{"?tag=RESEARCH", []string{p1, p2, p3}},
		{"?tag=security", []string{p4}},
		{"?keyword=consensus", []string{p1, p2}},
		{"?keyword=delta", []string{p4}},
		{"?creator=" + url.QueryEscape(string(a.ID)), []string{p1, p3}},
		{"?creator=" + url.QueryEscape(string(b.ID)) + "&status=active", []string{p4, p2}},
		{"?language=de", []string{p2}},
		{"?language=EN", []string{p1, p4}},
		{fmt.Sprintf("?starts_after=%d", t0), []string{p8, p3}},
		{fmt.Sprintf("?starts_after=%d", t0+2*time.Hour.Milliseconds()), []string{p8}},
		{fmt.Sprintf("?ends_before=%d", t0+30*time.Minute.Milliseconds()), []string{p2}},
		{fmt.Sprintf("?ends_before=%d&status=active,ended", t0+2*time.Hour.Milliseconds()), []string{p1, p4, p2, p6}},
		{"?tag=research&status=active&language=en", []string{p1}},
		{"?keyword=nothing-matches", []string{}},
	}
	for _, tc := range cases {
		if got := ids(dir(tc.q).Result); !slices.Equal(got, tc.want) {
			t.Errorf("directory%s = %v, want %v", tc.q, got, tc.want)
		}
	}
	for _, s := range dir("?status=active,scheduled,ended,cancelled").Result {
		if s.ID == p5 || s.Visibility == "private" {
			t.Fatal("a private room is listed")
		}
	}
	// Summary fields.
	s := dir("?status=active").Result[0]
	if s.ID != p1 || s.URL != h.URL+"/v1/rooms/"+p1 || s.Status != "active" || s.Topic != "Alpha consensus" || s.Creator != a.ID ||
		s.Seq != 2 || s.Head.Seq != 2 || s.Members != 1 || s.LastActive != h.Clock.Ms() || !slices.Equal(s.Tags, []string{"go", "research"}) {
		t.Errorf("summary %+v", s)
	}

	// Paging: limit 2 walks the default order; next_cursor only while more follow.
	var walked []string
	q := "?limit=2"
	for pages := 0; ; pages++ {
		if pages > 5 {
			t.Fatal("directory cursor walk does not end")
		}
		p := dir(q)
		if len(p.Result) > 2 {
			t.Fatalf("page of %d", len(p.Result))
		}
		walked = append(walked, ids(p.Result)...)
		if p.NextCursor == nil {
			break
		}
		q = "?limit=2&cursor=" + url.QueryEscape(*p.NextCursor)
	}
	if want := []string{p1, p4, p2, p8, p3}; !slices.Equal(walked, want) {
		t.Errorf("paged walk %v, want %v", walked, want)
	}
	if p := dir("?limit=5"); p.NextCursor != nil || len(p.Result) != 5 {
		t.Errorf("limit equal to the count must have no cursor: %+v", p.NextCursor)
	}
	if p := dir("?limit=4"); p.NextCursor == nil {
		t.Error("limit below the count must have a cursor")
	}
	// Filters hold across pages.
	p := dir("?tag=research&limit=1")
	next := dir("?tag=research&limit=1&cursor=" + url.QueryEscape(*p.NextCursor))
	if ids(p.Result)[0] != p1 || ids(next.Result)[0] != p2 || next.NextCursor == nil {
		t.Errorf("filtered paging %v %v", ids(p.Result), ids(next.Result))
	}
	for _, bad := range []string{"?status=open", "?creator=bob", "?limit=0", "?limit=101", "?cursor=@@", "?starts_after=x", "?ends_before=-5",
		"?cursor=eyJyIjo5fQ", // {"r":9}: no such status rank
		"?cursor=bnVsbA",     // null
		"?cursor=" + strings.Repeat("A", 2000),
		"?scope=global"} {
		expectCode(t, get(t, h, nil, "/v1/rooms/public"+bad), adp.CodeInvalidRequest)
	}
}

// TestMyRooms covers GET /v1/me/rooms with status, membership, limit and
// cursor.
func TestMyRooms(t *testing.T) {
	h := adptest.StartHost(t, node.Config{Rates: highRates()})
	me, other := adptest.NewAgent("me"), adptest.NewAgent("me-other")
	now := h.Clock.Ms()
	created := createRoom(t, h, me, roomPayload("public", now, time.Hour))
	joined := createRoom(t, h, other, roomPayload("public", now, time.Hour))
	joinRoom(t, h, me, joined, "observer")
	left := createRoom(t, h, other, roomPayload("public", now, time.Hour))
	joinRoom(t, h, me, left, "speaker")
	h.MustPost(t, me, left, "room.leave", map[string]any{})
	pending := createRoom(t, h, other, roomPayload("restricted", now+time.Hour.Milliseconds(), time.Hour))
	createJR(t, h, me, pending, "speaker")
	unrelated := createRoom(t, h, other, roomPayload("public", now, time.Hour))
	_ = unrelated
	createdPrivate := createRoom(t, h, me, roomPayload("private", now, time.Hour))

	mine := func(q string) summaryPage {
		t.Helper()
		r := get(t, h, me, "/v1/me/rooms"+q)
		expectStatus(t, r, http.StatusOK)
		return decode[summaryPage](t, r)
	}
	all := mine("")
	byID := map[string]directory.Entry{}
	for _, s := range all.Result {
		byID[s.ID] = s
	}
	if len(all.Result) != 5 || all.NextCursor != nil {
		t.Fatalf("me/rooms: %v", ids(all.Result))
	}
	check := func(id, membership string, role adp.Role, status string) {
		t.Helper()
		s, ok := byID[id]
		if !ok {
			t.Fatalf("room %s missing", id)
		}
		if s.Membership != membership || s.Role != role || string(s.Status) != status {
			t.Errorf("room %s: membership %q role %q status %q", id, s.Membership, s.Role, s.Status)
		}
	}
	check(created, "active", adp.RoleModerator, "active")
	check(createdPrivate, "active", adp.RoleModerator, "active")
	check(joined, "active", adp.RoleObserver, "active")
	check(left, "former", "", "active")
	check(pending, "pending", "", "scheduled")
	if _, ok := byID[unrelated]; ok {
		t.Error("an unrelated room is listed")
	}
	set := func(p summaryPage) []string {
		out := ids(p.Result)
		slices.Sort(out)
		return out
	}
	sorted := func(v ...string) []string { slices.Sort(v); return v }
	for q, want := range map[string][]string{
		"?membership=creator":                 sorted(created, createdPrivate),
		"?membership=active":                  sorted(created, createdPrivate, joined),
		"?membership=former":                  {left},
		"?membership=pending":                 {pending},
		"?status=scheduled":                   {pending},
		"?status=active":                      sorted(created, createdPrivate, joined, left),
		"?status=active&membership=former":    {left},
		"?status=scheduled&membership=active": {},
	} {
		if got := set(mine(q)); !slices.Equal(got, want) {
			t.Errorf("me/rooms%s = %v, want %v", q, got, want)
		}
	}
	// Paging.
	var walked []string
	q := "?limit=2"
	var sizes []int
	for pages := 0; ; pages++ {
		if pages > 5 {
			t.Fatal("me/rooms cursor walk does not end")
		}
		p := mine(q)
		sizes = append(sizes, len(p.Result))
		walked = append(walked, ids(p.Result)...)
		if p.NextCursor == nil {
			break
		}
		q = "?limit=2&cursor=" + url.QueryEscape(*p.NextCursor)
	}
	if !slices.Equal(sizes, []int{2, 2, 1}) || !slices.Equal(walked, ids(all.Result)) {
		t.Errorf("paged walk %v (sizes %v), want %v", walked, sizes, ids(all.Result))
	}
	if p := mine("?limit=5"); p.NextCursor != nil {
		t.Error("limit equal to the count must have no cursor")
	}
	// Another agent sees its own rooms only.
	theirs := decode[summaryPage](t, get(t, h, other, "/v1/me/rooms?membership=creator"))
	if len(theirs.Result) != 4 {
		t.Errorf("other's rooms %v", ids(theirs.Result))
	}
	expectCode(t, get(t, h, me, "/v1/me/rooms?membership=owner"), adp.CodeInvalidRequest)
	expectCode(t, get(t, h, me, "/v1/me/rooms?status=open"), adp.CodeInvalidRequest)
	expectCode(t, get(t, h, me, "/v1/me/rooms?limit=0"), adp.CodeInvalidRequest)
	expectCode(t, get(t, h, nil, "/v1/me/rooms"), adp.CodeInvalidToken)
}
