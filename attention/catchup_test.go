package attention

import (
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/adpnode/adpnode/adp"
	"github.com/adpnode/adpnode/adp/identity"
	"github.com/adpnode/adpnode/adp/record"
	"github.com/adpnode/adpnode/directory"
	"github.com/adpnode/adpnode/hostport"
)

// chain is a fake committed store: record JSON per room, in seq order.
type chain struct {
	mu    sync.Mutex
	recs  map[string][][]byte
	last  map[string]int64 // room -> received_at of its latest record
	reads atomic.Int64     // records read by a catch-up
}

func newChain() *chain { return &chain{recs: map[string][][]byte{}, last: map[string]int64{}} }

// commit appends a signed record mentioning who to roomID and returns it.
func (c *chain) commit(t testing.TB, roomID string, at int64, who ...identity.AgentID) *record.Record {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	seq := int64(len(c.recs[roomID]) + 1)
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
	pre := ""
	if seq > 1 {
		var prev struct {
			Hash string `json:"hash"`
		}
		json.Unmarshal(c.recs[roomID][seq-2], &prev)
		pre = prev.Hash
	}
	r := record.New(roomID, seq, pre, env, at)
	raw, err := r.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	c.recs[roomID] = append(c.recs[roomID], raw)
	c.last[roomID] = at
	return r
}

