// Package live is the one fan-out of live streams: agent room streams,
// viewer streams and mirror streams. A Hub fans items out to the
// Subscriptions of a topic (a room); publishing never blocks, and a
// subscriber whose queue is full is dropped with a close reason (a slow
// consumer never slows the log). A hub is owned by whoever opens it and
// closed in its owner's Close: every subscription then ends with the close
// reason, and later subscriptions start ended.
//
// The package has no goroutines and no timers: a hub is a map under a lock.
package live

import (
	"sync"
)

// Close reasons shared by every stream. Owners add their own (room_ended,
// membership_ended, mirror_frozen, …).
const (
	ReasonClosed   = "closed"        // the subscriber closed it
	ReasonSlow     = "slow_consumer" // its queue was full
	ReasonShutdown = "shutdown"      // the hub's owner closed
)

// Item is one SSE item: an event name and its JSON data. Frame, when set,
// is the whole SSE frame ("event: E\ndata: D\n\n"), built once by NewItem
// and shared read-only by every subscriber the item is offered to, so an
// item is encoded once per topic, not once per subscriber. Items travel
// as pointers and are never modified once published: a subscriber's queue
// then holds 8 bytes per item, not the item's 64 (at the default 1,024
// items, 8 KiB per subscriber instead of 64 KiB), and offering an item to
// a thousand subscribers writes a thousand words, not a thousand copies.
type Item struct {
	Event string
	Data  []byte
	Frame []byte
}

// NewItem builds an item with its SSE frame. Data must be one line (JSON
// without raw newlines, as every item's data is).
func NewItem(event string, data []byte) *Item {
	f := make([]byte, 0, len("event: \ndata: \n\n")+len(event)+len(data))
	f = append(f, "event: "...)
	f = append(f, event...)
	f = append(f, "\ndata: "...)
	f = append(f, data...)
	f = append(f, "\n\n"...)
	return &Item{Event: event, Data: data, Frame: f}
}

// Subscription is one live stream of a topic. Items arrive on C; when the
// subscription ends C is closed and Reason says why. Meta is the owner's
// per-subscriber data (an agent and its rights); the hub reads and writes
// it only under its lock (Publish's match, Update).
type Subscription[M any] struct {
	C     <-chan *Item
	Topic string
	Meta  M

	c      chan *Item
	hub    *Hub[M]
	once   sync.Once
	mu     sync.Mutex
	reason string
}

// Reason says why a closed subscription ended ("" while it is open).
func (s *Subscription[M]) Reason() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reason
}

// Close ends the subscription with ReasonClosed (idempotent; the first
// reason stays).
func (s *Subscription[M]) Close() { s.End(ReasonClosed) }

// End ends the subscription with reason (idempotent; the first reason
// stays).
func (s *Subscription[M]) End(reason string) {
	if s.hub != nil {
		s.hub.remove(s)
	}
	s.end(reason)
}

func (s *Subscription[M]) end(reason string) {
	s.once.Do(func() {
		s.mu.Lock()
		s.reason = reason
		s.mu.Unlock()
		close(s.c)
	})
}

// Ended returns a subscription that has already ended with reason: what a
// subscriber gets of a topic that is closed (a frozen mirror room).
func Ended[M any](topic, reason string) *Subscription[M] {
	c := make(chan *Item)
	s := &Subscription[M]{C: c, c: c, Topic: topic}
	s.end(reason)
	return s
}

// Hub fans items out to the subscriptions of each topic.
type Hub[M any] struct {
	buf    int
	mu     sync.RWMutex
	subs   map[string]map[*Subscription[M]]struct{}
	closed string // the close reason once Close ran
}

// NewHub returns a hub whose subscriptions queue up to buf items each.
func NewHub[M any](buf int) *Hub[M] {
	return &Hub[M]{buf: max(buf, 1), subs: map[string]map[*Subscription[M]]struct{}{}}
}

// Subscribe opens a subscription of topic with meta. After Close it
// returns a subscription already ended with the hub's close reason.
func (h *Hub[M]) Subscribe(topic string, meta M) *Subscription[M] {
	s, _ := h.subscribe(topic, 0, meta)
	return s
}

