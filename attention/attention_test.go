package attention

import (
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/adpnode/adpnode/adp"
	"github.com/adpnode/adpnode/adp/identity"
	"github.com/adpnode/adpnode/adp/record"
	"github.com/adpnode/adpnode/adp/room"
	"github.com/adpnode/adpnode/directory"
	"github.com/adpnode/adpnode/internal/testwait"
	"github.com/adpnode/adpnode/live"
)

// world is a fake directory, clock and access table.
type world struct {
	mu    sync.Mutex
	rooms map[string]directory.Entry
	read  map[string]bool // room/agent -> may read
	now   atomic.Int64
}

func newWorld() *world {
	w := &world{rooms: map[string]directory.Entry{}, read: map[string]bool{}}
	w.now.Store(1_700_000_000_000)
	return w
}

func (w *world) put(s directory.Entry) {
	w.mu.Lock()
	if s.URL == "" {
		s.URL = "http://127.0.0.1:1/v1/rooms/" + s.ID
	}
	if s.Host == "" {
		s.Host = "127.0.0.1:1"
	}
	if s.Visibility == "" {
		s.Visibility = room.Public
	}
	if s.Status == "" {
		s.Status = room.StatusActive
	}
	w.rooms[s.ID] = s
	w.mu.Unlock()
}

func (w *world) del(id string) { w.mu.Lock(); delete(w.rooms, id); w.mu.Unlock() }

func (w *world) get(id string) directory.Entry { w.mu.Lock(); defer w.mu.Unlock(); return w.rooms[id] }

func (w *world) config(db *badger.DB) Config {
	return Config{DB: db, Now: w.now.Load,
		Directory: func() []directory.Entry {
			w.mu.Lock()
			defer w.mu.Unlock()
			var out []directory.Entry
			for _, s := range w.rooms {
				if s.Visibility != room.Private { // as the real directory
					out = append(out, s)
				}
			}
			return out
		},
		Lookup: func(id string) (directory.Entry, bool) {
			w.mu.Lock()
			defer w.mu.Unlock()
			s, ok := w.rooms[id]
			return s, ok
		},
		Locate: func(id string) (string, string, bool) {
			return "http://127.0.0.1:2/v1/rooms/" + id, "127.0.0.1:2", true
		},
		CanRead: func(id string, a identity.AgentID) bool {
			w.mu.Lock()
			defer w.mu.Unlock()
			return w.read[id+"/"+string(a)]
		},
		Rescan: time.Hour, // tests trigger passes themselves
	}
}

func openDB(t testing.TB, dir string) *badger.DB {
	t.Helper()
	db, err := badger.Open(badger.DefaultOptions(dir).WithLogger(nil))
	if err != nil {
		t.Fatal(err)
	}
	return db
}

type fixture struct {
	t   *testing.T
	w   *world
	dir string
	db  *badger.DB
	a   *Attention
	cfg func(*Config)
	// local and mir are the node's and the mirror's change feeds.
	local, mir *memSource
}

func start(t *testing.T, tune func(*Config)) *fixture {
	f := &fixture{t: t, w: newWorld(), dir: t.TempDir(), cfg: tune, local: newMemSource("fp/"), mir: newMemSource("m/fp/")}
	f.open()
	t.Cleanup(f.close)
	return f
}

func (f *fixture) open() {
	f.db = openDB(f.t, f.dir)
	cfg := f.w.config(f.db)
	cfg.Local, cfg.Mirror = f.local, f.mir
	if f.cfg != nil {
		f.cfg(&cfg)
	}
	a, err := Open(cfg)
	if err != nil {
		f.t.Fatal(err)
	}
	f.a = a
}

func (f *fixture) close() {
	if f.a != nil {
		f.a.Close()
		f.db.Close()
		f.a = nil
	}
}

func (f *fixture) restart() { f.close(); f.open() }

