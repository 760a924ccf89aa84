package live

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
)

func drainAll[M any](s *Subscription[M]) (n int) {
	for range s.C {
		n++
	}
	return n
}

// NewItem builds the SSE frame once; the item's Data is the frame's data.
func TestNewItemFrame(t *testing.T) {
	it := NewItem("room.event", []byte(`{"seq":1}`))
	if string(it.Frame) != "event: room.event\ndata: {\"seq\":1}\n\n" || it.Event != "room.event" || string(it.Data) != `{"seq":1}` {
		t.Fatalf("item %+v frame %q", it, it.Frame)
	}
}

// Every subscriber of a topic gets the same frame (one backing array),
// only that topic's subscribers get it, and a publish costs the same
// allocations whatever the number of subscribers.
func TestPublishSharesOneFrame(t *testing.T) {
	const n = 300
	h := NewHub[int](4)
	subs := make([]*Subscription[int], n)
	for i := range subs {
		subs[i] = h.Subscribe("r1", i)
	}
	other := h.Subscribe("r2", -1)
	it := NewItem("room.event", []byte(`{}`))
	h.Publish("r1", it, nil)
	for i, s := range subs {
		got := <-s.C
		if &got.Frame[0] != &it.Frame[0] {
			t.Fatalf("subscriber %d got its own copy of the frame", i)
		}
	}
	if len(other.C) != 0 {
		t.Fatal("a subscriber of another topic got the item")
	}
	allocs := testing.AllocsPerRun(50, func() {
		h.Publish("r1", it, nil)
		for _, s := range subs {
			<-s.C
		}
	})
	if allocs > 0 {
		t.Fatalf("publishing one item to %d subscribers allocates %.1f times", n, allocs)
	}
	if h.Count() != n+1 {
		t.Fatalf("count %d, want %d", h.Count(), n+1)
	}
}

// Hostile subscriber: one that never reads is dropped with ReasonSlow once
// its queue is full; the publisher never blocks and the others keep
// receiving.
func TestSlowSubscriberDroppedWithReason(t *testing.T) {
	h := NewHub[struct{}](2)
	stuck := h.Subscribe("r", struct{}{})
	reader := h.Subscribe("r", struct{}{})
	for i := range 100 {
		h.Publish("r", NewItem("e", fmt.Appendf(nil, `{"i":%d}`, i)), nil)
		<-reader.C
	}
	if n := drainAll(stuck); n != 2 || stuck.Reason() != ReasonSlow {
		t.Fatalf("stuck subscriber: %d items, reason %q; want 2 and %s", n, stuck.Reason(), ReasonSlow)
	}
	if h.Count() != 1 || reader.Reason() != "" {
		t.Fatalf("count %d, reader reason %q", h.Count(), reader.Reason())
	}
}

// match filters by Meta; Update changes Meta under the lock and drops the
// subscriptions it rejects with the given reason.
func TestMatchAndUpdate(t *testing.T) {
	type meta struct {
		agent   string
		manager bool
	}
	h := NewHub[meta](4)
	a := h.Subscribe("r", meta{"a", true})
	b := h.Subscribe("r", meta{"b", false})
	managers := func(s *Subscription[meta]) bool { return s.Meta.manager }
	h.Publish("r", NewItem("room.join_request", []byte(`{}`)), managers)
	if len(a.C) != 1 || len(b.C) != 0 {
		t.Fatalf("manager got %d, member got %d; want 1 and 0", len(a.C), len(b.C))
	}
	h.Update("r", "membership_ended", func(s *Subscription[meta]) bool {
		s.Meta.manager = s.Meta.agent == "b"
		return true
	})
	h.Publish("r", NewItem("room.join_request", []byte(`{}`)), managers)
	if len(a.C) != 1 || len(b.C) != 1 {
		t.Fatalf("after the role change: a has %d, b has %d; want 1 and 1", len(a.C), len(b.C))
	}
	h.Update("r", "membership_ended", func(s *Subscription[meta]) bool { return s.Meta.agent != "a" })
	if n := drainAll(a); n != 1 || a.Reason() != "membership_ended" {
		t.Fatalf("dropped subscriber: %d items, reason %q", n, a.Reason())
	}
	if h.Count() != 1 {
		t.Fatalf("count %d, want 1", h.Count())
	}
}

