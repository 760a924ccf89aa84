package attention

import (
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/adpnode/adpnode/adp"
	"github.com/adpnode/adpnode/adp/identity"
	"github.com/adpnode/adpnode/adp/record"
	"github.com/adpnode/adpnode/directory"
	"github.com/adpnode/adpnode/internal/testwait"
)

// commit stores in s the next record of roomID, received at at, mentioning
// who, and returns it.
func (s *memSource) commit(t testing.TB, roomID string, at int64, who ...identity.AgentID) *record.Record {
	t.Helper()
	s.mu.Lock()
	seq := int64(len(s.recs[roomID]) + 1)
	pre := ""
	if seq > 1 {
		var prev struct {
			Hash string `json:"hash"`
		}
		json.Unmarshal(s.recs[roomID][seq-1], &prev)
		pre = prev.Hash
	}
	s.mu.Unlock()
	ms := make([]string, len(who))
	for i, m := range who {
		ms[i] = string(m)
	}
	base, hash := max(seq-1, 1), "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
	ev := identity.Event{Protocol: adp.Protocol, Type: "message.create", Actor: identity.AgentIDFromKey(signer.Public().(ed25519.PublicKey)),
		CreatedAt: at, Nonce: at*1000 + seq, Payload: json.RawMessage(`{"text":"hi"}`), RoomID: &roomID, BaseSeq: &base, BaseHash: &hash, Mentions: ms}
	env, err := identity.Sign(signer, ev)
	if err != nil {
		t.Fatal(err)
	}
	r := record.New(roomID, seq, pre, env, at)
	s.add(t, r)
	return r
}

// inboxCount counts (room/seq) occurrences in agent's whole inbox.
func (f *fixture) inboxCount(agent identity.AgentID) map[string]int {
	f.t.Helper()
	out := map[string]int{}
	c := Cursor{}
	for {
		p := f.mentions(agent, c)
		for _, it := range p.Items.([]MentionItem) {
			out[fmt.Sprintf("%s/%d", it.RoomID[16:], it.RoomSeq)]++
		}
		c.After = p.NextAfter
		if !p.HasMore {
			return out
		}
	}
}

func want(t *testing.T, who string, got map[string]int, keys ...string) {
	t.Helper()
	w := map[string]int{}
	for _, k := range keys {
		w[k] = 1
	}
	if fmt.Sprint(got) != fmt.Sprint(w) {
		t.Fatalf("%s's inbox %v, want each of %v exactly once", who, got, keys)
	}
}

// Property: a follower whose feed was pruned past its position
// (hostport.ErrFeedBehind) resynchronises from the rooms' records after
// their marks: every mention stored while it was stopped is derived,
// those derived before are not derived again, records older than the
// retention age are skipped, and it then follows the feed from the head
// it read before the scan. Both feeds, the node's and the mirror's; a
// restart afterwards adds nothing.
func TestFeedBehindResyncs(t *testing.T) {
	f := start(t, nil)
	f.w.put(directory.Entry{ID: roomID(1)})
	f.w.put(directory.Entry{ID: roomID(2)})
	now := f.w.now.Load()
	f.local.commit(t, roomID(1), now, alice) // 0001/1
	f.mir.commit(t, roomID(40), now, alice)  // 0040/1
	f.settle()
	f.close()
	f.local.commit(t, roomID(1), now, alice)                                 // 0001/2: after the mark
	f.local.commit(t, roomID(2), now-(8*24*time.Hour).Milliseconds(), alice) // 0002/1: older than retention
	f.local.commit(t, roomID(2), now, alice, bob)                            // 0002/2: a room never seen
	f.mir.commit(t, roomID(40), now, bob)                                    // 0040/2
	f.local.prune()
	f.mir.prune()
	f.open()
	f.settle()
	want(t, "alice", f.inboxCount(alice), "0001/1", "0001/2", "0002/2", "0040/1")
	want(t, "bob", f.inboxCount(bob), "0002/2", "0040/2")
	// Following again from the head: a new record is derived at once.
	f.local.commit(t, roomID(1), now, bob)
	f.settle()
	want(t, "bob", f.inboxCount(bob), "0001/3", "0002/2", "0040/2")
	f.restart()
	f.settle()
	want(t, "alice", f.inboxCount(alice), "0001/1", "0001/2", "0002/2", "0040/1")
	want(t, "bob", f.inboxCount(bob), "0001/3", "0002/2", "0040/2")
}

// Property: a mirror-delivered record's mention is derived exactly once,
// across restarts, and also when the mirror stores the record again (it
// purged the room and mirrors it anew: a new feed entry for the same
// record).
func TestMirroredMentionOnceAcrossRestart(t *testing.T) {
	f := start(t, nil)
	now := f.w.now.Load()
	r := f.mir.commit(t, roomID(40), now, alice)
	f.settle()
	want(t, "alice", f.inboxCount(alice), "0040/1")
	f.restart()
	f.settle()
	want(t, "alice", f.inboxCount(alice), "0040/1")
	f.mir.add(t, r) // stored again
	f.mir.commit(t, roomID(40), now, alice)
	f.settle()
	f.restart()
	f.settle()
	want(t, "alice", f.inboxCount(alice), "0040/1", "0040/2")
}