// settle waits until the followers have stored what their feeds hold,
// and the owner has handled everything queued so far.
func (f *fixture) settle() {
	f.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	caughtUp := func() bool {
		for _, fs := range f.a.followers {
			if fs.reached.Load() < fs.src.FeedHead() {
				return false
			}
		}
		f.a.pmu.Lock()
		defer f.a.pmu.Unlock()
		return len(f.a.pendLook) == 0 && !f.a.rescanDue
	}
	for !caughtUp() {
		if time.Now().After(deadline) {
			f.t.Fatal("attention did not settle")
		}
		time.Sleep(time.Millisecond)
	}
	// Two markers for the owner: the second is taken only after the pass
	// that took the first returned (its writes stored).
	for _, m := range []string{"__settle__", "__settle2__"} {
		f.a.pmu.Lock()
		f.a.pendLook[m] = true
		f.a.pmu.Unlock()
		f.a.poke()
		for {
			f.a.pmu.Lock()
			left := f.a.pendLook[m]
			f.a.pmu.Unlock()
			if !left {
				break
			}
			if time.Now().After(deadline) {
				f.t.Fatal("owner did not settle")
			}
			time.Sleep(time.Millisecond)
		}
	}
}

// touch tells the service a local room changed (RoomChanged).
func (f *fixture) touch(id string) {
	f.a.RoomChanged(id)
	f.settle()
}

