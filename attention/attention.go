// Package attention is a host-local extension of ADP (not part of ADP 1.0;
// no ADP shape changes): durable directory subscriptions with a change
// feed per subscription, a mentions inbox per agent, and the agent's live
// streams: subscriptions of the agent's topic on a live.Hub the service
// owns and closes in its Close. See docs/attention.md for the cursor rules
// and retention.
//
// State lives in Badger under the prefix "at/". Mentions and join-request
// outcomes are derived by followers of the change feeds of the node and
// of the mirror (follow.go), each storing its feed position with what it
// derives; one owner goroutine (started by Open, stopped by Close) runs
// the directory diffs. Readers enforce expiry, retention and access on
// every read.
package attention

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/adpnode/adpnode/adp/identity"
	"github.com/adpnode/adpnode/adp/record"
	"github.com/adpnode/adpnode/adp/room"
	"github.com/adpnode/adpnode/directory"
	"github.com/adpnode/adpnode/hostport"
	"github.com/adpnode/adpnode/internal/groupcommit"
	"github.com/adpnode/adpnode/internal/storelayout"
	"github.com/adpnode/adpnode/live"
)

// Prefix is the key space of this package in the node's Badger.
const Prefix = storelayout.Attention

// Key spaces: key and value shapes are in the storage layout table
// (internal/storelayout, docs/storage.md).
const (
	keyInstance = storelayout.AttentionInstance
	pfxSub      = storelayout.AttentionSub
	pfxFeed     = storelayout.AttentionFeed
	pfxMatch    = storelayout.AttentionMatch
	pfxMention  = storelayout.AttentionMention
	pfxInbox    = storelayout.AttentionInbox
	pfxWater    = storelayout.AttentionWater
	keyPass     = storelayout.AttentionPass // retired: deleted at start
	pfxPrivate  = storelayout.AttentionPrivate
	keySeen     = storelayout.AttentionSeen
	keyVersion  = storelayout.AttentionVersion
	// keyRestored is the node's: written by each restore from a backup.
	keyRestored = storelayout.Restored
)

// Config wires the package to the node around it.
type Config struct {
	DB  *badger.DB
	Now func() int64 // Unix ms
	// Directory returns the federated directory (public and restricted
	// rooms, local and remote); Lookup one room of this node (any
	// visibility); Locate the Room URL and host of a mirrored room;
	// CanRead whether agent may read the events of a room of this node.
	Directory func() []directory.Entry
	Lookup    func(roomID string) (directory.Entry, bool)
	Locate    func(roomID string) (url, host string, ok bool)
	CanRead   func(roomID string, agent identity.AgentID) bool
	Log       *slog.Logger

	MaxSubscriptions int           // per agent (default 20)
	MaxTTL           time.Duration // default 30 days
	DefaultTTL       time.Duration // default 7 days
	Retention        int           // items kept per feed/inbox (default 1,000)
	RetentionAge     time.Duration // items older are gone (default 7 days)
	MaxMatches       int           // rooms tracked per subscription (default 1,000)
	Rescan           time.Duration // full directory diff interval (default 10 s)
	MaxWatchers      int           // live streams per agent (default 4)
	WatchBuffer      int           // items queued per live stream (default 256); a stream further behind ends with slow_consumer
	// Batch is the least time between two owner passes (default 25 ms):
	// the directory changes that arrive meanwhile are stored in one batch.
	Batch time.Duration
	// Local is the change feed of the records of the rooms this node
	// hosts, Mirror that of the mirror's verified records (nil: none).
	// Mentions and join-request outcomes are derived from them (follow.go).
	Local, Mirror Source
	// Commit queues writes into the node's group commit; done runs once
	// they are durable (Node.CommitWith). nil: each batch commits a
	// transaction of its own. See store.go.
	Commit func(ops []groupcommit.KV, done func(error)) error

	onPass func() // tests and benchmarks: after each owner pass
	// Tests: the commit size (0: maxChunkOps, maxChunkBytes), and a hook
	// called before each commit i of n of one batch is queued.
	chunkOps, chunkBytes int
	beforeCommit         func(i, n int)
	// Tests: how often a follower that derived nothing stores its
	// position (0: posEvery), and a stop that stores nothing (a crash).
	posEvery    time.Duration
	crashOnStop bool
}

