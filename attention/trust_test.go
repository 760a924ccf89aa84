package attention

import (
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/adpnode/adpnode/adp"
	"github.com/adpnode/adpnode/adp/room"
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

// Property: retention counts the time this node stored an item, never the
// origin's received_at: one old backfilled mention (a mirrored record
// received 30 days ago) does not age out the recent items, nor itself,
// and after a restart on the same data dir the inbox still holds all.
func TestRetentionCountsStoreTime(t *testing.T) {
	f := start(t, nil)
	f.w.put(directory.Entry{ID: roomID(1)})
	for i := int64(1); i <= 3; i++ {
		r := mentionRecord(t, roomID(1), i, "message.create", alice)
		r = received(t, r, f.w.now.Load())
		f.local.add(t, r)
	}
	f.settle()
	old := mentionRecord(t, roomID(40), 1, "message.create", alice)
	old = received(t, old, f.w.now.Load()-(30*24*time.Hour).Milliseconds())
	f.mir.add(t, old)
	f.settle()
	check := func(when string) {
		p := f.mentions(alice, Cursor{})
		its := p.Items.([]MentionItem)
		if p.ResetRequired || p.Watermark != 0 || len(its) != 4 || its[3].RoomID != roomID(40) || its[3].At != f.w.now.Load() {
			t.Fatalf("%s: %+v", when, p)
		}
		if p := f.mentions(alice, Cursor{After: 1, StreamID: p.StreamID}); p.ResetRequired || len(p.Items.([]MentionItem)) != 3 {
			t.Fatalf("%s: a saved cursor reset: %+v", when, p)
		}
	}
	check("live")
	f.restart()
	check("after a restart")
	// Age retention still applies, counted from the store time.
	f.w.now.Add((8 * 24 * time.Hour).Milliseconds())
	if p := f.mentions(alice, Cursor{After: 1}); !p.ResetRequired || p.Watermark != 4 {
		t.Fatalf("aged: %+v", p)
	}
}

// Property: a mention the agent may not read leaves no trace: no item, no
// seq (the agent's seqs count only items it may read, without gaps), no
// head a cursor could probe, no live event; restart included.
func TestHiddenMentionsLeaveNoTrace(t *testing.T) {
	f := start(t, nil)
	f.w.put(directory.Entry{ID: roomID(1), Visibility: room.Public})
	f.w.put(directory.Entry{ID: roomID(2), Visibility: room.Restricted})
	w, err := f.a.Watch(alice)
	if err != nil {
		t.Fatal(err)
	}
	defer f.a.Unwatch(w)
	send := func(roomN int, seq int64) {
		r := mentionRecord(t, roomID(roomN), seq, "message.create", alice)
		f.local.add(t, r)
		f.settle()
	}
	send(1, 1)
	send(2, 1) // alice may not read room 2
	send(2, 2)
	send(1, 2)
	check := func(when string) {
		p := f.mentions(alice, Cursor{})
		its := p.Items.([]MentionItem)
		if len(its) != 2 || its[0].Seq != 1 || its[1].Seq != 2 || p.NextAfter != 2 {
			t.Fatalf("%s: %+v", when, p)
		}
		// The head is 2: a cursor of this stream at 3 was never issued.
		if _, err := f.a.Mentions(alice, Cursor{After: 3, StreamID: p.StreamID}, 0); adp.CodeOf(err) != adp.CodeInvalidRequest {
			t.Fatalf("%s: the head counts hidden mentions: %v", when, err)
		}
	}
	check("live")
	if n := len(w.C); n != 2 {
		t.Fatalf("%d live events, want the 2 readable mentions", n)
	}
	f.restart()
	check("after a restart")
	n := 0
	f.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte(pfxMention)})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			n++
		}
		return nil
	})
	if n != 2 {
		t.Fatalf("%d items stored, want 2", n)
	}
}

// Property: a cursor is handed out only once it is durable. While a pass
// that moved a feed's head is still being stored, a snapshot (after=0)
// waits: the next_after it answers is never above the head on disk, so a
// crash cannot take back a cursor a reader holds.
func TestSnapshotCursorIsDurable(t *testing.T) {
	var armed atomic.Bool
	release := make(chan struct{})
	held := make(chan struct{}, 1)
	f := start(t, func(c *Config) {
		c.beforeCommit = func(int, int) {
			if armed.Load() {
				select {
				case held <- struct{}{}:
				default:
				}
				<-release
			}
		}
	})
	s := f.create(alice, `{"filter":{}}`)
	f.w.put(directory.Entry{ID: roomID(1)})
	armed.Store(true)
	f.a.RoomChanged(roomID(1))
	<-held // the pass's items are in memory, not on disk
	storedHead := func() int64 {
		var m subMeta
		f.db.View(func(txn *badger.Txn) error {
			item, err := txn.Get([]byte(pfxSub + s.ID))
			if err != nil {
				return err
			}
			return item.Value(func(v []byte) error { return json.Unmarshal(v, &m) })
		})
		return m.Head
	}
	type answer struct {
		p      *Page
		stored int64 // the head on disk when the answer came
	}
	got := make(chan answer, 1)
	go func() {
		p, err := f.a.Feed(alice, s.ID, Cursor{}, 0)
		if err != nil {
			t.Error(err)
		}
		got <- answer{p, storedHead()}
	}()
	// The pass is stored once the reader has answered, or after a while
	// (the reader waits for it): either way the answer is checked
	// against the disk as it was when it came.
	var a answer
	select {
	case a = <-got:
	case <-time.After(200 * time.Millisecond):
	}
	armed.Store(false)
	close(release)
	if a.p == nil {
		a = <-got
	}
	if a.p == nil || a.p.NextAfter != 1 || a.p.NextAfter > a.stored || kinds(items(a.p)) != "01/appeared" {
		t.Fatalf("snapshot %+v while the head on disk was %d", a.p, a.stored)
	}
}