func (f *fixture) rescan() {
	f.a.IndexChanged("")
	time.Sleep(0)
	f.settle()
	// a rescan may wait up to a second after the previous one
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		f.a.pmu.Lock()
		due := f.a.rescanDue
		f.a.pmu.Unlock()
		if !due {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	f.settle()
}

func agentID(b byte) identity.AgentID {
	seed := make([]byte, 32)
	seed[0] = b
	k, _ := identity.KeyFromSeed(seed)
	return identity.AgentIDFromKey(k.Public().(ed25519.PublicKey))
}

var alice, bob = agentID(1), agentID(2)

func roomID(i int) string { return fmt.Sprintf("%020d", i) }

func (f *fixture) create(agent identity.AgentID, body string) *Subscription {
	f.t.Helper()
	req, err := ParseCreate([]byte(body))
	if err != nil {
		f.t.Fatal(err)
	}
	s, err := f.a.Create(agent, req)
	if err != nil {
		f.t.Fatal(err)
	}
	return s
}

func (f *fixture) feed(agent identity.AgentID, id string, c Cursor, limit int) *Page {
	f.t.Helper()
	p, err := f.a.Feed(agent, id, c, limit)
	if err != nil {
		f.t.Fatal(err)
	}
	return p
}

func items(p *Page) []FeedItem { return p.Items.([]FeedItem) }

func kinds(its []FeedItem) string {
	var b []string
	for _, it := range its {
		k := it.Kind
		if it.Reason != "" {
			k += ":" + it.Reason
		}
		b = append(b, it.RoomID[18:]+"/"+k)
	}
	return strings.Join(b, " ")
}

func TestPrefixIsDisjoint(t *testing.T) {
	// Every key prefix of node/, mirror/, index/ and federation/ (grep pfx).
	others := []string{"r/", "e/", "n/", "j/", "x/", "p/", "s/", "h/", "i/", "ic/", "fv/",
		"m/t/", "m/m/", "m/r/", "m/c/", "m/e/", "w/", "m/w/", "readyz"}
	for _, o := range others {
		if strings.HasPrefix(o, Prefix) || strings.HasPrefix(Prefix, o) {
			t.Fatalf("prefix %q overlaps %q", Prefix, o)
		}
	}
	for _, k := range []string{keyInstance, pfxSub, pfxFeed, pfxMatch, pfxMention, pfxInbox} {
		if !strings.HasPrefix(k, Prefix) {
			t.Fatalf("%q is outside %q", k, Prefix)
		}
	}
	inner := []string{pfxSub, pfxFeed, pfxMatch, pfxMention, pfxInbox}
	for i, a := range inner {
		for j, b := range inner {
			if i != j && strings.HasPrefix(a, b) {
				t.Fatalf("inner prefix %q under %q", a, b)
			}
		}
	}
}

func TestFeedLifecycle(t *testing.T) {
	f := start(t, nil)
	for i := 1; i <= 5; i++ {
		f.w.put(directory.Entry{ID: roomID(i), Topic: fmt.Sprintf("room %d", i), Tags: []string{"research"}})
	}
	f.w.put(directory.Entry{ID: roomID(9), Topic: "other", Tags: []string{"chat"}})
	f.w.put(directory.Entry{ID: roomID(8), Topic: "secret", Tags: []string{"research"}, Visibility: room.Private})
	s := f.create(alice, `{"filter":{"tags":["Research"]}}`)
	p := f.feed(alice, s.ID, Cursor{After: 0}, 0)
	if got := kinds(items(p)); got != "01/appeared 02/appeared 03/appeared 04/appeared 05/appeared" {
		t.Fatalf("snapshot %q", got)
	}
	if p.NextAfter != 5 || p.StreamID == "" {
		t.Fatalf("page %+v", p)
	}
	cur := Cursor{After: p.NextAfter, StreamID: p.StreamID}

	r := f.w.get(roomID(1))
	r.Topic = "renamed"
	f.w.put(r)
	f.touch(roomID(1))
	r = f.w.get(roomID(2))
	r.Status = room.StatusEnded
	f.w.put(r)
	f.touch(roomID(2))
	r = f.w.get(roomID(3))
	r.Status = room.StatusCancelled
	f.w.put(r)
	f.touch(roomID(3))
	r = f.w.get(roomID(4))
	r.Tags = []string{"chat"}
	f.w.put(r)
	f.touch(roomID(4))
	f.w.del(roomID(5))
	f.touch(roomID(5))
	// A record that changes nothing a feed shows is not an item.
	r = f.w.get(roomID(1))
	r.Seq, r.LastActive = 99, 12345
	f.w.put(r)
	f.touch(roomID(1))
	// A private room never appears, whatever it says.
	f.touch(roomID(8))
	p = f.feed(alice, s.ID, cur, 0)
	want := "01/changed 02/unavailable:ended 03/unavailable:cancelled 04/unavailable:no_longer_matching 05/unavailable:removed"
	if got := kinds(items(p)); got != want {
		t.Fatalf("feed %q, want %q", got, want)
	}
	for _, it := range items(p) {
		if it.Kind == KindUnavailable && (it.Room != nil || !it.Unavailable) {
			t.Fatalf("unavailable item carries a body: %+v", it)
		}
		if it.RoomID == roomID(1) && (it.Version != it.Seq || it.Room.Topic != "renamed") {
			t.Fatalf("changed item %+v", it)
		}
	}
	// Rebuild: only room 1 matches now.
	p = f.feed(alice, s.ID, Cursor{}, 0)
	if got := kinds(items(p)); got != "01/appeared" || p.NextAfter != 10 {
		t.Fatalf("rebuild %q next %d", got, p.NextAfter)
	}
	// A remote room that leaves the index expires.
	f.w.put(directory.Entry{ID: roomID(20), Topic: "remote", Tags: []string{"research"}, Host: "127.0.0.1:2"})
	f.rescan()
	f.w.del(roomID(20))
	f.rescan()
	p = f.feed(alice, s.ID, Cursor{After: 10}, 0)
	if got := kinds(items(p)); got != "20/appeared 20/unavailable:removed" && got != "20/appeared 20/unavailable:expired" {
		t.Fatalf("remote %q", got)
	}
	// bob cannot read alice's feed.
	if _, err := f.a.Feed(bob, s.ID, Cursor{}, 0); adp.CodeOf(err) != adp.CodeNotFound {
		t.Fatalf("bob reads alice's feed: %v", err)
	}
}

func TestRestartMidFeedResumes(t *testing.T) {
	f := start(t, nil)
	s := f.create(alice, `{"filter":{"keyword":"agents"}}`)
	for i := 1; i <= 6; i++ {
		f.w.put(directory.Entry{ID: roomID(i), Topic: "agents " + fmt.Sprint(i)})
		f.touch(roomID(i))
	}
	p := f.feed(alice, s.ID, Cursor{After: 0}, 0)
	if len(items(p)) != 6 {
		t.Fatalf("snapshot %q", kinds(items(p)))
	}
	// after=0 is the snapshot; read the log after seq 1 two at a time,
	// restart mid-way, and resume from the saved cursor.
	got := []int64{}
	c := Cursor{After: 1}
	pg := f.feed(alice, s.ID, c, 2)
	for _, it := range items(pg) {
		got = append(got, it.Seq)
	}
	if !pg.HasMore || pg.NextAfter != 3 {
		t.Fatalf("page %+v", pg)
	}
	stream := pg.StreamID
	// Changes while the node is down are found on restart by the diff.
	f.close()
	r := f.w.get(roomID(2))
	r.Status = room.StatusEnded
	f.w.put(r)
	f.open()
	f.rescan()
	c = Cursor{After: pg.NextAfter, StreamID: stream}
	for {
		pg = f.feed(alice, s.ID, c, 2)
		if pg.ResetRequired || pg.StreamID != stream {
			t.Fatalf("stream changed across restart: %+v", pg)
		}
		for _, it := range items(pg) {
			got = append(got, it.Seq)
		}
		c.After = pg.NextAfter
		if !pg.HasMore {
			break
		}
	}
	want := []int64{2, 3, 4, 5, 6, 7}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("seqs %v, want %v (no loss, no duplicate)", got, want)
	}
	last := items(f.feed(alice, s.ID, Cursor{After: 6}, 0))
	if kinds(last) != "02/unavailable:ended" {
		t.Fatalf("down-time change %q", kinds(last))
	}
	// Subscriptions survive too.
	if l := f.a.List(alice); len(l) != 1 || l[0].ID != s.ID {
		t.Fatalf("list after restart %+v", l)
	}
}

