package attention

import (
	"fmt"
	"testing"
	"time"

	"github.com/adpnode/adpnode/directory"
	"github.com/adpnode/adpnode/hostport"
)

// Property: a mention is never lost when the queue overflows. With a
// queue of one slot, a burst of records of a hosted room and of a
// mirrored room mostly overflows; every mention is in the inbox exactly
// once, the inbox seqs run 1..n, and restarts on the same data dir add
// nothing.
func TestQueueOverflowLosesNoMention(t *testing.T) {
	ch, mch := newChain(), newChain()
	f := start(t, func(c *Config) {
		c.Chain = ch.source(false)
		c.MaxPending = 1
	})
	f.a.CatchUp(mch.source(true))
	hosted, mirrored := roomID(1), roomID(40)
	f.w.put(directory.Entry{ID: hosted})
	now := f.w.now.Load()
	var wantKeys []string
	for i := 1; i <= 200; i++ {
		if i%2 == 0 {
			r := ch.commit(t, hosted, now, alice)
			f.a.NodeEvent(hostport.Event{Kind: hostport.EventRecord, RoomID: r.RoomID, Record: r})
			wantKeys = append(wantKeys, fmt.Sprintf("0001/%d", r.Seq))
		} else {
			r := mch.commit(t, mirrored, now, alice)
			f.a.Mirrored(mirrored, r, true)
			wantKeys = append(wantKeys, fmt.Sprintf("0040/%d", r.Seq))
		}
	}
	f.settle()
	if f.a.Dropped() == 0 {
		t.Fatal("the queue of one slot never overflowed: the test proves nothing")
	}
	check := func(when string) {
		want(t, "alice "+when, f.inboxCount(alice), wantKeys...)
		p := f.mentions(alice, Cursor{After: 199})
		if its := p.Items.([]MentionItem); len(its) != 1 || its[0].Seq != 200 {
			t.Fatalf("%s: inbox seqs do not run 1..200: %+v", when, p)
		}
	}
	check("live")
	for i := 0; i < 2; i++ {
		f.restart()
		f.a.CatchUp(mch.source(true))
		f.settle()
		check(fmt.Sprintf("after restart %d", i+1))
	}
}

// Property: where the overflowed records cannot be read again yet (no
// source to read them), the room's watermark stays below the first one
// dropped, so the catch-up at the next start derives them, however many
// were dropped (more than the catch-up's overlap).
func TestOverflowKeepsWatermarkBelowDropped(t *testing.T) {
	ch := newChain()
	withChain := false
	f := start(t, func(c *Config) {
		c.MaxPending = 1
		if withChain {
			c.Chain = ch.source(false)
		} else {
			c.Batch = time.Hour // after its first pass the owner waits: the queue overflows
		}
	})
	f.w.put(directory.Entry{ID: roomID(1)})
	now := f.w.now.Load()
	var wantKeys []string
	for i := 1; i <= 3*catchUpOverlap; i++ {
		r := ch.commit(t, roomID(1), now, alice)
		wantKeys = append(wantKeys, fmt.Sprintf("0001/%d", r.Seq))
		f.a.NodeEvent(hostport.Event{Kind: hostport.EventRecord, RoomID: r.RoomID, Record: r})
	}
	if d := f.a.Dropped(); d < 2*catchUpOverlap {
		t.Fatalf("%d dropped", d)
	}
	f.close() // the final pass stores the one queued record
	withChain = true
	f.open()
	f.settle()
	want(t, "alice", f.inboxCount(alice), wantKeys...)
	f.restart()
	f.settle()
	want(t, "alice after a second restart", f.inboxCount(alice), wantKeys...)
}
