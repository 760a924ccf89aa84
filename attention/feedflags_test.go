package attention

import (
	"sync"
	"testing"
	"time"

	"github.com/adpnode/adpnode/adp/identity"
	"github.com/adpnode/adpnode/adp/record"
	"github.com/adpnode/adpnode/adp/types"
	"github.com/adpnode/adpnode/directory"
	"github.com/adpnode/adpnode/hostport"
	"github.com/adpnode/adpnode/internal/testwait"
)

// Property: the flags a feed's writer stores with an entry
// (hostport.FeedFlagsOf) say exactly what reading the record would: for
// every built-in type and every type of the registered and bundled packs,
// with and without mentions, "may notify" is the record test that decides
// whether it is derived (interesting), and "may change the room" is the
// negation of contentOnly.
func TestFeedFlagsAgreeWithRecordChecks(t *testing.T) {
	names := types.BuiltinNames()
	for _, id := range types.RegisteredPackIDs() {
		p, _ := types.RegisteredPack(id)
		for _, d := range p.Types {
			names = append(names, d.Type)
		}
	}
	for _, b := range types.BundledPacks() {
		for _, d := range b.Pack.Types {
			names = append(names, d.Type)
		}
	}
	content := 0
	for _, typ := range names {
		for _, who := range [][]string{nil, {}, {string(alice)}} {
			r := payloadRecord(t, roomID(1), 2, typ, `{"text":"hi","type":"message.create","mentions":[]}`)
			env, err := identity.OpenEnvelope(r.Envelope)
			if err != nil {
				t.Fatal(err)
			}
			ev := env.Event
			ev.Mentions = who // absent, empty, one
			if env, err = identity.Sign(signer, ev); err != nil {
				t.Fatal(err)
			}
			r = record.New(r.RoomID, r.Seq, r.PreHash, env, r.ReceivedAt)
			raw, _ := r.MarshalJSON()
			// What reading the record decides: the raw test, then
			// recordLocked's (a mention, or a join review).
			derives := interesting(raw) && (len(env.Event.Mentions) > 0 || env.Event.Type == types.TypeRoomJoinReview)
			fl := hostport.FeedFlagsOf(&env.Event)
			if fl.MayNotify() != derives {
				t.Errorf("%s mentioning %v: flags say may notify %v, reading it %v", typ, who, fl.MayNotify(), derives)
			}
			if fl.MayChangeRoom() == contentOnly(r.Envelope) {
				t.Errorf("%s: flags say may change the room %v, contentOnly %v", typ, fl.MayChangeRoom(), contentOnly(r.Envelope))
			}
			if !fl.MayChangeRoom() {
				content++
			}
		}
	}
	if len(names) < 14 || content != 3*3 {
		t.Fatalf("%d types, %d content-only cases: the registered types were not all seen", len(names), content)
	}
}

// Property: attention reads back from the feed's source only the records
// whose entries say they may notify anyone: a run of reactions and
// messages without mentions is not read (and derives nothing), a mention
// is read and derived once, and an entry whose type may change the room
// has the room looked at again without reading its record.
func TestFollowerReadsOnlyRecordsThatMayNotify(t *testing.T) {
	var mu sync.Mutex
	lookups := 0
	f := start(t, func(c *Config) {
		look := c.Lookup
		c.Lookup = func(id string) (directory.Entry, bool) {
			if id == roomID(1) {
				mu.Lock()
				lookups++
				mu.Unlock()
			}
			return look(id)
		}
	})
	f.w.put(directory.Entry{ID: roomID(1)})
	looked := func() int { mu.Lock(); defer mu.Unlock(); return lookups }
	reads := func() int { f.local.mu.Lock(); defer f.local.mu.Unlock(); return f.local.reads }
	f.settle()
	base := looked()
	for seq := int64(1); seq <= 40; seq++ {
		typ := "reaction.create"
		if seq%2 == 0 {
			typ = "message.create"
		}
		f.local.add(t, payloadRecord(t, roomID(1), seq, typ, `{"text":"hi"}`))
	}
	f.settle()
	if n := reads(); n != 0 {
		t.Fatalf("%d record reads for a run of reactions and messages without mentions", n)
	}
	if n := looked() - base; n != 0 {
		t.Fatalf("room looked at %d times for content-only records", n)
	}
	f.local.add(t, mentionRecord(t, roomID(1), 41, "message.create", alice))
	f.local.add(t, payloadRecord(t, roomID(1), 42, "room.update", `{"topic":"x"}`))
	f.settle()
	want(t, "alice", f.inboxCount(alice), "0001/41")
	if n := reads(); n != 1 {
		t.Fatalf("%d record reads for one mention, want 1", n)
	}
	if looked() == base {
		t.Fatal("a room.update entry did not have the room looked at")
	}
}