func TestRetentionWatermark(t *testing.T) {
	f := start(t, func(c *Config) { c.Retention = 5 })
	s := f.create(alice, `{"filter":{},"ttl_seconds":2592000}`)
	f.w.put(directory.Entry{ID: roomID(1), Topic: "t0"})
	f.touch(roomID(1))
	for i := 1; i <= 9; i++ {
		r := f.w.get(roomID(1))
		r.Topic = fmt.Sprint("t", i)
		f.w.put(r)
		f.touch(roomID(1))
	}
	p := f.feed(alice, s.ID, Cursor{After: 2}, 0)
	if !p.ResetRequired || p.Watermark != 5 {
		t.Fatalf("below watermark: %+v", p)
	}
	p = f.feed(alice, s.ID, Cursor{After: 5}, 0)
	if p.ResetRequired || len(items(p)) != 5 {
		t.Fatalf("at watermark: %+v", p)
	}
	// Age: everything older than RetentionAge is gone too.
	f.w.now.Add((8 * 24 * time.Hour).Milliseconds())
	p = f.feed(alice, s.ID, Cursor{After: 6}, 0)
	if !p.ResetRequired || p.Watermark != 10 {
		t.Fatalf("aged: %+v", p)
	}
	// A wrong stream ID also resets.
	p = f.feed(alice, s.ID, Cursor{After: 10, StreamID: "elsewhere.x"}, 0)
	if !p.ResetRequired {
		t.Fatal("foreign stream ID accepted")
	}
	// A cursor beyond the head: 400 when it names this stream, which
	// never issued it; reset_required when it names none.
	if _, err := f.a.Feed(alice, s.ID, Cursor{After: 11, StreamID: p.StreamID}, 0); adp.CodeOf(err) != adp.CodeInvalidRequest {
		t.Fatalf("cursor ahead: %v", err)
	}
	if p := f.feed(alice, s.ID, Cursor{After: 11}, 0); !p.ResetRequired {
		t.Fatalf("cursor ahead without a stream: %+v", p)
	}
	// Storage stays at the retention bound.
	n := 0
	f.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte(pfxFeed)})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			n++
		}
		return nil
	})
	if n != 5 {
		t.Fatalf("%d feed items stored, retention is 5", n)
	}
}

