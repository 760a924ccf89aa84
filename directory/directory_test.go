package directory_test

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"unicode"

	"github.com/adpnode/adpnode/adp"
	"github.com/adpnode/adpnode/adp/identity"
	"github.com/adpnode/adpnode/adp/room"
	"github.com/adpnode/adpnode/directory"
)

func ids(list []directory.Entry) []string {
	out := make([]string, len(list))
	for i, e := range list {
		out[i] = e.ID
	}
	return out
}

// sample is a small directory: three active rooms with different
// activity, two scheduled, one ended, one cancelled, one private.
func sample() []directory.Entry {
	return []directory.Entry{
		{ID: "a1", Host: "h1", Status: room.StatusActive, Topic: "Alpha consensus", Tags: []string{"go", "research"}, Language: "en", LastActive: 30, StartTime: 10, EndTime: 100, Creator: "c1", Visibility: room.Public},
		{ID: "a2", Host: "h2", Status: room.StatusActive, Topic: "Beta", Agenda: "Discuss CONSENSUS", Tags: []string{"Research"}, Language: "de", LastActive: 20, StartTime: 10, EndTime: 50, Creator: "c2", Visibility: room.Public},
		{ID: "a3", Host: "h1", Status: room.StatusActive, Topic: "Delta", Tags: []string{"security"}, Language: "EN", LastActive: 20, StartTime: 5, EndTime: 100, Creator: "c2", Visibility: room.Restricted},
		{ID: "s1", Host: "h1", Status: room.StatusScheduled, Topic: "Gamma", Tags: []string{"research"}, StartTime: 200, EndTime: 300, Creator: "c1", Visibility: room.Public},
		{ID: "s2", Host: "h2", Status: room.StatusScheduled, Topic: "Theta", StartTime: 200, EndTime: 300, Creator: "c1", Visibility: room.Public},
		{ID: "e1", Host: "h1", Status: room.StatusEnded, Topic: "Ended", LastActive: 99, StartTime: 1, EndTime: 2, Visibility: room.Public},
		{ID: "x1", Host: "h1", Status: room.StatusCancelled, Topic: "Cancelled", Visibility: room.Public},
		{ID: "p1", Host: "h1", Status: room.StatusActive, Topic: "Secret consensus", LastActive: 100, Visibility: room.Private},
	}
}

func TestFilterMatch(t *testing.T) {
	cases := []struct {
		name string
		f    directory.Filter
		want []string // in the sample's order
	}{
		{"default: active and scheduled", directory.Filter{}, []string{"a1", "a2", "a3", "s1", "s2", "p1"}},
		{"status list", directory.Filter{Status: []room.Status{room.StatusEnded, room.StatusCancelled}}, []string{"e1", "x1"}},
		{"tag, case-insensitive", directory.Filter{Tags: []string{"RESEARCH"}}, []string{"a1", "a2", "s1"}},
		{"every tag", directory.Filter{Tags: []string{"research", "go"}}, []string{"a1"}},
		{"keyword in topic or agenda", directory.Filter{Keyword: "Consensus"}, []string{"a1", "a2", "p1"}},
		{"keyword in tags", directory.Filter{Keyword: "secur"}, []string{"a3"}},
		{"creator, exact", directory.Filter{Creator: "c2"}, []string{"a2", "a3"}},
		{"language, case-insensitive", directory.Filter{Language: "en"}, []string{"a1", "a3"}},
		{"host, case-insensitive", directory.Filter{Host: "H2"}, []string{"a2", "s2"}},
		{"starts after (exclusive)", directory.Filter{StartsAfter: 5}, []string{"a1", "a2", "s1", "s2"}},
		{"ends before (exclusive)", directory.Filter{EndsBefore: 100}, []string{"a2", "p1"}},
		{"combined", directory.Filter{Tags: []string{"research"}, Status: []room.Status{room.StatusScheduled}, Creator: "c1"}, []string{"s1"}},
		{"unknown status matches nothing", directory.Filter{Status: []room.Status{"open"}}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var got []string
			for _, e := range sample() {
				if c.f.Match(&e) {
					got = append(got, e.ID)
				}
				if c.f.Match(&e) != c.f.MatchText(&e, directory.Haystack(&e)) {
					t.Errorf("%s: Match and MatchText disagree", e.ID)
				}
			}
			if !slices.Equal(got, c.want) {
				t.Errorf("got %v, want %v", got, c.want)
			}
		})
	}
}