// Close reasons: the subscriber's own Close, a topic's close, the owner's
// Close (delivered to every subscriber, and to every later subscription).
// The first reason stays.
func TestCloseReasons(t *testing.T) {
	h := NewHub[struct{}](4)
	self := h.Subscribe("r", struct{}{})
	roomSub := h.Subscribe("r", struct{}{})
	others := []*Subscription[struct{}]{h.Subscribe("s", struct{}{}), h.Subscribe("t", struct{}{})}
	self.Close()
	self.End("later")
	if drainAll(self); self.Reason() != ReasonClosed {
		t.Fatalf("own close: reason %q", self.Reason())
	}
	h.CloseTopic("r", "room_ended")
	if drainAll(roomSub); roomSub.Reason() != "room_ended" {
		t.Fatalf("topic close: reason %q", roomSub.Reason())
	}
	if !h.Watched("s") || h.Watched("r") {
		t.Fatal("Watched is wrong after a topic close")
	}
	h.Close("shutdown")
	h.Close("again")
	for _, s := range others {
		if drainAll(s); s.Reason() != ReasonShutdown {
			t.Fatalf("owner close: reason %q", s.Reason())
		}
		s.Close() // after the hub closed: no effect
	}
	late := h.Subscribe("s", struct{}{})
	if n := drainAll(late); n != 0 || late.Reason() != ReasonShutdown || h.Count() != 0 {
		t.Fatalf("subscription after Close: %d items, reason %q, count %d", n, late.Reason(), h.Count())
	}
	if e := Ended[int]("x", "mirror_frozen"); drainAll(e) != 0 || e.Reason() != "mirror_frozen" {
		t.Fatalf("Ended: reason %q", e.Reason())
	}
}

// Drain ends every stream but leaves the hub open.
func TestDrainKeepsHubOpen(t *testing.T) {
	h := NewHub[struct{}](1)
	s := h.Subscribe("r", struct{}{})
	h.Drain("shutdown")
	if drainAll(s); s.Reason() != "shutdown" {
		t.Fatalf("reason %q", s.Reason())
	}
	again := h.Subscribe("r", struct{}{})
	h.Publish("r", NewItem("e", []byte(`{}`)), nil)
	if len(again.C) != 1 || again.Reason() != "" {
		t.Fatalf("a subscription after Drain got %d items, reason %q", len(again.C), again.Reason())
	}
}

// Publishers, subscribers, closers and the owner's Close race (run with
// -race): no send on a closed channel, every subscription ends, and the
// hub is empty afterwards.
func TestConcurrentPublishSubscribeClose(t *testing.T) {
	h := NewHub[int](8)
	var wg sync.WaitGroup
	subs := make(chan *Subscription[int], 400)
	for p := range 4 {
		wg.Go(func() {
			for i := range 500 {
				h.Publish(fmt.Sprint(i%3), NewItem("e", []byte(`{}`)), nil)
				if i%100 == 0 {
					h.CloseTopic(fmt.Sprint(p%3), "room_ended")
				}
			}
		})
	}
	for g := range 4 {
		wg.Go(func() {
			for i := range 100 {
				s := h.Subscribe(fmt.Sprint(i%3), g)
				subs <- s
				if i%2 == 0 {
					s.Close()
				}
			}
		})
	}
	wg.Wait()
	h.Close("shutdown")
	close(subs)
	for s := range subs {
		drainAll(s)
		if s.Reason() == "" {
			t.Fatal("a subscription did not end")
		}
	}
	if h.Count() != 0 {
		t.Fatalf("count %d after Close", h.Count())
	}
}

func BenchmarkPublish1000(b *testing.B) {
	h := NewHub[struct{}](4)
	subs := make([]*Subscription[struct{}], 1000)
	for i := range subs {
		subs[i] = h.Subscribe("r", struct{}{})
	}
	it := NewItem("room.event", make([]byte, 512))
	b.ReportAllocs()
	for b.Loop() {
		h.Publish("r", it, nil)
		for _, s := range subs {
			<-s.C
		}
	}
}