func TestCapsAndTTL(t *testing.T) {
	f := start(t, nil)
	before := runtime.NumGoroutine()
	ok, refused := 0, 0
	for i := 0; i < 1000; i++ {
		req, _ := ParseCreate([]byte(`{"filter":{"keyword":"x"},"ttl_seconds":60}`))
		_, err := f.a.Create(alice, req)
		switch {
		case err == nil:
			ok++
		case adp.CodeOf(err) == adp.CodeRateLimited:
			refused++
		default:
			t.Fatal(err)
		}
	}
	if ok != 20 || refused != 980 {
		t.Fatalf("ok %d refused %d", ok, refused)
	}
	if g := runtime.NumGoroutine(); g > before+2 {
		t.Fatalf("goroutines %d -> %d", before, g)
	}
	if _, err := f.a.Create(bob, &CreateRequest{TTLSeconds: 31 * 24 * 3600}); adp.CodeOf(err) != adp.CodeInvalidRequest {
		t.Fatalf("ttl over 30 days: %v", err)
	}
	subs := f.a.List(alice)
	// Expiry is enforced on read, before any timer.
	f.w.now.Add(61_000)
	if l := f.a.List(alice); len(l) != 0 {
		t.Fatalf("expired listed: %d", len(l))
	}
	if _, err := f.a.Feed(alice, subs[0].ID, Cursor{}, 0); adp.CodeOf(err) != adp.CodeNotFound {
		t.Fatalf("expired feed: %v", err)
	}
	if err := f.a.Delete(alice, subs[0].ID); adp.CodeOf(err) != adp.CodeNotFound {
		t.Fatalf("expired delete: %v", err)
	}
	// The cap counts live subscriptions only; expired ones are dropped.
	s := f.create(alice, `{"filter":{}}`)
	f.restart()
	if l := f.a.List(alice); len(l) != 1 || l[0].ID != s.ID {
		t.Fatalf("after restart %+v", l)
	}
	if err := f.a.Delete(alice, s.ID); err != nil {
		t.Fatal(err)
	}
	f.restart()
	if l := f.a.List(alice); len(l) != 0 {
		t.Fatalf("deleted subscription back: %+v", l)
	}
}

func TestHostileRequests(t *testing.T) {
	cases := map[string]string{
		"huge keyword":  `{"filter":{"keyword":"` + strings.Repeat("k", 5000) + `"}}`,
		"long keyword":  `{"filter":{"keyword":"` + strings.Repeat("k", 300) + `"}}`,
		"many tags":     `{"filter":{"tags":[` + strings.Repeat(`"a",`, 50) + `"a"]}}`,
		"empty tag":     `{"filter":{"tags":[""]}}`,
		"bad status":    `{"filter":{"status":["open"]}}`,
		"bad creator":   `{"filter":{"creator":"me"}}`,
		"unknown field": `{"filter":{"colour":"red"}}`,
		"not json":      `{"filter":`,
		"array":         `[]`,
		"dup keys":      `{"filter":{},"filter":{}}`,
		"negative ttl":  `{"filter":{},"ttl_seconds":-1}`,
		"host path":     `{"filter":{"host":"a/b"}}`,
		// The directory's time bounds are not subscription filters.
		"starts_after": `{"filter":{"starts_after":5}}`,
		"ends_before":  `{"filter":{"ends_before":5}}`,
	}
	for name, body := range cases {
		_, err := ParseCreate([]byte(body))
		e := adp.AsError(err)
		if e == nil || (e.Code != adp.CodeInvalidRequest && e.Code != adp.CodePayloadTooLarge) || e.Message == "" {
			t.Errorf("%s: %v", name, err)
		}
	}
	f := start(t, nil)
	if _, err := f.a.Feed(alice, "nope", Cursor{}, 0); adp.CodeOf(err) != adp.CodeNotFound {
		t.Fatalf("unknown subscription: %v", err)
	}
	stream := f.mentions(alice, Cursor{}).StreamID
	if _, err := f.a.Mentions(alice, Cursor{After: 5, StreamID: stream}, 0); adp.CodeOf(err) != adp.CodeInvalidRequest {
		t.Fatalf("inbox cursor ahead: %v", err)
	}
}

var signer, _ = identity.KeyFromSeed(make([]byte, 32))

func mentionRecord(t testing.TB, roomID string, seq int64, typ string, mentions ...identity.AgentID) *record.Record {
	return payloadRecord(t, roomID, seq, typ, `{"text":"hi"}`, mentions...)
}