func (c *chain) source(mirror bool) *Chain {
	return &Chain{Mirror: mirror,
		Heads: func(since int64) []Head {
			c.mu.Lock()
			defer c.mu.Unlock()
			var out []Head
			for id, rs := range c.recs {
				if c.last[id] >= since {
					out = append(out, Head{id, int64(len(rs))})
				}
			}
			return out
		},
		Records: func(roomID string, after int64, limit int) ([][]byte, error) {
			c.mu.Lock()
			defer c.mu.Unlock()
			rs := c.recs[roomID]
			if after >= int64(len(rs)) {
				return nil, nil
			}
			out := rs[after:min(int64(len(rs)), after+int64(limit))]
			c.reads.Add(int64(len(out)))
			return out, nil
		},
	}
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

// A kill between a record's commit and the derivation of its mentions (the
// listener's queue is lost with the process) loses no mention: the restart
// reads the room's chain after its watermark. Each mention is in the inbox
// exactly once, across further restarts too, and a catch-up reads only the
// records past the watermark (plus a bounded overlap), not the whole chain.
func TestCrashBeforeDerivationCatchesUp(t *testing.T) {
	ch := newChain()
	var dropping atomic.Bool
	f := start(t, func(c *Config) {
		c.Chain = ch.source(false)
		c.drop = func(string, int64) bool { return dropping.Load() }
	})
	pub, other := roomID(1), roomID(2)
	f.w.put(directory.Entry{ID: pub})
	f.w.put(directory.Entry{ID: other})
	now := f.w.now.Load()
	send := func(r *record.Record) {
		f.a.NodeEvent(hostport.Event{Kind: hostport.EventRecord, RoomID: r.RoomID, Record: r})
	}

	// A long history, all derived: 1 mention of alice every 10 records.
	for i := 1; i <= 500; i++ {
		var r *record.Record
		if i%10 == 0 {
			r = ch.commit(t, pub, now, alice)
		} else {
			r = ch.commit(t, pub, now)
		}
		send(r)
	}
	f.settle()
	// Committed, acknowledged, never derived: the process dies here.
	dropping.Store(true)
	send(ch.commit(t, pub, now, alice, bob))                                                                      // 501
	send(ch.commit(t, pub, now))                                                                                  // 502
	send(ch.commit(t, other, now, bob))                                                                           // other/1
	f.a.NodeEvent(hostport.Event{Kind: hostport.EventRecord, RoomID: pub, Record: ch.commit(t, pub, now, alice)}) // 503
	f.close()
	dropping.Store(false)

	ch.reads.Store(0)
	f.open()
	f.settle()
	var aliceWant []string
	for i := 10; i <= 500; i += 10 {
		aliceWant = append(aliceWant, fmt.Sprintf("0001/%d", i))
	}
	aliceWant = append(aliceWant, "0001/501", "0001/503")
	want(t, "alice", f.inboxCount(alice), aliceWant...)
	want(t, "bob", f.inboxCount(bob), "0001/501", "0002/1")
	// Cost bound: the watermark was 500, so only the tail and the overlap
	// were read, not the 503 records of the chain.
	if n := ch.reads.Load(); n > 3+catchUpOverlap+1+1 {
		t.Fatalf("catch-up read %d records", n)
	}

	// Live records after the catch-up are derived once, and nothing is
	// derived again by later restarts.
	send(ch.commit(t, pub, now, alice)) // 504
	f.settle()
	for i := 0; i < 2; i++ {
		f.restart()
		f.settle()
	}
	aliceWant = append(aliceWant, "0001/504")
	want(t, "alice", f.inboxCount(alice), aliceWant...)
	want(t, "bob", f.inboxCount(bob), "0001/501", "0002/1")
}

// A live record of a room the catch-up already covered (the listener ran
// after the restart's chain read) is not derived twice; nor is a mirrored
// record delivered again by a backfill after a restart.
func TestCatchUpAndLiveOverlap(t *testing.T) {
	ch := newChain()
	mch := newChain()
	var dropping atomic.Bool
	f := start(t, func(c *Config) {
		c.Chain = ch.source(false)
		c.drop = func(string, int64) bool { return dropping.Load() }
	})
	f.w.put(directory.Entry{ID: roomID(1)})
	now := f.w.now.Load()
	send := func(r *record.Record) {
		f.a.NodeEvent(hostport.Event{Kind: hostport.EventRecord, RoomID: r.RoomID, Record: r})
	}
	send(ch.commit(t, roomID(1), now, alice))
	f.settle()
	dropping.Store(true)
	late := ch.commit(t, roomID(1), now, alice) // its listener call comes only after the restart
	send(late)
	f.close()
	dropping.Store(false)
	f.open()
	send(late) // told again after the catch-up ran
	// Mirrored room 40: two records derived live, then the mirror is
	// attached and its catch-up runs, then a backfill delivers them again.
	m1, m2 := mch.commit(t, roomID(40), now, alice), mch.commit(t, roomID(40), now, alice)
	f.a.Mirrored(roomID(40), m1, true)
	f.a.Mirrored(roomID(40), m2, true)
	f.settle()
	f.a.CatchUp(mch.source(true))
	f.settle()
	f.restart()
	f.a.Mirrored(roomID(40), m1, false)
	f.a.Mirrored(roomID(40), m2, false)
	m3 := mch.commit(t, roomID(40), now, alice)
	f.a.CatchUp(mch.source(true)) // the mirror's room has m3 before its hook ran
	f.settle()
	f.a.Mirrored(roomID(40), m3, true)
	f.settle()
	want(t, "alice", f.inboxCount(alice), "0001/1", "0001/2", "0040/1", "0040/2", "0040/3")
	for _, it := range f.mentions(alice, Cursor{}).Items.([]MentionItem) {
		if it.RoomID == roomID(40) && (it.Source != "mirror" || !strings.Contains(it.RoomURL, ":2/")) {
			t.Fatalf("mirrored item %+v", it)
		}
	}
}

// Hostile chain content: a stored record that does not parse, or claims
// another room or seq, is skipped and logged; the catch-up goes on and
// costs no goroutine.
func TestCatchUpHostileChain(t *testing.T) {
	ch := newChain()
	var dropping atomic.Bool
	f := start(t, func(c *Config) {
		c.Chain = ch.source(false)
		c.drop = func(string, int64) bool { return dropping.Load() }
	})
	f.w.put(directory.Entry{ID: roomID(1)})
	now := f.w.now.Load()
	r := ch.commit(t, roomID(1), now, alice)
	f.a.NodeEvent(hostport.Event{Kind: hostport.EventRecord, RoomID: r.RoomID, Record: r})
	f.settle()
	dropping.Store(true)
	ch.commit(t, roomID(1), now, bob)
	ch.commit(t, roomID(1), now, alice)
	ch.mu.Lock()
	ch.recs[roomID(1)][1] = []byte(`{"room_id":"` + roomID(1) + `","seq":2,"envelope":{"mentions":["` + string(bob) + `"]}}`)
	ch.mu.Unlock()
	before := runtime.NumGoroutine()
	f.close()
	dropping.Store(false)
	f.open()
	f.settle()
	want(t, "alice", f.inboxCount(alice), "0001/1", "0001/3")
	if got := f.inboxCount(bob); len(got) != 0 {
		t.Fatalf("bob %v from a record that does not parse", got)
	}
	if g := runtime.NumGoroutine(); g > before+3 {
		t.Fatalf("goroutines %d -> %d", before, g)
	}
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
