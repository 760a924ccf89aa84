package attention

import (
	"strings"
	"testing"

	"github.com/adpnode/adpnode/adp"
	"github.com/adpnode/adpnode/directory"
)

// Property: a create request is a JSON object with a filter object; null,
// {}, a null filter, a TTL outside 1 s … 30 days (a huge one that would
// overflow a Duration included) and control characters (NUL) in a filter
// string are refused with invalid_request, never stored.
func TestCreateRefusesHollowAndHostileBodies(t *testing.T) {
	cases := map[string]string{
		"null":               `null`,
		"empty object":       `{}`,
		"null filter":        `{"filter":null}`,
		"string":             `"x"`,
		"ttl zero":           `{"filter":{},"ttl_seconds":0}`,
		"ttl over 30 days":   `{"filter":{},"ttl_seconds":2592001}`,
		"ttl overflow":       `{"filter":{},"ttl_seconds":9223372036}`,
		"ttl max int":        `{"filter":{},"ttl_seconds":9223372036854775807}`,
		"nul keyword":        `{"filter":{"keyword":"a\u0000b"}}`,
		"nul tag":            `{"filter":{"tags":["a\u0000"]}}`,
		"nul host":           `{"filter":{"host":"\u0000"}}`,
		"nul language":       `{"filter":{"language":"en\u0000"}}`,
		"control in keyword": `{"filter":{"keyword":"a\u001bb"}}`,
		"ttl negative":       `{"filter":{},"ttl_seconds":-5}`,
	}
	for name, body := range cases {
		_, err := ParseCreate([]byte(body))
		if adp.CodeOf(err) != adp.CodeInvalidRequest {
			t.Errorf("%s: %v, want invalid_request", name, err)
		}
	}
	for _, ok := range []string{`{"filter":{}}`, `{"filter":{},"ttl_seconds":1}`, `{"filter":{},"ttl_seconds":2592000}`} {
		if _, err := ParseCreate([]byte(ok)); err != nil {
			t.Errorf("%s refused: %v", ok, err)
		}
	}
	// Create checks again, in seconds (a request built in Go skips ParseCreate).
	f := start(t, nil)
	for _, ttl := range []int64{-1, 9223372036, 1 << 62, 2592001} {
		if _, err := f.a.Create(alice, &CreateRequest{TTLSeconds: ttl}); adp.CodeOf(err) != adp.CodeInvalidRequest {
			t.Errorf("Create ttl %d: %v", ttl, err)
		}
	}
	if l := f.a.List(alice); len(l) != 0 {
		t.Fatalf("refused requests stored: %+v", l)
	}
}