func (c *Config) defaults() {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&c.MaxSubscriptions, 20)
	def(&c.Retention, 1000)
	def(&c.MaxMatches, 1000)
	def(&c.MaxWatchers, 4)
	def(&c.WatchBuffer, 256)
	dur := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	dur(&c.MaxTTL, 30*24*time.Hour)
	dur(&c.DefaultTTL, 7*24*time.Hour)
	dur(&c.RetentionAge, 7*24*time.Hour)
	dur(&c.Rescan, 10*time.Second)
	dur(&c.Batch, 25*time.Millisecond)
	if c.DefaultTTL > c.MaxTTL {
		c.DefaultTTL = c.MaxTTL
	}
	if c.Log == nil {
		c.Log = slog.Default()
	}
	if c.Directory == nil {
		c.Directory = func() []directory.Entry { return nil }
	}
	if c.Lookup == nil {
		c.Lookup = func(string) (directory.Entry, bool) { return directory.Entry{}, false }
	}
	if c.Locate == nil {
		c.Locate = func(string) (string, string, bool) { return "", "", false }
	}
	if c.CanRead == nil {
		c.CanRead = func(string, identity.AgentID) bool { return false }
	}
}

// Subscription is one agent's durable directory subscription.
type Subscription struct {
	ID        string           `json:"id"`
	Agent     identity.AgentID `json:"agent"`
	Filter    Filter           `json:"filter"`
	CreatedAt int64            `json:"created_at"`
	ExpiresAt int64            `json:"expires_at"`
}

type subMeta struct {
	Subscription
	Head  int64 `json:"head"`
	Floor int64 `json:"floor"`
}

type matchState struct {
	V int64 `json:"v"` // the room's version: the seq of its latest item

	F string `json:"f"`
}

type sub struct {
	subMeta
	matched map[string]matchState
	// durable: the head as far as it is stored; a snapshot (after=0) is
	// answered only once durable reaches Head, so no cursor is handed
	// out that a crash could take back.
	durable int64
}

// Feed item kinds and unavailable reasons.
const (
	KindAppeared    = "appeared"
	KindChanged     = "changed"
	KindUnavailable = "unavailable"

	ReasonEnded       = "ended"
	ReasonCancelled   = "cancelled"
	ReasonExpired     = "expired"
	ReasonRemoved     = "removed"
	ReasonNoLongerHit = "no_longer_matching"
)

// FeedItem is one change of a subscription's result set.
type FeedItem struct {
	Seq         int64            `json:"seq"`
	RoomID      string           `json:"room_id"`
	Version     int64            `json:"version"`
	Kind        string           `json:"kind"`
	Unavailable bool             `json:"unavailable,omitempty"`
	Reason      string           `json:"reason,omitempty"`
	Room        *directory.Entry `json:"room,omitempty"`
	At          int64            `json:"at"`
}

// MentionItem is one record that mentions the agent.
type MentionItem struct {
	Seq        int64            `json:"seq"`
	RoomID     string           `json:"room_id"`
	RoomSeq    int64            `json:"room_seq"`
	RecordHash string           `json:"record_hash"`
	RoomURL    string           `json:"room_url"`
	Host       string           `json:"host"`
	Actor      identity.AgentID `json:"actor"`
	Type       string           `json:"type"`
	CreatedAt  int64            `json:"created_at"`
	At         int64            `json:"at"`     // when this node stored the record
	Source     string           `json:"source"` // "local" or "mirror"
}

type storedMention struct {
	MentionItem
	Public   bool `json:"p"` // a public room's record: readable by anyone
	Readable bool `json:"r"` // whether the agent could read the room when the item was stored
}

// inbox is an agent's inbox: its head and floor (at/mh/), and the latest
// item seq of each non-public room it holds items of (at/mp/), what the
// visibility epoch is computed from without reading the items.
type inbox struct {
	head, floor int64
	private     map[string]int64
}

func (ib *inbox) setPrivate(roomID string, seq int64) {
	if ib.private == nil {
		ib.private = map[string]int64{}
	}
	ib.private[roomID] = seq
}