// SubscribeAtMost is atomic: 64 callers racing for a topic capped at 4 get
// exactly 4 subscriptions, and callers that subscribe and close in a loop
// never hold more than 4 at once. Slots come back when subscriptions end
// (their Close, a slow-consumer drop), other topics are not counted, and
// after the owner's Close the caller gets a subscription ended with its
// reason.
func TestSubscribeAtMost(t *testing.T) {
	const callers, limit = 64, 4
	h := NewHub[int](1)
	other := h.Subscribe("b", -1)
	start := make(chan struct{})
	got := make(chan *Subscription[int], callers)
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() {
			<-start
			if s, ok := h.SubscribeAtMost("a", limit, i); ok {
				got <- s
			}
		})
	}
	close(start)
	wg.Wait()
	close(got)
	var held []*Subscription[int]
	for s := range got {
		held = append(held, s)
	}
	if len(held) != limit || h.Count() != limit+1 {
		t.Fatalf("%d of %d racing callers subscribed (hub count %d); the cap is %d", len(held), callers, h.Count(), limit)
	}
	// Closing frees the slots: every one can be taken again.
	for _, s := range held {
		s.Close()
	}
	var open atomic.Int64
	var worst atomic.Int64
	for i := range callers {
		wg.Go(func() {
			for range 50 {
				s, ok := h.SubscribeAtMost("a", limit, i)
				if !ok {
					continue
				}
				n := open.Add(1)
				for w := worst.Load(); n > w && !worst.CompareAndSwap(w, n); w = worst.Load() {
				}
				open.Add(-1)
				s.Close()
			}
		})
	}
	wg.Wait()
	if w := worst.Load(); w > limit || w == 0 {
		t.Fatalf("at most %d subscriptions held at once, cap %d", w, limit)
	}
	held = held[:0]
	for i := range limit {
		s, ok := h.SubscribeAtMost("a", limit, i)
		if !ok {
			t.Fatalf("slot %d did not come back after the closes", i)
		}
		held = append(held, s)
	}
	if _, ok := h.SubscribeAtMost("a", limit, 99); ok {
		t.Fatal("a fifth subscription past the cap")
	}
	// A slow consumer's drop frees its slot too (queue of 1, two items).
	h.Publish("a", NewItem("e", []byte(`{}`)), func(s *Subscription[int]) bool { return s == held[0] })
	h.Publish("a", NewItem("e", []byte(`{}`)), func(s *Subscription[int]) bool { return s == held[0] })
	if drainAll(held[0]); held[0].Reason() != ReasonSlow {
		t.Fatalf("reason %q, want %s", held[0].Reason(), ReasonSlow)
	}
	if _, ok := h.SubscribeAtMost("a", limit, 100); !ok {
		t.Fatal("a slow consumer's slot did not come back")
	}
	h.Close(ReasonShutdown)
	late, ok := h.SubscribeAtMost("a", limit, 101)
	if !ok || drainAll(late) != 0 || late.Reason() != ReasonShutdown || other.Reason() != ReasonShutdown {
		t.Fatalf("after Close: ok %v, reason %q", ok, late.Reason())
	}
}

// TestSubscriptionQueueMemory bounds what an open subscription holds: its
// queue carries pointers to shared items, so 1,000 subscribers with the
// node's default queue of 1,024 items take about 8 MiB, not the 64 MiB a
// queue of item values took.
func TestSubscriptionQueueMemory(t *testing.T) {
	const subs, buf = 1000, 1024
	h := NewHub[int](buf)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	held := make([]*Subscription[int], subs)
	for i := range held {
		held[i] = h.Subscribe("r", i)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	per := (after.HeapAlloc - before.HeapAlloc) / subs
	if per > 10<<10 {
		t.Fatalf("an open subscription with a %d-item queue holds %d bytes; want at most 10 KiB", buf, per)
	}
	it := NewItem("e", []byte(`{}`))
	h.Publish("r", it, nil)
	for _, s := range held {
		if got := <-s.C; got != it {
			t.Fatal("a subscriber got another item than the one published")
		}
	}
	h.Publish("r", nil, nil) // nothing to offer: nobody gets a nil item
	for _, s := range held {
		if len(s.C) != 0 {
			t.Fatal("a nil item was queued")
		}
	}
	runtime.KeepAlive(held)
}