func TestSortOrder(t *testing.T) {
	list := sample()
	directory.Sort(list)
	// Active by recent activity (a2 before a3 on equal activity: a3
	// starts earlier? no: earlier start first, so a3 then a2), then
	// scheduled (same activity and start: host, then ID), ended,
	// cancelled.
	want := []string{"p1", "a1", "a3", "a2", "s1", "s2", "e1", "x1"}
	if got := ids(list); !slices.Equal(got, want) {
		t.Fatalf("order %v, want %v", got, want)
	}
	for i := range list {
		for j := range list {
			if i != j && directory.Less(&list[i], &list[j]) == directory.Less(&list[j], &list[i]) {
				t.Fatalf("not a strict total order on %s, %s", list[i].ID, list[j].ID)
			}
		}
	}
}

// TestPageWalk walks every limit over the sample: the pages concatenate
// to the sorted, filtered list, each entry once, the last page has no
// cursor, and the input is not modified.
func TestPageWalk(t *testing.T) {
	all := directory.Query{Filter: directory.Filter{Status: []room.Status{room.StatusActive, room.StatusScheduled, room.StatusEnded, room.StatusCancelled}}}
	for _, q := range []directory.Query{{}, all, {Filter: directory.Filter{Tags: []string{"research"}}}} {
		list := sample()
		before := ids(list)
		whole, next, err := directory.Page(list, directory.Query{Filter: q.Filter, Limit: 100})
		if err != nil || next != "" {
			t.Fatalf("whole: %v %q", err, next)
		}
		for limit := 1; limit <= len(list)+1; limit++ {
			var got []string
			q.Limit, q.Cursor = limit, ""
			for pages := 0; ; pages++ {
				if pages > len(list) {
					t.Fatal("the cursor walk does not end")
				}
				page, next, err := directory.Page(list, q)
				if err != nil {
					t.Fatal(err)
				}
				if len(page) > limit || next != "" && len(page) != limit {
					t.Fatalf("limit %d: a page of %d, next %q", limit, len(page), next)
				}
				got = append(got, ids(page)...)
				if next == "" {
					break
				}
				q.Cursor = next
			}
			if !slices.Equal(got, ids(whole)) {
				t.Errorf("limit %d: walked %v, want %v", limit, got, ids(whole))
			}
		}
		if !slices.Equal(ids(list), before) {
			t.Fatal("Page reordered its input")
		}
	}
	// A limit equal to the count has no cursor; one below has.
	if _, next, _ := directory.Page(sample(), directory.Query{Limit: 6}); next != "" {
		t.Error("limit equal to the count must have no cursor")
	}
	if _, next, _ := directory.Page(sample(), directory.Query{Limit: 5}); next == "" {
		t.Error("limit below the count must have a cursor")
	}
}

// TestCursorSurvivesChanges: a cursor is a position, not an index, so a
// room that appears before it or disappears does not shift the next page.
func TestCursorSurvivesChanges(t *testing.T) {
	list := sample()
	page, next, err := directory.Page(list, directory.Query{Limit: 2})
	if err != nil || !slices.Equal(ids(page), []string{"p1", "a1"}) {
		t.Fatalf("%v %v", ids(page), err)
	}
	list = append(list[1:], directory.Entry{ID: "new", Status: room.StatusActive, LastActive: 1000}) // a1 gone, a newer room
	page, _, err = directory.Page(list, directory.Query{Limit: 2, Cursor: next})
	if err != nil || !slices.Equal(ids(page), []string{"a3", "a2"}) {
		t.Fatalf("after changes: %v %v", ids(page), err)
	}
}