// Attention is the subscription, inbox and live-stream service.
type Attention struct {
	cfg      Config
	instance string

	mu       sync.RWMutex
	subs     map[string]*sub
	byAgent  map[identity.AgentID]map[string]*sub
	byTag    map[string]map[string]*sub // first filter tag -> subs
	untagged map[string]*sub
	byRoom   map[string]map[string]*sub // room -> subs that hold it matched
	known    map[string]known           // room -> what was last evaluated
	inboxes  map[identity.AgentID]*inbox
	flushed  chan struct{} // closed (and replaced, under mu) after each write

	// wmu orders writers (the followers, the owner, the API): held from
	// taking seqs in memory until their writes are durable, so the
	// writes reach the disk in the order the seqs were taken.
	wmu sync.Mutex

	pmu       sync.Mutex
	pendLook  map[string]bool // rooms whose directory summary may have changed (RoomChanged)
	rescanDue bool
	wake      chan struct{}
	live      *live.Hub[struct{}] // agent streams, one topic per agent (watch.go)
	closed    atomic.Bool
	ctx       context.Context
	cancel    context.CancelFunc
	done      chan struct{}
	followers []*follower    // one per change feed (follow.go)
	fwg       sync.WaitGroup // the followers' goroutines

	mirWM map[string]int64 // mirrored room -> highest seq derived (under wmu)
	fresh bool             // the store was created by this Open
}

type known struct {
	fp    string
	local bool
}

type pendingRecord struct {
	rec *record.Record
	// env: rec's envelope (nil: parse it here).
	env   *identity.Envelope
	local bool
	// inbox: set by a resync: what the inboxes already hold, so a record
	// derived before is not derived twice.
	inbox *inboxIndex
}

// Open loads stored subscriptions and inboxes and starts the owner.
func Open(cfg Config) (*Attention, error) {
	cfg.defaults()
	a := &Attention{cfg: cfg, subs: map[string]*sub{}, byAgent: map[identity.AgentID]map[string]*sub{},
		byTag: map[string]map[string]*sub{}, untagged: map[string]*sub{}, byRoom: map[string]map[string]*sub{},
		known: map[string]known{}, inboxes: map[identity.AgentID]*inbox{}, pendLook: map[string]bool{},
		mirWM: map[string]int64{}, flushed: make(chan struct{}),
		wake: make(chan struct{}, 1), live: live.NewHub[struct{}](cfg.WatchBuffer), done: make(chan struct{})}
	if err := a.load(); err != nil {
		return nil, err
	}
	for _, src := range []struct {
		s     Source
		local bool
	}{{cfg.Local, true}, {cfg.Mirror, false}} {
		if src.s == nil {
			continue
		}
		fs, err := a.newFollower(src.s, src.local)
		if err != nil {
			return nil, err
		}
		a.followers = append(a.followers, fs)
	}
	a.ctx, a.cancel = context.WithCancel(context.Background())
	a.rescanDue = true
	go a.run()
	for _, fs := range a.followers {
		a.fwg.Add(1)
		go a.follow(fs)
	}
	return a, nil
}

// getString reads a single key (absent: "").
func getString(txn *badger.Txn, key string) (string, error) {
	item, err := txn.Get([]byte(key))
	if errors.Is(err, badger.ErrKeyNotFound) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	v, err := item.ValueCopy(nil)
	return string(v), err
}

func (a *Attention) load() error {
	if err := a.cfg.DB.Update(func(txn *badger.Txn) error {
		inst, err := getString(txn, keyInstance)
		if err != nil {
			return err
		}
		// A restore from a backup marks the dir (keyRestored). A store
		// made under another mark, or none, is a copy whose feeds went
		// on elsewhere after the backup: a new stream, so every saved
		// cursor gets reset_required.
		mark, err := getString(txn, keyRestored)
		if err != nil {
			return err
		}
		seen, err := getString(txn, keySeen)
		if err != nil {
			return err
		}
		a.instance = inst
		if inst == "" || mark != seen {
			var b [8]byte
			rand.Read(b[:])
			a.instance = hex.EncodeToString(b[:])
			if err := txn.Set([]byte(keyInstance), []byte(a.instance)); err != nil {
				return err
			}
			if err := txn.Set([]byte(keySeen), []byte(mark)); err != nil {
				return err
			}
		}
		if inst == "" {
			a.fresh = true
			if err := txn.Set([]byte(keyVersion), u64(layoutVersion)); err != nil {
				return err
			}
		}
		// The time of the last pass steered the catch-up before the
		// change feeds; nothing reads it now.
		return txn.Delete([]byte(keyPass))
	}); err != nil {
		return err
	}
	if err := a.upgrade(); err != nil {
		return err
	}
	return a.cfg.DB.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{PrefetchValues: true, Prefix: []byte(pfxSub)})
		for it.Rewind(); it.Valid(); it.Next() {
			var m subMeta
			if err := it.Item().Value(func(v []byte) error { return json.Unmarshal(v, &m) }); err != nil {
				it.Close()
				return err
			}
			a.addSub(&sub{subMeta: m, matched: map[string]matchState{}, durable: m.Head})
		}
		it.Close()
		it = txn.NewIterator(badger.IteratorOptions{PrefetchValues: true, Prefix: []byte(pfxMatch)})
		for it.Rewind(); it.Valid(); it.Next() {
			k := string(it.Item().Key()[len(pfxMatch):])
			if len(k) < 17 || k[16] != '/' {
				continue
			}
			s := a.subs[k[:16]]
			var ms matchState
			if s == nil || it.Item().Value(func(v []byte) error { return json.Unmarshal(v, &ms) }) != nil {
				continue
			}
			a.setMatched(s, k[17:], ms)
			a.known[k[17:]] = known{fp: "?"}
		}
		it.Close()
		if err := a.loadWater(txn); err != nil {
			return err
		}
		return a.loadInboxes(txn)
	})
}

