package federation

import (
	"bytes"
	"container/heap"
	"context"
	"crypto/sha256"
	"encoding/json"
	"math/rand/v2"
	"slices"
	"time"

	pubsub "github.com/libp2p/go-libp2p-pubsub"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/adpnode/adpnode/adp/room"
	"github.com/adpnode/adpnode/directory"
	"github.com/adpnode/adpnode/index"
)

// announceReq asks for a room's entry to be announced if it changed;
// urgent changes (a new room, a status or topic change) go out within
// urgentAnnounceEvery per room, others (a new seq, counts) within
// seqAnnounceEvery per room.
type announceReq struct {
	id     string
	urgent bool
}

const (
	flushEvery          = 200 * time.Millisecond
	urgentAnnounceEvery = time.Second
	seqAnnounceEvery    = 5 * time.Second
	// publishBurst bounds how many announcements go out back to back; the
	// rest wait for the next flush so gossipsub's per-peer queues never
	// overflow (a full queue drops messages silently).
	publishBurst = 256
)

// published is this node's latest announcement of one of its rooms: what
// peers hold and reconcile against.
type published struct {
	raw     []byte
	id      [32]byte
	issued  int64
	expires int64
	summary []byte // the announced summary, to tell real changes
	refresh time.Time
	room    directory.Entry // the announced entry, to tell urgent changes
	// boundary is the host time its status next changes by the clock
	// (boundaryOf; 0: never).
	boundary int64
}

// urgentChange reports whether s differs from the room's last
// announcement in more than its seq, head, member count and activity: a
// new room, or a change of status, topic, agenda, times, tags, language
// or visibility. Any record of a room that is not active counts as urgent
// too, as its announcement says when it starts or that it ended.
func (f *Federation) urgentChange(s directory.Entry) bool {
	if s.Status != room.StatusActive {
		return true
	}
	p, ok := f.lastPublished(s.ID)
	if !ok {
		return true
	}
	o := p.room
	return o.Status != s.Status || o.Topic != s.Topic || o.Agenda != s.Agenda || o.Visibility != s.Visibility ||
		o.StartTime != s.StartTime || o.EndTime != s.EndTime || o.Language != s.Language || !slices.Equal(o.Tags, s.Tags)
}

// A room's status also changes with no record, when its start or end time
// comes: each announcement notes the next of those times (boundaryOf), and
// announceLoop announces the room urgently once the host clock passes it.

// boundaryOf is the host time at which s's status next changes by the
// clock alone (0: never; it ended or was cancelled).
func boundaryOf(s directory.Entry) int64 {
	switch s.Status {
	case room.StatusScheduled:
		return s.StartTime
	case room.StatusActive:
		return s.EndTime
	}
	return 0
}

// boundary is a room's next status change by the clock (a min-heap of
// them, f.bounds, guarded by pubMu; an entry whose room's announcement
// names another time is stale and skipped).
type boundary struct {
	at int64
	id string
}

type boundaries []boundary

func (b boundaries) Len() int           { return len(b) }
func (b boundaries) Less(i, j int) bool { return b[i].at < b[j].at }
func (b boundaries) Swap(i, j int)      { b[i], b[j] = b[j], b[i] }
func (b *boundaries) Push(x any)        { *b = append(*b, x.(boundary)) }
func (b *boundaries) Pop() any {
	old := *b
	x := old[len(old)-1]
	*b = old[:len(old)-1]
	return x
}

// noteBoundaryLocked records p's room's next status change (pubMu held).
func (f *Federation) noteBoundaryLocked(id string, p *published, old int64) {
	p.boundary = boundaryOf(p.room)
	if p.boundary != 0 && p.boundary != old {
		heap.Push(&f.bounds, boundary{p.boundary, id})
	}
}

// passedBoundaries pops the rooms whose status changed by the clock at or
// before now since their last announcement.
func (f *Federation) passedBoundaries(now int64) []string {
	f.pubMu.Lock()
	defer f.pubMu.Unlock()
	var out []string
	for len(f.bounds) > 0 && f.bounds[0].at <= now {
		b := heap.Pop(&f.bounds).(boundary)
		if p, ok := f.published[b.id]; ok && p.boundary == b.at {
			out = append(out, b.id)
		}
	}
	return out
}

// refreshSweepEvery is how often announceLoop looks for entries due for a
// refresh.
const refreshSweepEvery = 5 * time.Second