func payloadRecord(t testing.TB, roomID string, seq int64, typ, payload string, mentions ...identity.AgentID) *record.Record {
	ms := make([]string, len(mentions))
	for i, m := range mentions {
		ms[i] = string(m)
	}
	base, hash := seq, "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
	ev := identity.Event{Protocol: adp.Protocol, Type: typ, Actor: identity.AgentIDFromKey(signer.Public().(ed25519.PublicKey)),
		CreatedAt: 1, Nonce: seq, Payload: json.RawMessage(payload), RoomID: &roomID, BaseSeq: &base, BaseHash: &hash, Mentions: ms}
	env, err := identity.Sign(signer, ev)
	if err != nil {
		t.Fatal(err)
	}
	pre := ""
	if seq > 1 {
		pre = hash
	}
	return record.New(roomID, seq, pre, env, 1_700_000_000_000)
}

// received returns r as received at ms (its hash recomputed).
func received(t testing.TB, r *record.Record, ms int64) *record.Record {
	env, err := identity.OpenEnvelope(r.Envelope)
	if err != nil {
		t.Fatal(err)
	}
	return record.New(r.RoomID, r.Seq, r.PreHash, env, ms)
}

func (f *fixture) mentions(agent identity.AgentID, c Cursor) *Page {
	f.t.Helper()
	p, err := f.a.Mentions(agent, c, 0)
	if err != nil {
		f.t.Fatal(err)
	}
	return p
}

func TestMentionsAccessAndReset(t *testing.T) {
	f := start(t, nil)
	if _, err := identity.ParseEnvelope(mentionRecord(t, roomID(1), 1, "message.create", alice).Envelope); err != nil {
		t.Fatalf("test envelope does not parse: %v", err)
	}
	f.w.put(directory.Entry{ID: roomID(1), Visibility: room.Public})
	f.w.put(directory.Entry{ID: roomID(2), Visibility: room.Private})
	f.w.put(directory.Entry{ID: roomID(3), Visibility: room.Private})
	f.w.read[roomID(2)+"/"+string(alice)] = true
	send := func(r *record.Record) {
		f.local.add(t, r)
	}
	send(mentionRecord(t, roomID(1), 1, "message.create", alice, bob, alice))
	send(mentionRecord(t, roomID(2), 2, "message.create", alice))
	send(mentionRecord(t, roomID(3), 3, "message.create", alice)) // alice may not read room 3
	f.settle()
	f.mir.add(t, mentionRecord(t, roomID(40), 4, "message.create", alice))
	f.settle()
	p := f.mentions(alice, Cursor{})
	its := p.Items.([]MentionItem)
	if len(its) != 3 || its[0].RoomID != roomID(1) || its[1].RoomID != roomID(2) || its[2].Source != "mirror" ||
		its[2].RoomURL != "http://127.0.0.1:2/v1/rooms/"+roomID(40) || its[0].RoomURL == "" || its[0].RecordHash != mentionRecord(t, roomID(1), 1, "message.create", alice, bob, alice).Hash {
		t.Fatalf("inbox %+v", its)
	}
	for _, it := range its {
		if it.RoomID == roomID(3) {
			t.Fatal("unreadable private room leaked")
		}
	}
	if p.NextAfter != 3 || p.VisibilityEpoch != "0" {
		t.Fatalf("page %+v", p)
	}
	cur := Cursor{After: p.NextAfter, StreamID: p.StreamID, Epoch: p.VisibilityEpoch}
	// Restart: same stream, same epoch, nothing new.
	f.restart()
	p = f.mentions(alice, cur)
	if p.ResetRequired || len(p.Items.([]MentionItem)) != 0 || p.NextAfter != 3 {
		t.Fatalf("after restart %+v", p)
	}
	// alice loses access to room 2: reset, and the rebuild leaves it out.
	f.w.mu.Lock()
	delete(f.w.read, roomID(2)+"/"+string(alice))
	f.w.mu.Unlock()
	p = f.mentions(alice, cur)
	if !p.ResetRequired || p.VisibilityEpoch == "0" {
		t.Fatalf("access lost, no reset: %+v", p)
	}
	p = f.mentions(alice, Cursor{})
	its = p.Items.([]MentionItem)
	if len(its) != 2 || its[0].RoomID != roomID(1) || its[1].RoomID != roomID(40) {
		t.Fatalf("rebuild %+v", its)
	}
	// bob's inbox has its own record of room 1 only.
	if its := f.mentions(bob, Cursor{}).Items.([]MentionItem); len(its) != 1 {
		t.Fatalf("bob %+v", its)
	}
}