// loadInboxes reads the inboxes' heads and floors, and their non-public
// rooms.
func (a *Attention) loadInboxes(txn *badger.Txn) error {
	it := txn.NewIterator(badger.IteratorOptions{PrefetchValues: true, Prefix: []byte(pfxInbox)})
	for it.Rewind(); it.Valid(); it.Next() {
		agent := identity.AgentID(it.Item().Key()[len(pfxInbox):])
		_ = it.Item().Value(func(v []byte) error {
			if len(v) == 16 {
				a.inboxes[agent] = &inbox{head: int64(binary.BigEndian.Uint64(v)), floor: int64(binary.BigEndian.Uint64(v[8:]))}
			}
			return nil
		})
	}
	it.Close()
	it = txn.NewIterator(badger.IteratorOptions{PrefetchValues: true, Prefix: []byte(pfxPrivate)})
	defer it.Close()
	for it.Rewind(); it.Valid(); it.Next() {
		agent, roomID, ok := strings.Cut(string(it.Item().Key()[len(pfxPrivate):]), "/")
		ib := a.inboxes[identity.AgentID(agent)]
		if !ok || ib == nil {
			continue
		}
		_ = it.Item().Value(func(v []byte) error {
			if len(v) == 8 {
				ib.setPrivate(roomID, int64(binary.BigEndian.Uint64(v)))
			}
			return nil
		})
	}
	return nil
}

// layoutVersion is attention's own layout (keyVersion): 2 since the index
// of non-public rooms per inbox (at/mp/) is complete.
const layoutVersion = 2

// upgrade brings, once, inboxes stored before layoutVersion 2 (a store
// without keyVersion) to it, in bounded batches: it builds the index of
// non-public rooms and makes the items' times grow with their seqs.
func (a *Attention) upgrade() error {
	var have int64
	if err := a.cfg.DB.View(func(txn *badger.Txn) error {
		v, err := getString(txn, keyVersion)
		if len(v) == 8 {
			have = int64(binary.BigEndian.Uint64([]byte(v)))
		}
		return err
	}); err != nil || have >= layoutVersion {
		return err
	}
	// Items of that age were stamped with the record's received_at, which
	// need not grow with their seqs; the age watermark's binary search
	// needs it to. Each inbox's times are raised to the greatest before
	// them (an item then ages out no earlier than one stored before it).
	latest := map[string]int64{} // agent/room -> latest seq
	var w writes
	var flushErr error
	flush := func() {
		if len(w.ops) > 0 && flushErr == nil {
			flushErr = a.write(&w)
		}
		w = writes{}
	}
	owner, at := "", int64(0)
	if err := a.cfg.DB.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{PrefetchValues: true, Prefix: []byte(pfxMention)})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			k := it.Item().KeyCopy(nil)
			rest := k[len(pfxMention):]
			if len(rest) < 9 {
				continue
			}
			var m storedMention
			if it.Item().Value(func(v []byte) error { return json.Unmarshal(v, &m) }) != nil {
				continue
			}
			agent := string(rest[:len(rest)-9])
			if agent != owner {
				owner, at = agent, 0
			}
			if m.At < at {
				m.At = at
				w.set(k, appendMention(nil, &m))
				w.unit()
				if len(w.ops) >= 4096 {
					flush()
				}
			}
			at = m.At
			if !m.Public && m.Readable {
				key := agent + "/" + m.RoomID
				latest[key] = max(latest[key], m.Seq)
			}
		}
		return nil
	}); err != nil {
		return err
	}
	for k, seq := range latest {
		w.set([]byte(pfxPrivate+k), u64(seq))
		w.unit()
	}
	w.set([]byte(keyVersion), u64(layoutVersion))
	flush()
	return flushErr
}