// announceLoop announces rooms when they appear, change or end — urgent
// changes at most every urgentAnnounceEvery per room, others at most every
// seqAnnounceEvery — and refreshes each announcement after a third of its
// TTL on average (uniformly in TTL/6..TTL/2, so refreshes do not burst),
// all paced in bursts of at most publishBurst. A room whose summary did
// not change is not announced again before its refresh.
func (f *Federation) announceLoop(ctx context.Context) {
	flush := time.NewTicker(flushEvery)
	defer flush.Stop()
	flushing := true
	sweep := time.NewTicker(refreshSweepEvery)
	defer sweep.Stop()
	pending := map[string]bool{} // room -> urgent
	last := map[string]time.Time{}
	for _, s := range f.n.Summaries() {
		if f.changed(s) {
			pending[s.ID] = true
		}
	}
	for {
		select {
		case <-ctx.Done():
			return
		case r := <-f.announceQ:
			pending[r.id] = pending[r.id] || r.urgent
		case <-flush.C:
			for _, id := range f.passedBoundaries(f.n.NowMs()) {
				pending[id] = true
			}
			now := time.Now()
			sent := 0
			for id, urgent := range pending {
				if sent >= publishBurst {
					break
				}
				gap := seqAnnounceEvery
				if urgent {
					gap = urgentAnnounceEvery
				}
				if now.Sub(last[id]) < gap {
					continue
				}
				delete(pending, id)
				if f.announceRoom(ctx, id, false) {
					last[id] = now
					sent++
				}
			}
		case <-sweep.C:
			now := time.Now()
			for _, id := range f.dueForRefresh(now) {
				if _, ok := pending[id]; !ok {
					pending[id] = false
				}
				f.markRefresh(id)
			}
			// Changes no record told of: compare every summary with
			// what was announced (cheap: no signing).
			if len(f.announceQ) == 0 {
				for _, s := range f.n.Summaries() {
					if _, ok := pending[s.ID]; !ok && f.changed(s) {
						pending[s.ID] = false
					}
				}
			}
		}
		// The flush ticker runs only while rooms wait to be announced:
		// an idle node does not wake five times a second for nothing.
		if len(pending) == 0 && flushing {
			flush.Stop()
			flushing = false
		} else if len(pending) > 0 && !flushing {
			flush.Reset(flushEvery)
			flushing = true
		}
	}
}

// loadOwn restores this node's announcements from before a restart: an
// unchanged room is not announced again (peers hold that very entry), and
// its refresh comes after a random part of what is left of its TTL.
func (f *Federation) loadOwn() {
	now := f.n.NowMs()
	self, _ := json.Marshal(f.Binding())
	// The index parsed and verified these at its Open.
	for id, e := range f.idx.OwnAtOpen() {
		raw := e.Raw
		if e.ExpiresAt <= now || e.Room.ID != id {
			continue
		}
		if b, _ := json.Marshal(e.Host); !bytes.Equal(b, self) {
			continue // new addresses or origin: announce afresh
		}
		sum, _ := json.Marshal(e.Room)
		left := time.Duration(e.ExpiresAt-now) * time.Millisecond
		p := published{raw: raw, id: e.ID, issued: e.IssuedAt, expires: e.ExpiresAt, summary: sum,
			refresh: time.Now().Add(time.Duration(rand.Int64N(int64(left/2) + 1))), room: e.Room}
		f.noteBoundaryLocked(id, &p, 0)
		f.published[id] = p
	}
}

// dueForRefresh lists rooms whose announcement is due for a refresh.
func (f *Federation) dueForRefresh(now time.Time) []string {
	f.pubMu.Lock()
	defer f.pubMu.Unlock()
	var out []string
	for id, p := range f.published {
		if !p.refresh.IsZero() && !now.Before(p.refresh) {
			out = append(out, id)
		}
	}
	return out
}

// markRefresh makes the room's next announceRoom publish even if its
// summary did not change.
func (f *Federation) markRefresh(id string) {
	f.pubMu.Lock()
	if p, ok := f.published[id]; ok {
		p.summary = nil
		p.refresh = time.Time{}
		f.published[id] = p
	}
	f.pubMu.Unlock()
}

func (f *Federation) lastPublished(id string) (published, bool) {
	f.pubMu.Lock()
	defer f.pubMu.Unlock()
	p, ok := f.published[id]
	return p, ok
}

// changed reports whether a room's summary differs from what this node
// last announced (or was never announced).
func (f *Federation) changed(s directory.Entry) bool {
	if s.Visibility == room.Private {
		return false
	}
	b, _ := json.Marshal(s)
	p, ok := f.lastPublished(s.ID)
	return !ok || !bytes.Equal(p.summary, b)
}