// SubscribeAtMost is Subscribe for a topic that may hold at most limit
// open subscriptions (an agent's streams): past the cap it opens nothing
// and returns false. The count and the insertion happen under one lock, so
// concurrent callers can never exceed the cap, which a Count or Watched
// check before Subscribe could not promise. A subscription frees its slot
// as it ends (its Close, a slow-consumer drop, a topic close). A limit
// below 1 is taken as 1. After Close it returns a subscription already
// ended with the hub's close reason.
func (h *Hub[M]) SubscribeAtMost(topic string, limit int, meta M) (*Subscription[M], bool) {
	return h.subscribe(topic, max(limit, 1), meta)
}

// subscribe opens a subscription of topic unless limit > 0 and the topic
// already holds limit of them.
func (h *Hub[M]) subscribe(topic string, limit int, meta M) (*Subscription[M], bool) {
	c := make(chan *Item, h.buf)
	s := &Subscription[M]{C: c, c: c, Topic: topic, Meta: meta, hub: h}
	h.mu.Lock()
	if h.closed != "" {
		reason := h.closed
		h.mu.Unlock()
		s.end(reason)
		return s, true
	}
	if limit > 0 && len(h.subs[topic]) >= limit {
		h.mu.Unlock()
		return nil, false
	}
	if h.subs[topic] == nil {
		h.subs[topic] = map[*Subscription[M]]struct{}{}
	}
	h.subs[topic][s] = struct{}{}
	h.mu.Unlock()
	return s, true
}

func (h *Hub[M]) remove(s *Subscription[M]) {
	h.mu.Lock()
	if m := h.subs[s.Topic]; m != nil {
		delete(m, s)
		if len(m) == 0 {
			delete(h.subs, s.Topic)
		}
	}
	h.mu.Unlock()
}

// Watched reports whether topic has subscribers, so that nothing is built
// for a topic nobody watches.
func (h *Hub[M]) Watched(topic string) bool {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return len(h.subs[topic]) > 0
}

// Publish offers item to every subscriber of topic that match accepts (all
// when match is nil; match runs under the hub's read lock and may read
// Meta). It never blocks: a subscriber whose queue is full is dropped with
// ReasonSlow.
func (h *Hub[M]) Publish(topic string, item *Item, match func(*Subscription[M]) bool) {
	if item == nil {
		return
	}
	var slow []*Subscription[M]
	h.mu.RLock()
	for s := range h.subs[topic] {
		if match != nil && !match(s) {
			continue
		}
		select {
		case s.c <- item:
		default:
			slow = append(slow, s)
		}
	}
	h.mu.RUnlock()
	for _, s := range slow {
		s.End(ReasonSlow)
	}
}

// Update runs fn on every subscription of topic under the hub's write
// lock (fn may change Meta) and ends, with reason, those for which fn
// returns false.
func (h *Hub[M]) Update(topic, reason string, fn func(*Subscription[M]) bool) {
	var drop []*Subscription[M]
	h.mu.Lock()
	for s := range h.subs[topic] {
		if !fn(s) {
			drop = append(drop, s)
		}
	}
	h.mu.Unlock()
	for _, s := range drop {
		s.End(reason)
	}
}

// CloseTopic ends every subscription of topic with reason. The topic stays
// open to new subscriptions.
func (h *Hub[M]) CloseTopic(topic, reason string) {
	h.mu.Lock()
	m := h.subs[topic]
	delete(h.subs, topic)
	h.mu.Unlock()
	for s := range m {
		s.end(reason)
	}
}

// Drain ends every subscription with reason; the hub stays open (a
// graceful shutdown drains streams before the owner closes).
func (h *Hub[M]) Drain(reason string) { h.drain(reason, false) }

// Close ends every subscription with reason and makes later subscriptions
// start ended with it. Idempotent; the first reason stays.
func (h *Hub[M]) Close(reason string) { h.drain(reason, true) }

func (h *Hub[M]) drain(reason string, closing bool) {
	if reason == "" {
		reason = ReasonShutdown
	}
	h.mu.Lock()
	if closing && h.closed == "" {
		h.closed = reason
	}
	all := h.subs
	h.subs = map[string]map[*Subscription[M]]struct{}{}
	h.mu.Unlock()
	for _, m := range all {
		for s := range m {
			s.end(reason)
		}
	}
}

// Count returns the number of open subscriptions.
func (h *Hub[M]) Count() int {
	h.mu.RLock()
	defer h.mu.RUnlock()
	n := 0
	for _, m := range h.subs {
		n += len(m)
	}
	return n
}