// TestCursorWireFormat: the cursor format is stable (cursors issued before
// an upgrade or a restart stay valid).
func TestCursorWireFormat(t *testing.T) {
	_, next, err := directory.Page(sample(), directory.Query{Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	b, err := base64.RawURLEncoding.DecodeString(next)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != `{"r":0,"a":100,"s":0,"h":"h1","i":"p1"}` {
		t.Fatalf("cursor JSON %s", b)
	}
	old := base64.RawURLEncoding.EncodeToString([]byte(`{"r":0,"a":30,"s":10,"h":"h1","i":"a1"}`))
	page, _, err := directory.Page(sample(), directory.Query{Limit: 1, Cursor: old})
	if err != nil || !slices.Equal(ids(page), []string{"a3"}) {
		t.Fatalf("old cursor: %v %v", ids(page), err)
	}
}

func TestHostileCursors(t *testing.T) {
	enc := func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
	bad := []string{
		"@@", "====", "e30=", // not unpadded base64url
		enc(`[]`), enc(`null`), enc(`"x"`), enc(`{"r":0`),
		enc(`{"r":4,"i":"a"}`), enc(`{"r":-1,"i":"a"}`), enc(`{"r":"0"}`),
		enc(`{"r":0,"a":1e99}`), enc(`{"r":0,"x":1}`),
		enc(`{"r":0}{"r":0}`), enc(`{"r":0} x`),
		strings.Repeat("A", directory.MaxCursorLen+1),
		enc(`{"r":0,"h":"` + strings.Repeat("h", 2000) + `"}`),
	}
	for _, c := range bad {
		_, _, err := directory.Page(sample(), directory.Query{Limit: 5, Cursor: c})
		var ae *adp.Error
		if !errors.As(err, &ae) || ae.Code != adp.CodeInvalidRequest || ae.Data["reason"] != "cursor" {
			t.Errorf("cursor %.40q: got %v, want invalid_request/cursor", c, err)
		}
	}
	// Trailing whitespace inside the JSON is harmless.
	if _, _, err := directory.Page(sample(), directory.Query{Limit: 5, Cursor: enc(`{"r":1} `)}); err != nil {
		t.Errorf("valid cursor with trailing space: %v", err)
	}
}

func TestMerge(t *testing.T) {
	local := []directory.Entry{
		{ID: "l1", Host: "me", Visibility: room.Public},
		{ID: "lp", Host: "me", Visibility: room.Private},
		{ID: "both", Host: "me", Topic: "local", Visibility: room.Restricted},
	}
	remote := []directory.Entry{
		{ID: "r1", Host: "them", Visibility: room.Public},
		{ID: "both", Host: "them", Topic: "remote claim", Visibility: room.Public},
		{ID: "r1", Host: "other", Visibility: room.Public},
		{ID: "rp", Host: "them", Visibility: room.Private},
	}
	got := directory.Merge(local, remote)
	if want := []string{"l1", "both", "r1"}; !slices.Equal(ids(got), want) {
		t.Fatalf("merge %v, want %v", ids(got), want)
	}
	for _, e := range got {
		if e.Verified == nil || !*e.Verified {
			t.Errorf("%s: not marked verified", e.ID)
		}
	}
	if got[1].Topic != "local" || got[2].Host != "them" {
		t.Errorf("the local entry, then the first remote one, must win: %+v", got)
	}
	if local[0].Verified != nil || remote[0].Verified != nil {
		t.Error("Merge modified its input")
	}
	if got := directory.Merge(nil, nil); got == nil || len(got) != 0 {
		t.Errorf("empty merge: %#v", got)
	}
}

func TestParseScope(t *testing.T) {
	cases := []struct {
		in        string
		federates bool
		want      directory.Scope
		bad       bool
	}{
		{"", true, directory.ScopeFederated, false},
		{"", false, directory.ScopeLocal, false},
		{"federated", false, directory.ScopeLocal, false},
		{"local", true, directory.ScopeLocal, false},
		{"LOCAL", true, "", true},
		{"global", true, "", true},
	}
	for _, c := range cases {
		got, err := directory.ParseScope(c.in, c.federates)
		if c.bad {
			if adp.CodeOf(err) != adp.CodeInvalidRequest {
				t.Errorf("%q: %v, want invalid_request", c.in, err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%q federates=%v: %q %v, want %q", c.in, c.federates, got, err, c.want)
		}
	}
}

// TestEntryJSON pins the entry's JSON names: they are in signed index
// announcements and in the HTTP API.
func TestEntryJSON(t *testing.T) {
	v := true
	e := directory.Entry{ID: "i", URL: "u", Host: "h", Status: room.StatusActive, Topic: "t", Agenda: "a", Visibility: room.Public,
		Creator: identity.AgentID("c"), StartTime: 1, EndTime: 2, Tags: []string{"x"}, Language: "en", Seq: 3, Members: 4, LastActive: 5,
		Verified: &v, Role: adp.RoleModerator, Membership: "active"}
	b, _ := json.Marshal(e)
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	want := []string{"agenda", "creator", "end_time", "head", "host", "id", "language", "last_active", "members", "membership", "role", "seq", "start_time", "status", "tags", "topic", "url", "verified", "visibility"}
	if !reflect.DeepEqual(keys, want) {
		t.Fatalf("JSON keys %v, want %v", keys, want)
	}
	var back directory.Entry
	if err := json.Unmarshal(b, &back); err != nil || !reflect.DeepEqual(back, e) {
		t.Fatalf("round trip: %+v %v", back, err)
	}
}

// TestPageCost bounds what one page allocates: the slice of matches and
// the cursor, a fixed number of allocations whatever the directory's size
// (no copy per entry, no per-comparison garbage in the sort).
func TestPageCost(t *testing.T) {
	allocs := func(n int) float64 {
		list := make([]directory.Entry, n)
		for i := range list {
			list[i] = directory.Entry{ID: fmt.Sprintf("r%05d", i), Status: room.StatusActive, LastActive: int64(i % 97)}
		}
		// Averaged over many runs: under -race a stray runtime allocation in
		// one run must not read as growth with the list.
		return testing.AllocsPerRun(50, func() {
			if _, _, err := directory.Page(list, directory.Query{Limit: 20}); err != nil {
				t.Fatal(err)
			}
		})
	}
	small, large := allocs(100), allocs(2000)
	if large > small+2 || large > 20 {
		t.Errorf("a page of 100 entries allocates %.0f times, of 2000 %.0f times", small, large)
	}
}

// Property: Fold is strings.EqualFold as a function: every rune folds to
// the same rune as every member of its simple case-folding orbit, and to a
// rune EqualFold holds equal to it (so Fold(a) == Fold(b) exactly when
// EqualFold(a, b)).
func TestFoldIsEqualFold(t *testing.T) {
	for r := rune(0); r <= unicode.MaxRune; r++ {
		if r >= 0xD800 && r <= 0xDFFF {
			continue
		}
		f := directory.Fold(string(r))
		if !strings.EqualFold(f, string(r)) {
			t.Fatalf("Fold(%U) = %q, which EqualFold holds apart", r, f)
		}
		for o := unicode.SimpleFold(r); o != r; o = unicode.SimpleFold(o) {
			if g := directory.Fold(string(o)); g != f {
				t.Fatalf("Fold(%U) = %q but Fold(%U) = %q", r, f, o, g)
			}
		}
	}
	if directory.Fold("Ο ΛΌΓΟΣ") != directory.Fold("ο λόγος") || directory.Fold("İ") == directory.Fold("i") {
		t.Fatal("sigma or dotted I")
	}
}