// Close stops the followers (what they have not derived stays in the
// feeds, after their stored positions) and the owner after a final pass,
// and ends every live stream.
func (a *Attention) Close() error {
	if a.closed.Swap(true) {
		return nil
	}
	a.cancel()
	a.fwg.Wait()
	<-a.done
	// After the owner's final pass, so its items reach the streams first.
	a.live.Close(live.ReasonShutdown)
	return nil
}

// RoomChanged tells the service that a room's directory summary may have
// changed without a record (a scheduled status change): the owner looks
// at it again at its next pass. The periodic directory diff (Rescan)
// catches what is not told.
func (a *Attention) RoomChanged(roomID string) {
	if a.closed.Load() {
		return
	}
	a.pmu.Lock()
	a.pendLook[roomID] = true
	a.pmu.Unlock()
	a.poke()
}

// IndexChanged is the index's change hook: a remote room's entry changed.
func (a *Attention) IndexChanged(string) {
	if a.closed.Load() {
		return
	}
	a.pmu.Lock()
	a.rescanDue = true
	a.pmu.Unlock()
	a.poke()
}

var (
	mentionsMark = []byte(`"mentions":[`)
	reviewMark   = []byte(`"type":"room.join.review"`)
)

// interesting picks the records that may mention anyone or review a join
// request, by two substring scans of the stored record, before it is
// parsed.
func interesting(env []byte) bool {
	return bytes.Contains(env, mentionsMark) || bytes.Contains(env, reviewMark)
}

// envelopeTail is the length of what follows the event in a canonical
// envelope: `,"hash":"` 43 characters `","signature":"` 86 characters `"}`.
const envelopeTail = 9 + 43 + 15 + 86 + 2

// contentOnly reports whether a record's event type never changes what a
// directory feed shows (a message, a reaction, a poll vote), so the write
// path need not have the room's summary looked at again. It reads the
// event's type, the last member of the canonical event, from its fixed
// place; an envelope of another layout counts as not content-only. The
// periodic directory diff would catch a miss anyway.
func contentOnly(env []byte) bool {
	if len(env) < envelopeTail+20 || !bytes.HasPrefix(env[len(env)-envelopeTail:], []byte(`,"hash":"`)) {
		return false
	}
	ev := env[:len(env)-envelopeTail]
	i := bytes.LastIndex(ev, []byte(`"type":"`))
	if i < 0 || !bytes.HasSuffix(ev, []byte(`"}`)) {
		return false
	}
	return hostport.ContentOnlyType(string(ev[i+len(`"type":"`) : len(ev)-2]))
}

func (a *Attention) poke() {
	select {
	case a.wake <- struct{}{}:
	default:
	}
}

func (a *Attention) run() {
	defer close(a.done)
	t := time.NewTicker(a.cfg.Rescan)
	defer t.Stop()
	var last time.Time
	for {
		began := time.Now()
		var later <-chan time.Time
		if wait := a.pass(&last, false); wait > 0 {
			later = time.After(wait)
		}
		// Let a batch gather before the next pass.
		if rest := a.cfg.Batch - time.Since(began); rest > 0 {
			select {
			case <-a.ctx.Done():
				a.pass(&last, true)
				return
			case <-time.After(rest):
			}
		}
		select {
		case <-a.ctx.Done():
			a.pass(&last, true)
			return
		case <-a.wake:
		case <-later:
		case <-t.C:
			a.pmu.Lock()
			a.rescanDue = true
			a.pmu.Unlock()
		}
	}
}