func TestWatchStream(t *testing.T) {
	f := start(t, func(c *Config) { c.WatchBuffer = 2 })
	f.w.put(directory.Entry{ID: roomID(1)})
	w, err := f.a.Watch(alice)
	if err != nil {
		t.Fatal(err)
	}
	r := mentionRecord(t, roomID(1), 1, "message.create", alice)
	f.local.add(t, r)
	select {
	case it := <-w.C:
		if it.Event != "mention" || !strings.Contains(string(it.Data), `"room_seq":1`) {
			t.Fatalf("item %s %s", it.Event, it.Data)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no live mention")
	}
	// A join request's outcome reaches its applicant.
	review := payloadRecord(t, roomID(1), 2, "room.join.review",
		`{"decision":"approve","request":{"applicant":"`+string(alice)+`","id":"jr_1","room_id":"`+roomID(1)+`"},"role":"speaker"}`)
	f.local.add(t, review)
	select {
	case it := <-w.C:
		if it.Event != "join_request" || !strings.Contains(string(it.Data), `"request_id":"jr_1"`) || !strings.Contains(string(it.Data), `"decision":"approve"`) {
			t.Fatalf("item %s %s", it.Event, it.Data)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no join request outcome")
	}
	// A stream that does not read is dropped, not waited for.
	for i := int64(2); i < 10; i++ {
		f.local.add(t, mentionRecord(t, roomID(1), i, "message.create", alice))
		f.settle()
	}
	if w.Reason() != live.ReasonSlow || drainWatcher(w) != 2 || f.a.Watchers() != 0 {
		t.Fatalf("reason %q watchers %d", w.Reason(), f.a.Watchers())
	}
	var bobs []*Watcher
	for i := 0; i < 4; i++ {
		bw, err := f.a.Watch(bob)
		if err != nil {
			t.Fatal(err)
		}
		bobs = append(bobs, bw)
	}
	_, err = f.a.Watch(bob)
	if e, ok := err.(*adp.Error); !ok || e.Code != adp.CodeRateLimited || e.Data["reason"] != "stream_cap" || e.Data["limit"] != 4 {
		t.Fatalf("fifth stream: %v", err)
	}
	// A closed stream gives its slot back.
	f.a.Unwatch(bobs[0])
	if bobs[0].Reason() != live.ReasonClosed {
		t.Fatalf("unwatched: reason %q", bobs[0].Reason())
	}
	if bobs[0], err = f.a.Watch(bob); err != nil {
		t.Fatalf("slot after a close: %v", err)
	}
	// The service's Close ends every stream with shutdown.
	f.close()
	for _, bw := range bobs {
		if bw.Reason() != live.ReasonShutdown || drainWatcher(bw) > 0 {
			t.Fatalf("after Close: reason %q", bw.Reason())
		}
	}
	// Restart on the same data dir: streams open again and carry new items.
	f.open()
	w, err = f.a.Watch(alice)
	if err != nil {
		t.Fatal(err)
	}
	f.local.add(t, mentionRecord(t, roomID(1), 10, "message.create", alice))
	f.settle()
	if len(w.C) != 1 {
		t.Fatalf("after restart: %d items on the stream, want 1", len(w.C))
	}
	if it := <-w.C; it.Event != "mention" || !strings.Contains(string(it.Data), `"room_seq":10`) {
		t.Fatalf("after restart: item %s %s", it.Event, it.Data)
	}
}

func drainWatcher(w *Watcher) (n int) {
	for range w.C {
		n++
	}
	return n
}

// Hostile: one of alice's streams never reads while mentions keep coming.
// It is dropped with slow_consumer once WatchBuffer items behind, and its
// slot comes back; alice's other streams, 32 other agents' streams and the
// owner's passes (every mention stored) go on unhindered. Agents racing to
// open streams never exceed the cap. After Close every stream has ended,
// the hub is empty and the goroutines are back to their base.
func TestWatchNeverReads(t *testing.T) {
	const buf, records, others = 4, 12, 32
	base := runtime.NumGoroutine()
	f := start(t, func(c *Config) { c.WatchBuffer = buf })
	f.w.put(directory.Entry{ID: roomID(1)})
	stuck, err := f.a.Watch(alice)
	if err != nil {
		t.Fatal(err)
	}
	// Racing opens: each agent tries twice its cap at once.
	agents := make([]identity.AgentID, others)
	streams := make([][]*Watcher, others)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := range agents {
		agents[i] = agentID(byte(10 + i))
		for range 2 * 4 {
			wg.Go(func() {
				w, err := f.a.Watch(agents[i])
				if err != nil {
					if adp.CodeOf(err) != adp.CodeRateLimited {
						t.Error(err)
					}
					return
				}
				mu.Lock()
				streams[i] = append(streams[i], w)
				mu.Unlock()
			})
		}
	}
	var peers []*Watcher // alice's streams that read
	for range 3 {
		w, err := f.a.Watch(alice)
		if err != nil {
			t.Fatal(err)
		}
		peers = append(peers, w)
	}
	wg.Wait()
	for i, ws := range streams {
		if len(ws) != 4 {
			t.Fatalf("agent %d holds %d streams after racing opens, cap 4", i, len(ws))
		}
	}
	if _, err := f.a.Watch(alice); adp.CodeOf(err) != adp.CodeRateLimited {
		t.Fatalf("alice past her cap: %v", err)
	}
	mentioned := append([]identity.AgentID{alice}, agents...)
	for i := int64(1); i <= records; i++ {
		f.local.add(t, mentionRecord(t, roomID(1), i, "message.create", mentioned...))
		f.settle()
		// The pass has returned: every reading stream holds its item.
		for _, w := range append(peers, slices.Concat(streams...)...) {
			if len(w.C) != 1 {
				t.Fatalf("record %d: a reading stream holds %d items (reason %q)", i, len(w.C), w.Reason())
			}
			if it := <-w.C; it.Event != "mention" || !strings.Contains(string(it.Data), fmt.Sprintf(`"room_seq":%d`, i)) {
				t.Fatalf("record %d: item %s %s", i, it.Event, it.Data)
			}
		}
	}
	if r := stuck.Reason(); r != live.ReasonSlow {
		t.Fatalf("stuck stream: reason %q, want %s", r, live.ReasonSlow)
	}
	if n := drainWatcher(stuck); n != buf {
		t.Fatalf("stuck stream: %d items, reason %q; want %d and %s", n, stuck.Reason(), buf, live.ReasonSlow)
	}
	if got := f.a.Watchers(); got != 3+4*others {
		t.Fatalf("%d streams open, want %d", got, 3+4*others)
	}
	// Its slot came back, and the owner stored every mention.
	if _, err := f.a.Watch(alice); err != nil {
		t.Fatalf("the dropped stream's slot: %v", err)
	}
	if its := f.mentions(alice, Cursor{}).Items.([]MentionItem); len(its) != records {
		t.Fatalf("alice's inbox holds %d mentions, want %d", len(its), records)
	}
	a := f.a
	f.close()
	for _, w := range append(peers, slices.Concat(streams...)...) {
		if w.Reason() != live.ReasonShutdown || drainWatcher(w) > 0 {
			t.Fatalf("after Close: reason %q", w.Reason())
		}
	}
	if a.Watchers() != 0 {
		t.Fatalf("%d streams after Close", a.Watchers())
	}
	if _, err := a.Watch(alice); adp.CodeOf(err) != adp.CodeUnavailable {
		t.Fatalf("a stream after Close: %v", err)
	}
	waitGoroutines(t, base)
}

// waitGoroutines waits until no more than base goroutines run.
func waitGoroutines(t *testing.T, base int) {
	t.Helper()
	testwait.Until(t, 30*time.Second, fmt.Sprintf("goroutines back to %d", base), func() bool {
		return runtime.NumGoroutine() <= base
	})
}