// Property: indexing and matching use one case fold, the one of
// strings.EqualFold: a filter matches a room in Greek whatever the case and
// whichever sigma (Σ, σ, final ς) either side writes, both when the
// subscription is created and when a room changes later (the tag index).
func TestOneCaseFoldGreekSigma(t *testing.T) {
	if !strings.EqualFold("λόγος", "ΛΌΓΟΣ") || directory.Fold("λόγος") != directory.Fold("ΛΌΓΟΣ") {
		t.Fatalf("Fold(λόγος)=%q Fold(ΛΌΓΟΣ)=%q", directory.Fold("λόγος"), directory.Fold("ΛΌΓΟΣ"))
	}
	if directory.Fold("İ") == directory.Fold("i") || strings.EqualFold("İ", "i") {
		t.Fatal("İ folds onto i, which EqualFold keeps apart")
	}
	f := start(t, nil)
	byTag := f.create(alice, `{"filter":{"tags":["λόγος"]}}`)
	byKeyword := f.create(alice, `{"filter":{"keyword":"ΛΌΓΟΣ"}}`)
	// Rooms that appear after the subscriptions: the tag index is asked.
	f.w.put(directory.Entry{ID: roomID(1), Topic: "περί του λόγου", Tags: []string{"ΛΌΓΟΣ"}})
	f.touch(roomID(1))
	f.w.put(directory.Entry{ID: roomID(2), Topic: "ο λόγος"})
	f.touch(roomID(2))
	if got := kinds(items(f.feed(alice, byTag.ID, Cursor{After: 0}, 0))); got != "01/appeared" {
		t.Fatalf("tag λόγος vs room tag ΛΌΓΟΣ: %q", got)
	}
	if got := kinds(items(f.feed(alice, byKeyword.ID, Cursor{After: 0}, 0))); got != "01/appeared 02/appeared" {
		t.Fatalf("keyword ΛΌΓΟΣ vs topic ο λόγος: %q", got)
	}
	// And at creation, and after a restart (the index is rebuilt).
	f.restart()
	again := f.create(bob, `{"filter":{"tags":["ΛΌΓΟΣ"],"keyword":"λόγοσ"}}`)
	if got := kinds(items(f.feed(bob, again.ID, Cursor{After: 0}, 0))); got != "01/appeared" {
		t.Fatalf("at creation: %q", got)
	}
	f.w.put(directory.Entry{ID: roomID(3), Topic: "λόγος", Tags: []string{"λόγος"}})
	f.touch(roomID(3))
	if got := kinds(items(f.feed(alice, byTag.ID, Cursor{After: 0}, 0))); got != "01/appeared 03/appeared" {
		t.Fatalf("after restart: %q", got)
	}
}

// Property: every refusal with rate_limited says when to retry
// (data.retry_after_ms, which becomes Retry-After).
func TestCapsSayWhenToRetry(t *testing.T) {
	f := start(t, func(c *Config) { c.MaxSubscriptions = 1; c.MaxWatchers = 1 })
	f.create(alice, `{"filter":{},"ttl_seconds":60}`)
	_, err := f.a.Create(alice, &CreateRequest{})
	if e := adp.AsError(err); e == nil || e.Code != adp.CodeRateLimited || e.Data["retry_after_ms"] != int64(60_000) {
		t.Fatalf("subscription cap: %+v", e)
	}
	w, err := f.a.Watch(alice)
	if err != nil {
		t.Fatal(err)
	}
	defer f.a.Unwatch(w)
	_, err = f.a.Watch(alice)
	if e := adp.AsError(err); e == nil || e.Code != adp.CodeRateLimited || e.Data["retry_after_ms"] == nil {
		t.Fatalf("stream cap: %+v", e)
	}
}

// Property: versions per (stream, room) never go back. A room that stops
// matching and matches again continues above its last version, across a
// restart on the same data dir too, and the rebuild (after=0) carries the
// room's latest version.
func TestVersionsNeverGoBack(t *testing.T) {
	f := start(t, nil)
	s := f.create(alice, `{"filter":{"tags":["go"]}}`)
	set := func(tags ...string) {
		f.w.put(directory.Entry{ID: roomID(1), Topic: "t", Tags: tags})
		f.touch(roomID(1))
	}
	set("go")      // appeared (seq 1)
	set("go", "x") // changed
	set("rust")    // unavailable
	set("go")      // appeared again
	f.restart()
	set("rust")    // unavailable again, after a restart
	set("go", "y") // appeared again
	log := items(f.feed(alice, s.ID, Cursor{After: 1}, 0))
	want := "01/changed 01/unavailable:no_longer_matching 01/appeared 01/unavailable:no_longer_matching 01/appeared"
	if kinds(log) != want {
		t.Fatalf("log %q, want %q", kinds(log), want)
	}
	last := int64(1) // the first item's
	for _, it := range log {
		if it.Version <= last {
			t.Fatalf("version %d after %d: %q", it.Version, last, kinds(log))
		}
		last = it.Version
	}
	snap := items(f.feed(alice, s.ID, Cursor{}, 0))
	if len(snap) != 1 || snap[0].Version != last {
		t.Fatalf("rebuild %+v, latest version %d", snap, last)
	}
}