// pass looks again at the rooms it was told of (RoomChanged), with a full
// directory diff when one is due and none ran in the last second (force:
// regardless). It returns how long until a due diff may run (0: none
// due).
func (a *Attention) pass(last *time.Time, force bool) time.Duration {
	a.pmu.Lock()
	wait := time.Duration(0)
	rescan := false
	if a.rescanDue {
		if since := time.Since(*last); force || since >= time.Second {
			rescan, a.rescanDue = true, false
		} else {
			wait = time.Second - since
		}
	}
	look := a.pendLook
	a.pendLook = map[string]bool{}
	a.pmu.Unlock()
	var w writes
	a.wmu.Lock()
	a.mu.Lock()
	now := a.cfg.Now()
	a.lookLocked(look, now, &w)
	if rescan {
		*last = time.Now()
		a.rescanLocked(now, &w)
	}
	a.mu.Unlock()
	if len(w.ops) > 0 {
		if err := a.write(&w); err != nil {
			a.cfg.Log.Error("attention: store feed items", "err", err)
		}
	}
	a.wmu.Unlock()
	a.deliver(w.live)
	if h := a.cfg.onPass; h != nil {
		h()
	}
	return wait
}

// lookLocked evaluates the rooms of this node whose summary may have
// changed.
func (a *Attention) lookLocked(look map[string]bool, now int64, w *writes) {
	for id := range look {
		s, ok := a.cfg.Lookup(id)
		if ok && s.Visibility != room.Private {
			a.observe(id, &s, true, now, w)
		} else if _, was := a.known[id]; was || len(a.byRoom[id]) > 0 {
			a.observe(id, nil, true, now, w)
		}
	}
}

// liveEvent is encoded only when its agent has a live stream.
type liveEvent struct {
	agent identity.AgentID
	event string
	data  any
}

type writes struct {
	heads map[*sub]int64   // feeds' heads this batch moves, durable once it is stored
	ops   []groupcommit.KV // sets and deletes, applied in order (store.go)
	cuts  []int            // indices of ops where a commit may end
	live  []liveEvent
	sums  map[string]*directory.Entry // Lookup, once per room and pass (nil: not hosted)
}

func (w *writes) summary(a *Attention, roomID string) (directory.Entry, bool) {
	if s, ok := w.sums[roomID]; ok {
		if s == nil {
			return directory.Entry{}, false
		}
		return *s, true
	}
	if w.sums == nil {
		w.sums = map[string]*directory.Entry{}
	}
	s, ok := a.cfg.Lookup(roomID)
	if !ok {
		w.sums[roomID] = nil
		return s, false
	}
	w.sums[roomID] = &s
	return s, true
}

func seqKey(pfx, owner string, seq int64) []byte {
	k := make([]byte, 0, len(pfx)+len(owner)+9)
	k = append(k, pfx...)
	k = append(k, owner...)
	k = append(k, '/')
	return binary.BigEndian.AppendUint64(k, uint64(seq))
}

func (a *Attention) rescanLocked(now int64, w *writes) {
	dir := a.cfg.Directory()
	seen := make(map[string]bool, len(dir))
	for i := range dir {
		s := &dir[i]
		if s.Visibility == room.Private {
			continue
		}
		seen[s.ID] = true
		if a.known[s.ID].fp != fingerprint(s) {
			_, local := a.cfg.Lookup(s.ID)
			a.observe(s.ID, s, local, now, w)
		}
	}
	for id, k := range a.known {
		if !seen[id] {
			a.observe(id, nil, k.local, now, w)
		}
	}
	// Expired subscriptions go now (reads already ignore them).
	for _, s := range a.subs {
		if s.ExpiresAt <= now {
			a.dropSubLocked(s, w)
		}
	}
}