// Property: entries from before the flags existed (an old data dir) are
// read as before: the mention they name is derived, after a restart too.
func TestOldEntriesWithoutFlagsStillDerive(t *testing.T) {
	f := start(t, nil)
	f.local.legacy, f.mir.legacy = true, true
	f.w.put(directory.Entry{ID: roomID(1)})
	now := f.w.now.Load()
	f.local.commit(t, roomID(1), now, alice)
	f.settle()
	f.close()
	f.local.commit(t, roomID(1), now)      // no mention: still read
	f.local.commit(t, roomID(1), now, bob) // written while stopped
	f.mir.commit(t, roomID(40), now, alice)
	f.open()
	f.settle()
	want(t, "alice", f.inboxCount(alice), "0001/1", "0040/1")
	want(t, "bob", f.inboxCount(bob), "0001/3")
	f.restart()
	f.settle()
	want(t, "alice", f.inboxCount(alice), "0001/1", "0040/1")
	want(t, "bob", f.inboxCount(bob), "0001/3")
}

// Property: a follower whose batches derived nothing does not store its
// position for each of them (at most about once a second, and when it
// stops), and a crash after such a run loses nothing and derives nothing
// twice: following again from the stored position hands over the run
// again, which derives nothing, and the next mention is derived once.
func TestCrashAfterRunThatDerivedNothing(t *testing.T) {
	f := start(t, func(c *Config) { c.posEvery = time.Hour })
	f.w.put(directory.Entry{ID: roomID(1)})
	now := f.w.now.Load()
	f.local.commit(t, roomID(1), now, alice) // 0001/1, stored with its position
	f.settle()
	fs := f.a.followers[0]
	if !fs.local {
		fs = f.a.followers[1]
	}
	stored := fs.stored.Load()
	if stored != f.local.FeedHead() {
		t.Fatalf("position stored %d after a mention, want %d", stored, f.local.FeedHead())
	}
	for i := 0; i < 30; i++ {
		f.local.commit(t, roomID(1), now) // derives nothing
	}
	f.settle()
	if got := fs.stored.Load(); got != stored {
		t.Fatalf("position stored at %d after a run that derived nothing, want it left at %d", got, stored)
	}
	pos, _, err := f.a.readPos(fs.posKey)
	if err != nil || pos != stored {
		t.Fatalf("stored position %d %v, want %d", pos, err, stored)
	}
	// A crash: nothing more is stored.
	f.a.wmu.Lock()
	f.a.cfg.crashOnStop = true
	f.a.wmu.Unlock()
	f.restart()
	if pos, _, _ := f.a.readPos(fs.posKey); pos != stored {
		t.Fatalf("the crash stored position %d, want %d", pos, stored)
	}
	f.local.commit(t, roomID(1), now, alice, bob) // 0001/32
	f.settle()
	want(t, "alice", f.inboxCount(alice), "0001/1", "0001/32")
	want(t, "bob", f.inboxCount(bob), "0001/32")
	// A run, then a graceful stop: the position is stored at once.
	for i := 0; i < 5; i++ {
		f.local.commit(t, roomID(1), now)
	}
	f.settle()
	f.restart()
	fs = f.a.followers[0]
	if !fs.local {
		fs = f.a.followers[1]
	}
	if pos, _, _ := f.a.readPos(fs.posKey); pos != f.local.FeedHead() {
		t.Fatalf("position after a stop %d, want the head %d", pos, f.local.FeedHead())
	}
	f.settle()
	want(t, "alice", f.inboxCount(alice), "0001/1", "0001/32")
	testwait.Until(t, 10*time.Second, "inbox seqs dense", func() bool {
		its := f.mentions(alice, Cursor{}).Items.([]MentionItem)
		return len(its) == 2 && its[0].Seq == 1 && its[1].Seq == 2
	})
}

// Property: a position left pending by batches that derived nothing
// reaches the disk about posEvery later with no further entry and no stop
// (the node prunes the feed behind stored positions).
func TestPendingPositionStoredWhenIdle(t *testing.T) {
	f := start(t, func(c *Config) { c.posEvery = 2 * time.Second })
	f.w.put(directory.Entry{ID: roomID(1)})
	now := f.w.now.Load()
	f.local.commit(t, roomID(1), now, alice) // stored at once, with its item
	for i := 0; i < 20; i++ {
		f.local.commit(t, roomID(1), now) // within posEvery of it: pending
	}
	f.settle()
	fs := f.a.followers[0]
	if !fs.local {
		fs = f.a.followers[1]
	}
	if fs.stored.Load() == f.local.FeedHead() {
		t.Log("the run was handled more than posEvery after the mention: nothing was left pending")
	}
	testwait.Until(t, 10*time.Second, "the pending position stored", func() bool {
		pos, _, err := f.a.readPos(fs.posKey)
		return err == nil && pos == f.local.FeedHead()
	})
}