// announceRoom announces a local room if its summary changed since the
// last announcement (or force), and reports whether it published.
func (f *Federation) announceRoom(ctx context.Context, id string, force bool) bool {
	s, ok := f.n.Summary(id)
	if !ok || !force && !f.changed(s) {
		return false
	}
	return f.announce(ctx, s)
}

// ttlOf is how long an announcement of the room is valid.
func (f *Federation) ttlOf(s directory.Entry) time.Duration {
	if s.Status == room.StatusEnded || s.Status == room.StatusCancelled {
		return f.cfg.TombstoneTTL
	}
	return f.cfg.AnnounceTTL
}

// Binding returns this node's host binding.
func (f *Federation) Binding() index.Binding {
	var addrs []string
	for _, a := range f.h.Addrs() {
		addrs = append(addrs, a.String())
	}
	return index.Binding{Key: f.signer.HostKey(), PeerID: f.h.ID().String(), Origin: f.n.Origin(), Addrs: addrs}
}

// announce publishes a signed entry for a local room. Private rooms are
// never announced (DECISIONS 12).
func (f *Federation) announce(ctx context.Context, s directory.Entry) bool {
	if s.Visibility == room.Private {
		return false
	}
	now := f.n.NowMs()
	raw, err := f.signAnnouncement(s, now)
	if err != nil {
		f.log.Error("sign announcement", "room", s.ID, "err", err)
		return false
	}
	sum, _ := json.Marshal(s)
	ttl := f.ttlOf(s)
	// Refresh after TTL/6..TTL/2, uniformly: a third of the TTL on
	// average, and a burst of new rooms refreshes spread over a third.
	refresh := ttl/6 + time.Duration(rand.Int64N(int64(ttl/3)+1))
	f.pubMu.Lock()
	p := published{raw: raw, id: sha256.Sum256(raw), issued: now, expires: now + ttl.Milliseconds(),
		summary: sum, refresh: time.Now().Add(refresh), room: s}
	f.noteBoundaryLocked(s.ID, &p, f.published[s.ID].boundary)
	f.published[s.ID] = p
	f.pubMu.Unlock()
	f.reconStale.Store(true)
	f.idx.SetOwn(s.ID, raw)
	if err := f.idxTopic.Publish(ctx, raw); err != nil && ctx.Err() == nil {
		f.log.Warn("publish announcement", "room", s.ID, "err", err)
	}
	return true
}

// validateAnnouncement is the index topic validator. Reject (the sender is
// penalised): bad signature or shape, a key that is not the publishing
// peer's, private rooms, oversize, and whatever admit rejects (future
// timestamps, room IDs another host holds). Ignore: expired, duplicate,
// stale, over a limit, or from a host whose binding is not verified.
// Entries are stored here, so that an ignored (not forwarded) entry of
// an unverified host is still known locally.
func (f *Federation) validateAnnouncement(ctx context.Context, _ peer.ID, m *pubsub.Message) pubsub.ValidationResult {
	if m.ReceivedFrom == f.h.ID() { // our own publication
		return pubsub.ValidationAccept
	}
	e, err := index.Parse(m.Data)
	if err != nil {
		f.log.Debug("rejected announcement", "from", m.ReceivedFrom, "err", err)
		return f.count(pubsub.ValidationReject)
	}
	author, err := peer.IDFromBytes(m.From)
	if err != nil || author.String() != e.Host.PeerID {
		return f.count(pubsub.ValidationReject)
	}
	if k, ok := HostKeyOf(author); !ok || k != e.Host.Key {
		return f.count(pubsub.ValidationReject)
	}
	if e.ExpiresAt <= f.n.NowMs() {
		return f.count(pubsub.ValidationIgnore)
	}
	return f.count(f.admit(ctx, e))
}

// consumeIndex drains the index subscription (validateAnnouncement has
// stored what it accepted).
func (f *Federation) consumeIndex(ctx context.Context, sub *pubsub.Subscription) {
	defer sub.Cancel()
	for {
		if _, err := sub.Next(ctx); err != nil {
			return
		}
	}
}

// Directory returns the rooms of the federation this node knows, each
// room ID once: its own public and restricted rooms, then remote rooms
// of hosts whose binding is verified (unverified hosts' rooms stay out).
func (f *Federation) Directory() []directory.Entry {
	es := f.idx.Entries(f.n.NowMs(), true)
	remote := make([]directory.Entry, len(es))
	for i, e := range es {
		remote[i] = e.Room
	}
	return directory.Merge(f.n.Summaries(), remote)
}