// observe evaluates one room (nil: gone from the directory) against every
// subscription that could hold it.
func (a *Attention) observe(id string, s *directory.Entry, local bool, now int64, w *writes) {
	fp := ""
	hay := ""
	if s != nil {
		fp = fingerprint(s)
		if k, ok := a.known[id]; ok && k.fp == fp {
			return // nothing a feed shows changed (a new record, say)
		}
		hay = directory.Haystack(s)
		a.known[id] = known{fp: fp, local: local}
	} else {
		delete(a.known, id)
	}
	visit := func(sb *sub) {
		if sb.ExpiresAt <= now {
			return
		}
		was, had := sb.matched[id]
		hit := s != nil && sb.Filter.MatchText(s, hay)
		switch {
		case !had && hit:
			if len(sb.matched) >= a.cfg.MaxMatches {
				return
			}
			ms := matchState{V: a.appendFeed(sb, FeedItem{RoomID: id, Kind: KindAppeared, Room: s, At: now}, w), F: fp}
			a.setMatched(sb, id, ms)
			w.set([]byte(pfxMatch+sb.ID+"/"+id), mustJSON(ms))
		case had && hit && was.F != fp:
			ms := matchState{V: a.appendFeed(sb, FeedItem{RoomID: id, Kind: KindChanged, Room: s, At: now}, w), F: fp}
			a.setMatched(sb, id, ms)
			w.set([]byte(pfxMatch+sb.ID+"/"+id), mustJSON(ms))
		case had && !hit:
			reason := ReasonNoLongerHit
			switch {
			case s == nil && local:
				reason = ReasonRemoved
			case s == nil:
				reason = ReasonExpired
			case s.Status == room.StatusEnded:
				reason = ReasonEnded
			case s.Status == room.StatusCancelled:
				reason = ReasonCancelled
			}
			a.appendFeed(sb, FeedItem{RoomID: id, Kind: KindUnavailable, Unavailable: true, Reason: reason, At: now}, w)
			a.unsetMatched(sb, id)
			w.del([]byte(pfxMatch + sb.ID + "/" + id))
		}
		w.unit()
	}
	seen := map[*sub]bool{}
	for _, sb := range a.byRoom[id] {
		seen[sb] = true
	}
	for sb := range seen {
		visit(sb)
	}
	if s == nil {
		return
	}
	try := func(sb *sub) {
		if !seen[sb] {
			seen[sb] = true
			visit(sb)
		}
	}
	for _, sb := range a.untagged {
		try(sb)
	}
	for _, t := range s.Tags {
		for _, sb := range a.byTag[directory.Fold(t)] {
			try(sb)
		}
	}
}

// appendFeed appends it to sb's feed and returns its seq, which is also its
// version: the versions of one (stream, room) grow with every item, and a
// room that stops matching and matches again continues above its last
// version (a count per room would start again at 1).
func (a *Attention) appendFeed(sb *sub, it FeedItem, w *writes) int64 {
	sb.Head++
	it.Seq = sb.Head
	it.Version = it.Seq
	w.set(seqKey(pfxFeed, sb.ID, it.Seq), mustJSON(it))
	for sb.Head-sb.Floor > int64(a.cfg.Retention) {
		sb.Floor++
		w.del(seqKey(pfxFeed, sb.ID, sb.Floor))
	}
	w.set([]byte(pfxSub+sb.ID), mustJSON(sb.subMeta))
	if w.heads == nil {
		w.heads = map[*sub]int64{}
	}
	w.heads[sb] = sb.Head
	w.live = append(w.live, liveEvent{sb.Agent, "subscription", map[string]any{"subscription_id": sb.ID, "item": it}})
	return it.Seq
}

func (a *Attention) setMatched(sb *sub, id string, ms matchState) {
	sb.matched[id] = ms
	m := a.byRoom[id]
	if m == nil {
		m = map[string]*sub{}
		a.byRoom[id] = m
	}
	m[sb.ID] = sb
}

func (a *Attention) unsetMatched(sb *sub, id string) {
	delete(sb.matched, id)
	if m := a.byRoom[id]; m != nil {
		delete(m, sb.ID)
		if len(m) == 0 {
			delete(a.byRoom, id)
		}
	}
}

func (a *Attention) addSub(s *sub) {
	a.subs[s.ID] = s
	m := a.byAgent[s.Agent]
	if m == nil {
		m = map[string]*sub{}
		a.byAgent[s.Agent] = m
	}
	m[s.ID] = s
	if len(s.Filter.Tags) == 0 {
		a.untagged[s.ID] = s
		return
	}
	key := directory.Fold(s.Filter.Tags[0])
	t := a.byTag[key]
	if t == nil {
		t = map[string]*sub{}
		a.byTag[key] = t
	}
	t[s.ID] = s
}

func (a *Attention) removeSub(s *sub) {
	delete(a.subs, s.ID)
	if m := a.byAgent[s.Agent]; m != nil {
		delete(m, s.ID)
		if len(m) == 0 {
			delete(a.byAgent, s.Agent)
		}
	}
	delete(a.untagged, s.ID)
	if len(s.Filter.Tags) > 0 {
		key := directory.Fold(s.Filter.Tags[0])
		if t := a.byTag[key]; t != nil {
			delete(t, s.ID)
			if len(t) == 0 {
				delete(a.byTag, key)
			}
		}
	}
	for id := range s.matched {
		a.unsetMatched(s, id)
	}
}