// Property: after=0 honours limit. A feed's snapshot comes in pages of at
// most limit rooms; read on with room_after, it yields every room once, and
// the log after its next_after carries what changed meanwhile.
func TestSnapshotHonoursLimit(t *testing.T) {
	f := start(t, nil)
	for i := 1; i <= 7; i++ {
		f.w.put(directory.Entry{ID: roomID(i), Tags: []string{"x"}})
	}
	s := f.create(alice, `{"filter":{"tags":["x"]}}`)
	var got []string
	c := Cursor{}
	var at int64
	for {
		p := f.feed(alice, s.ID, c, 3)
		if len(items(p)) > 3 {
			t.Fatalf("page of %d items with limit 3", len(items(p)))
		}
		for _, it := range items(p) {
			got = append(got, it.RoomID[18:])
		}
		if c.RoomAfter == "" {
			at = p.NextAfter
			// A room changes between two pages of the snapshot.
			r := f.w.get(roomID(1))
			r.Topic = "changed"
			f.w.put(r)
			f.touch(roomID(1))
		} else if p.NextAfter != at {
			t.Fatalf("a continuation moved next_after %d -> %d", at, p.NextAfter)
		}
		if !p.HasMore {
			break
		}
		c = Cursor{After: p.NextAfter, StreamID: p.StreamID, RoomAfter: p.NextRoomAfter}
	}
	if strings.Join(got, ",") != "01,02,03,04,05,06,07" {
		t.Fatalf("snapshot rooms %v", got)
	}
	if log := kinds(items(f.feed(alice, s.ID, Cursor{After: at}, 0))); log != "01/changed" {
		t.Fatalf("log after the snapshot %q", log)
	}
}

// A data dir from before the index of non-public rooms (no at/v, no
// at/mp/): the first start builds the index once, so losing access to a
// room whose items were stored before still moves the visibility epoch;
// a later start finds it built.
func TestUpgradeBuildsPrivateRoomIndex(t *testing.T) {
	f := start(t, nil)
	f.w.put(directory.Entry{ID: roomID(2), Visibility: room.Restricted})
	f.w.read[roomID(2)+"/"+string(alice)] = true
	r := mentionRecord(t, roomID(2), 1, "message.create", alice)
	f.local.add(t, r)
	f.settle()
	f.close()
	// Back to the old layout.
	db := openDB(t, f.dir)
	if err := db.DropPrefix([]byte(pfxPrivate), []byte(keyVersion)); err != nil {
		t.Fatal(err)
	}
	db.Close()
	for round := 0; round < 2; round++ {
		f.open()
		if p := f.mentions(alice, Cursor{}); p.VisibilityEpoch != "0" || len(p.Items.([]MentionItem)) != 1 {
			t.Fatalf("round %d: %+v", round, p)
		}
		f.w.mu.Lock()
		delete(f.w.read, roomID(2)+"/"+string(alice))
		f.w.mu.Unlock()
		if p := f.mentions(alice, Cursor{Epoch: "0"}); !p.ResetRequired || p.VisibilityEpoch == "0" {
			t.Fatalf("round %d: access lost, epoch unmoved: %+v", round, p)
		}
		f.w.mu.Lock()
		f.w.read[roomID(2)+"/"+string(alice)] = true
		f.w.mu.Unlock()
		f.close()
	}
}

// A data dir from before store-time stamps: its items carry the records'
// received_at, out of order. The first start raises each inbox's times to
// the greatest before them, so the age watermark (a binary search) drops
// only the old items at the front, never a recent one behind an old one.
func TestUpgradeMakesItemTimesGrow(t *testing.T) {
	f := start(t, nil)
	f.close()
	now := f.w.now.Load()
	old := now - (30 * 24 * time.Hour).Milliseconds()
	db := openDB(t, f.dir)
	err := db.Update(func(txn *badger.Txn) error {
		for i, at := range []int64{old, now, old, now} {
			m := storedMention{MentionItem: MentionItem{Seq: int64(i + 1), RoomID: roomID(1), RoomSeq: int64(i + 1), At: at, Source: "local"}, Public: true, Readable: true}
			if err := txn.Set(seqKey(pfxMention, string(alice), m.Seq), appendMention(nil, &m)); err != nil {
				return err
			}
		}
		if err := txn.Set([]byte(pfxInbox+string(alice)), append(u64(4), u64(0)...)); err != nil {
			return err
		}
		return txn.Delete([]byte(keyVersion))
	})
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	for round := 0; round < 2; round++ {
		f.open()
		p := f.mentions(alice, Cursor{})
		its := p.Items.([]MentionItem)
		if p.Watermark != 1 || len(its) != 3 || its[0].Seq != 2 {
			t.Fatalf("round %d: %+v", round, p)
		}
		f.close()
	}
}