// Hostile stored content: a record the feed names that does not parse,
// or is not the record the feed names (another hash), is skipped and
// logged; the follower goes on with the next entries.
func TestFeedHostileRecords(t *testing.T) {
	f := start(t, nil)
	f.w.put(directory.Entry{ID: roomID(1)})
	now := f.w.now.Load()
	f.local.commit(t, roomID(1), now, alice)
	f.close()
	f.local.commit(t, roomID(1), now, bob)
	f.local.commit(t, roomID(1), now, bob)
	f.local.commit(t, roomID(1), now, alice)
	f.local.mu.Lock()
	f.local.recs[roomID(1)][2] = []byte(`{"room_id":"` + roomID(1) + `","seq":2,"envelope":{"mentions":["` + string(bob) + `"]}}`)
	f.local.feed[2].Hash[0] ^= 1 // 0001/3 is not the record the feed names
	f.local.mu.Unlock()
	f.open()
	f.settle()
	want(t, "alice", f.inboxCount(alice), "0001/1", "0001/4")
	if got := f.inboxCount(bob); len(got) != 0 {
		t.Fatalf("bob %v from records that are not the feed's", got)
	}
}

// Property: the followers' goroutines end with Close, whatever they were
// doing (waiting on the feed, or retrying after a failed read); none is
// left behind.
func TestFollowersLeaveNoGoroutine(t *testing.T) {
	before := runtime.NumGoroutine()
	for i := 0; i < 5; i++ {
		f := start(t, nil)
		f.local.commit(t, roomID(1), f.w.now.Load(), alice)
		f.mir.commit(t, roomID(40), f.w.now.Load(), alice)
		f.settle()
		f.close()
	}
	testwait.Until(t, 10*time.Second, "the goroutines of closed services gone", func() bool { return runtime.NumGoroutine() <= before+2 })
}

// contentOnly reads the event's own type, not a "type" inside the payload,
// and fails safe on anything but a canonical envelope.
func TestContentOnly(t *testing.T) {
	msg := payloadRecord(t, roomID(1), 2, "message.create", `{"text":"hi"}`)
	upd := payloadRecord(t, roomID(1), 3, "room.update", `{"type":"message.create","topic":"x"}`)
	join := payloadRecord(t, roomID(1), 4, "room.join", `{"role":"speaker"}`)
	switch {
	case !contentOnly(msg.Envelope):
		t.Fatal("message.create not content-only")
	case contentOnly(upd.Envelope):
		t.Fatal("room.update with a payload type taken as content-only")
	case contentOnly(join.Envelope):
		t.Fatal("room.join taken as content-only")
	case contentOnly([]byte(`{"event":{"type":"message.create"}}`)), contentOnly(nil):
		t.Fatal("a non-canonical envelope taken as content-only")
	}
}

// parseStored skips only the signature check: a stored record parses as
// record.Parse parses it, and one whose envelope or record fields were
// changed after the hashes were computed does not parse.
func TestParseStoredChecksHashes(t *testing.T) {
	r := mentionRecord(t, roomID(1), 2, "message.create", alice)
	raw, _ := r.MarshalJSON()
	got, env, err := parseStored(raw)
	want, wenv, werr := record.Parse(raw)
	gj, _ := got.MarshalJSON()
	wj, _ := want.MarshalJSON()
	if err != nil || werr != nil || string(gj) != string(wj) || env.Hash != wenv.Hash || len(env.Event.Mentions) != 1 {
		t.Fatalf("parseStored %+v %v, record.Parse %+v %v", got, err, want, werr)
	}
	for _, bad := range []string{
		strings.Replace(string(raw), string(alice), string(bob), 1),                       // another mention
		strings.Replace(string(raw), `"seq":2`, `"seq":3`, 1),                             // another seq
		strings.Replace(string(raw), `"received_at":1700000000000`, `"received_at":1`, 1), // another time
	} {
		if bad == string(raw) {
			t.Fatal("the test's change did not apply")
		}
		if _, _, err := parseStored([]byte(bad)); err == nil {
			t.Fatalf("a changed record parses: %s", bad)
		}
	}
}

// Property: a store from before the change feeds (no position stored in
// a feed) does not start at the feed's head, where the records stored
// since its last derivation would be missed: it resynchronises from the
// rooms' records first, each mention once, and a restart adds nothing.
func TestStoreWithoutPositionResyncs(t *testing.T) {
	withSources := false
	f := start(t, func(c *Config) {
		if !withSources {
			c.Local, c.Mirror = nil, nil // as before the feeds
		}
	})
	f.w.put(directory.Entry{ID: roomID(1)})
	now := f.w.now.Load()
	f.local.commit(t, roomID(1), now, alice)
	f.mir.commit(t, roomID(40), now, bob)
	f.settle()
	if got := f.inboxCount(alice); len(got) != 0 {
		t.Fatalf("derived %v with no feed followed", got)
	}
	withSources = true
	f.restart()
	f.settle()
	want(t, "alice", f.inboxCount(alice), "0001/1")
	want(t, "bob", f.inboxCount(bob), "0040/1")
	f.local.commit(t, roomID(1), now, alice)
	f.restart()
	f.settle()
	want(t, "alice", f.inboxCount(alice), "0001/1", "0001/2")
	want(t, "bob", f.inboxCount(bob), "0040/1")
}