// dropSubLocked removes a subscription and queues the deletion of its keys.
func (a *Attention) dropSubLocked(s *sub, w *writes) {
	for id := range s.matched {
		w.del([]byte(pfxMatch + s.ID + "/" + id))
	}
	for q := s.Floor + 1; q <= s.Head; q++ {
		w.del(seqKey(pfxFeed, s.ID, q))
	}
	w.del([]byte(pfxSub + s.ID))
	w.unit()
	a.removeSub(s)
}

// recordLocked turns one accepted or mirrored record into mention items
// and join-request outcomes.
func (a *Attention) recordLocked(p pendingRecord, now int64, w *writes) {
	env := p.env
	if env == nil {
		var err error
		if env, err = identity.ParseEnvelope(p.rec.Envelope); err != nil {
			return
		}
	}
	ev := &env.Event
	if p.local && ev.Type == "room.join.review" {
		a.joinOutcome(p.rec, ev, w)
	}
	if len(ev.Mentions) == 0 {
		return
	}
	// At is when this node stores the item (retention counts from it),
	// never the origin's received_at: a backfilled old record must not
	// age out the items stored before it.
	it := storedMention{MentionItem: MentionItem{RoomID: p.rec.RoomID, RoomSeq: p.rec.Seq, RecordHash: p.rec.Hash,
		Actor: ev.Actor, Type: ev.Type, CreatedAt: ev.CreatedAt, At: now}}
	if p.local {
		s, ok := w.summary(a, p.rec.RoomID)
		if !ok {
			return
		}
		it.RoomURL, it.Host, it.Source, it.Public = s.URL, s.Host, "local", s.Visibility == room.Public
	} else {
		url, host, ok := a.cfg.Locate(p.rec.RoomID)
		if !ok {
			return
		}
		it.RoomURL, it.Host, it.Source, it.Public = url, host, "mirror", true // only public rooms are mirrored
	}
	seen := map[string]bool{}
	for _, m := range ev.Mentions {
		if seen[m] {
			continue
		}
		seen[m] = true
		agent := identity.AgentID(m)
		if p.inbox != nil && !p.inbox.add(a, agent, it.RoomID, it.RoomSeq) {
			continue // derived before the restart
		}
		it := it
		// A mention the agent may not read leaves no trace: no item, no
		// seq, no live event.
		if !it.Public && !a.cfg.CanRead(it.RoomID, agent) {
			continue
		}
		it.Readable = true
		ib := a.inboxes[agent]
		if ib == nil {
			ib = &inbox{}
			a.inboxes[agent] = ib
		}
		ib.head++
		it.Seq = ib.head
		w.set(seqKey(pfxMention, m, it.Seq), appendMention(nil, &it))
		if !it.Public {
			ib.setPrivate(it.RoomID, it.Seq)
			w.set(privateKey(m, it.RoomID), u64(it.Seq))
		}
		floor := ib.floor
		for ib.head-ib.floor > int64(a.cfg.Retention) {
			ib.floor++
			w.del(seqKey(pfxMention, m, ib.floor))
		}
		if ib.floor > floor {
			for id, seq := range ib.private {
				if seq <= ib.floor {
					delete(ib.private, id)
					w.del(privateKey(m, id))
				}
			}
		}
		hf := binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64(nil, uint64(ib.head)), uint64(ib.floor))
		w.set([]byte(pfxInbox+m), hf)
		w.unit()
		w.live = append(w.live, liveEvent{agent, "mention", it.MentionItem})
	}
}

func privateKey(agent, roomID string) []byte { return []byte(pfxPrivate + agent + "/" + roomID) }

func (a *Attention) joinOutcome(rec *record.Record, ev *identity.Event, w *writes) {
	var p struct {
		Request struct {
			ID        string           `json:"id"`
			Applicant identity.AgentID `json:"applicant"`
		} `json:"request"`
		Decision string `json:"decision"`
		Role     string `json:"role"`
	}
	if json.Unmarshal(ev.Payload, &p) != nil || p.Request.Applicant == "" {
		return
	}
	w.live = append(w.live, liveEvent{p.Request.Applicant, "join_request", map[string]any{
		"room_id": rec.RoomID, "request_id": p.Request.ID, "decision": p.Decision, "role": p.Role, "room_seq": rec.Seq}})
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}
