// Package index is the federated public-room index: signed announcements
// of other hosts' public and restricted rooms (never private ones), learned
// over gossip, kept in Badger across restarts, expiring unless refreshed,
// with tombstones for ended and cancelled rooms. The local host's own rooms
// come from the node directly; the index holds only remote entries.
package index

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/adpnode/adpnode/adp"
	"github.com/adpnode/adpnode/adp/assertion"
	"github.com/adpnode/adpnode/adp/identity"
	"github.com/adpnode/adpnode/adp/record"
	"github.com/adpnode/adpnode/adp/room"
	"github.com/adpnode/adpnode/directory"
	"github.com/adpnode/adpnode/internal/periodic"
	"github.com/adpnode/adpnode/internal/storelayout"
)

// Binding ties a host key to its libp2p peer ID and HTTP origin.
type Binding struct {
	Key    identity.AgentID `json:"key"`
	PeerID string           `json:"peer_id"`
	Origin string           `json:"origin"`
	Addrs  []string         `json:"addrs,omitempty"`
}

// Announcement is the payload of an index.announce assertion.
type Announcement struct {
	Room      directory.Entry `json:"room"`
	Host      Binding         `json:"host"`
	ExpiresAt int64           `json:"expires_at"`
}

// Entry is a verified announcement.
type Entry struct {
	Announcement
	IssuedAt int64
	Nonce    int64
	Raw      []byte // the signed envelope, as gossiped
	// ID is SHA-256 of Raw: the entry's item id in set reconciliation.
	ID [32]byte
}

// MaxAnnouncementBytes bounds one announcement.
const MaxAnnouncementBytes = 16 << 10

// Parse verifies a signed announcement. Checks: size, strict envelope,
// signature by its actor, type, actor = host.key, a well-formed room ID,
// Room URL = origin + /v1/rooms/{id}, visibility public or restricted,
// expiry after issue. Does not check: who relayed it, freshness against
// what is stored, or that origin really belongs to the key (see the
// binding cross-check).
func Parse(raw []byte) (*Entry, error) {
	if len(raw) > MaxAnnouncementBytes {
		return nil, adp.Reason(adp.CodePayloadTooLarge, "oversize", fmt.Sprintf("announcement of %d bytes exceeds %d", len(raw), MaxAnnouncementBytes))
	}
	env, err := assertion.Open(raw, assertion.TypeAnnounce)
	if err != nil {
		return nil, err
	}
	var a Announcement
	if err := json.Unmarshal(env.Event.Payload, &a); err != nil {
		return nil, adp.Reason(adp.CodeInvalidEvent, "payload", "announcement payload: "+err.Error())
	}
	bad := func(reason, msg string) error { return adp.Reason(adp.CodeInvalidEvent, reason, msg) }
	switch {
	case a.Host.Key != env.Event.Actor:
		return nil, bad("wrong_key", "announcement signed by a key other than its host's")
	case !record.ValidRoomID(a.Room.ID):
		return nil, bad("room_id", "not a room ID")
	case a.Room.Visibility == room.Private:
		return nil, bad("private", "private rooms are never announced")
	case a.Room.Visibility != room.Public && a.Room.Visibility != room.Restricted:
		return nil, bad("visibility", "unknown visibility")
	case a.ExpiresAt <= env.Event.CreatedAt:
		return nil, bad("expiry", "expires before it was issued")
	}
	u, err := url.Parse(a.Host.Origin)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Path != "" {
		return nil, bad("origin", "host.origin is not an origin")
	}
	if a.Room.URL != a.Host.Origin+"/v1/rooms/"+a.Room.ID || a.Room.Host != u.Host {
		return nil, bad("room_url", "room URL does not belong to the announcing host's origin")
	}
	return &Entry{Announcement: a, IssuedAt: env.Event.CreatedAt, Nonce: env.Event.Nonce, Raw: raw, ID: sha256.Sum256(raw)}, nil
}

// newer reports whether e supersedes old.
func (e *Entry) newer(old *Entry) bool {
	return e.Nonce > old.Nonce
}

// Limits bound what the index takes from any one host.
type Limits struct {
	// MaxPerHost caps the entries of one verified host (default 10,000);
	// MaxPerUnverified those of a host whose binding is not verified
	// (default 1,000), and MaxUnverified all unverified hosts' entries
	// together (default 20,000).
	MaxPerHost, MaxPerUnverified, MaxUnverified int
	// MaxTTL bounds how long a live entry may live: it expires at the
	// latest MaxTTL after it was issued and MaxTTL after it was received,
	// whatever its signed expires_at says, and across restarts (default
	// 7 h: hosts announce with a 6 h TTL and refresh every ~2 h);
	// MaxTombstoneTTL the same for ended and cancelled rooms (default
	// 25 h).
	MaxTTL, MaxTombstoneTTL time.Duration
	// Skew is how far in the future an announcement's created_at may be
	// (default 1 min); last_active is clamped to the time of receipt.
	Skew time.Duration
}

func (l *Limits) defaults() {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&l.MaxPerHost, 10_000)
	def(&l.MaxPerUnverified, 1_000)
	def(&l.MaxUnverified, 20_000)
	if l.MaxTTL <= 0 {
		l.MaxTTL = 7 * time.Hour
	}
	if l.MaxTombstoneTTL <= 0 {
		l.MaxTombstoneTTL = 25 * time.Hour
	}
	if l.Skew <= 0 {
		l.Skew = time.Minute
	}
}

// Refusals of Put (as data: callers count and log them).
var (
	ErrFuture   = errors.New("announcement issued in the future")
	ErrHostFull = errors.New("the host's share of the index is full")
	ErrConflict = errors.New("the room ID belongs to another, verified host")
)

// Index holds remote entries, keyed by host key and room ID.
type Index struct {
	db          *badger.DB
	self        identity.AgentID
	mu          sync.RWMutex
	lim         Limits
	verified    func(Binding) bool
	m           map[string]*Entry                      // hostKey/roomID
	byRoom      map[string]map[identity.AgentID]*Entry // roomID -> host key -> entry
	perHost     map[identity.AgentID]int               // entries per host key
	unver       int                                    // entries of unverified hosts (as of their Put)
	conflict    map[string]*conflictItem               // evidence: signed conflicting claims, by digest
	conflictPer map[string]int                         // evidence items per claiming key
	conflictSeq uint64
	own         map[string][]byte // this host's latest announcement per room
	ownOpen     map[string]*Entry // own announcements as parsed at Open, until SetOwn replaces one

	// pending holds the stored form of what changed since the last Flush
	// (by storage key, newest value only): gossip is applied in memory
	// under mu and written in batches by Flush, so no Put waits for a disk
	// sync while holding the index lock.
	pending map[string]pendingWrite
	flushMu sync.Mutex // one Flush at a time, so batches land in order
	// writeHook, if set (tests), runs before each batch write, outside
	// the index lock.
	writeHook func(keys int)
	// dirty wakes the owner's flush loop when pending gains a key: it
	// sleeps while nothing is pending.

	dirty *periodic.Signal

	onChange atomic.Pointer[func(roomID string)]
	watchMu  sync.Mutex
	watchers []*periodic.Signal
}

// setPendingLocked records a storage write for the next Flush and wakes
// the flush loop.
func (x *Index) setPendingLocked(k string, w pendingWrite) {
	x.pending[k] = w
	x.dirty.Wake()
}

// Dirty receives when something is waiting for Flush; a flush loop waits
// on it instead of polling (one receive may stand for many changes).
func (x *Index) Dirty() <-chan struct{} { return x.dirty.C() }

// Watch registers c to be woken after an entry was stored or dropped, or
// a host's verification changed: a reader of the entries (the mirror's
// reconcile) waits on it instead of polling. c stays registered for the
// life of the index.
func (x *Index) Watch(c *periodic.Signal) {
	x.watchMu.Lock()
	x.watchers = append(x.watchers, c)
	x.watchMu.Unlock()
}

// pendingWrite is one storage key's latest value, or its deletion.
type pendingWrite struct {
	val []byte
	del bool
}

const (
	// Key spaces: see the storage layout table (internal/storelayout).
	pfxIndex    = storelayout.IndexEntry
	pfxConflict = storelayout.IndexConflict
	pfxOwn      = storelayout.IndexOwn
	// MaxConflicts bounds the stored conflict evidence, and
	// MaxConflictsPerHost the evidence against one claiming key.
	MaxConflicts        = 1000
	MaxConflictsPerHost = 32
)

// Open loads stored entries that have not expired at now, with default
// limits. self is this node's host key; its own rooms are never stored.
func Open(db *badger.DB, self identity.AgentID, now int64) (*Index, error) {
	x := &Index{db: db, self: self, m: map[string]*Entry{}, byRoom: map[string]map[identity.AgentID]*Entry{},
		perHost: map[identity.AgentID]int{}, conflict: map[string]*conflictItem{}, conflictPer: map[string]int{}, own: map[string][]byte{}, ownOpen: map[string]*Entry{}, verified: func(Binding) bool { return false },
		pending: map[string]pendingWrite{}, dirty: periodic.NewSignal()}
	x.lim.defaults()
	var expired [][]byte
	type storedConflict struct {
		id, actor string
		raw       []byte
		at        int64
	}
	var stored []storedConflict
	err := db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{PrefetchValues: true, Prefix: []byte(pfxIndex)})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			raw, err := it.Item().ValueCopy(nil)
			if err != nil {
				return err
			}
			e, err := Parse(raw)
			if err == nil {
				x.clamp(e, now)
			}
			if err != nil || e.ExpiresAt <= now || x.perHost[e.Host.Key] >= x.lim.MaxPerHost {
				expired = append(expired, it.Item().KeyCopy(nil))
				continue
			}
			x.insertLocked(e)
		}
		it3 := txn.NewIterator(badger.IteratorOptions{PrefetchValues: true, Prefix: []byte(pfxOwn)})
		defer it3.Close()
		for it3.Rewind(); it3.Valid(); it3.Next() {
			raw, err := it3.Item().ValueCopy(nil)
			if err != nil {
				return err
			}
			e, err := Parse(raw)
			if err != nil || e.ExpiresAt <= now || e.Host.Key != self {
				expired = append(expired, it3.Item().KeyCopy(nil))
				continue
			}
			id := string(it3.Item().Key()[len(pfxOwn):])
			x.own[id], x.ownOpen[id] = raw, e
		}
		it2 := txn.NewIterator(badger.IteratorOptions{PrefetchValues: true, Prefix: []byte(pfxConflict)})
		defer it2.Close()
		for it2.Rewind(); it2.Valid(); it2.Next() {
			raw, err := it2.Item().ValueCopy(nil)
			if err != nil {
				return err
			}
			actor, at := claimHead(raw)
			stored = append(stored, storedConflict{id: string(it2.Item().Key()[len(pfxConflict):]), raw: raw, actor: actor, at: at})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	// Evidence comes back oldest claim first, within the caps of
	// AddConflict; what is over them is evicted, oldest first.
	sort.Slice(stored, func(i, j int) bool {
		if stored[i].at != stored[j].at {
			return stored[i].at < stored[j].at
		}
		return stored[i].id < stored[j].id
	})
	for _, c := range stored {
		if x.conflictPer[c.actor] >= MaxConflictsPerHost {
			x.evictConflictLocked(c.actor, true)
		} else if len(x.conflict) >= MaxConflicts {
			x.evictConflictLocked("", false)
		}
		x.conflictSeq++
		x.conflict[c.id] = &conflictItem{raw: c.raw, actor: c.actor, seq: x.conflictSeq}
		x.conflictPer[c.actor]++
	}
	for k, w := range x.pending {
		if w.del {
			expired = append(expired, []byte(k))
		}
	}
	x.pending = map[string]pendingWrite{}
	if len(expired) > 0 {
		err = db.Update(func(txn *badger.Txn) error {
			for _, k := range expired {
				if err := txn.Delete(k); err != nil {
					return err
				}
			}
			return nil
		})
	}
	return x, err
}

// SetLimits replaces the limits (before use; entries already held stay).
func (x *Index) SetLimits(l Limits) {
	l.defaults()
	x.mu.Lock()
	x.lim = l
	x.mu.Unlock()
}

// Reverify recounts the unverified hosts' entries; call it when a
// binding's verification changes. It wakes the Changes watchers: which
// entries count as verified changed.
func (x *Index) Reverify() {
	defer x.notifyWatchers()
	x.mu.Lock()
	defer x.mu.Unlock()
	x.unver = 0
	seen := map[identity.AgentID]bool{}
	for _, e := range x.m {
		v, ok := seen[e.Host.Key]
		if !ok {
			v = x.verified(e.Host)
			seen[e.Host.Key] = v
		}
		if !v {
			x.unver++
		}
	}
}

// Limits returns the limits in force.
func (x *Index) Limits() Limits {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.lim
}

// SetVerifier tells the index which bindings are verified. fn is called
// with the index locked and must not call back into it.
func (x *Index) SetVerifier(fn func(Binding) bool) {
	x.mu.Lock()
	x.verified = fn
	x.mu.Unlock()
}

func key(e *Entry) string { return string(e.Host.Key) + "/" + e.Room.ID }

// clamp bounds an entry's times by when it was received: no expiry beyond
// the TTL limits, no last_active in the future, and a verified flag only
// this node sets.
func (x *Index) clamp(e *Entry, now int64) {
	ttl := x.lim.MaxTTL
	if e.Room.Status == room.StatusEnded || e.Room.Status == room.StatusCancelled {
		ttl = x.lim.MaxTombstoneTTL
	}
	// Bounded by issue as well as by receipt, so that relaying (or
	// replaying after a restart) an old entry never extends its life.
	e.ExpiresAt = min(e.ExpiresAt, now+ttl.Milliseconds(), e.IssuedAt+ttl.Milliseconds())
	e.Room.LastActive = min(e.Room.LastActive, now)
	e.Room.Verified = nil
}

func (x *Index) insertLocked(e *Entry) {
	k := key(e)
	if _, ok := x.m[k]; !ok {
		x.perHost[e.Host.Key]++
		if !x.verified(e.Host) {
			x.unver++
		}
	}
	x.m[k] = e
	rm := x.byRoom[e.Room.ID]
	if rm == nil {
		rm = map[identity.AgentID]*Entry{}
		x.byRoom[e.Room.ID] = rm
	}
	rm[e.Host.Key] = e
}

func (x *Index) deleteLocked(e *Entry) {
	k := key(e)
	if _, ok := x.m[k]; !ok {
		return
	}
	delete(x.m, k)
	if x.perHost[e.Host.Key]--; x.perHost[e.Host.Key] <= 0 {
		delete(x.perHost, e.Host.Key)
	}
	if !x.verified(e.Host) && x.unver > 0 {
		x.unver--
	}
	if rm := x.byRoom[e.Room.ID]; rm != nil {
		delete(rm, e.Host.Key)
		if len(rm) == 0 {
			delete(x.byRoom, e.Room.ID)
		}
	}
}

// Put stores e if it is newer than what the index has for that host and
// room, and reports whether it did. Entries by this node's own key and
// expired entries are ignored; an entry issued in the future (ErrFuture),
// beyond its host's share (ErrHostFull), or for a room ID a different,
// verified host holds (ErrConflict) is refused. Times are clamped first
// (see Limits).
func (x *Index) Put(e *Entry, now int64) (bool, error) {
	ok, err := x.put(e, now)
	if ok {
		x.changed(e.Room.ID)
	}
	return ok, err
}

// OnChange registers fn to be told (outside the index lock, on the
// caller's goroutine) the room ID of every entry stored or dropped. fn
// must not block.
func (x *Index) OnChange(fn func(roomID string)) { x.onChange.Store(&fn) }

func (x *Index) changed(roomID string) {
	if fn := x.onChange.Load(); fn != nil {
		(*fn)(roomID)
	}
	x.notifyWatchers()
}

func (x *Index) notifyWatchers() {
	x.watchMu.Lock()
	for _, c := range x.watchers {
		c.Wake()
	}
	x.watchMu.Unlock()
}

func (x *Index) put(e *Entry, now int64) (bool, error) {
	if e.Host.Key == x.self {
		return false, nil
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if e.IssuedAt > now+x.lim.Skew.Milliseconds() {
		return false, ErrFuture
	}
	x.clamp(e, now)
	if e.ExpiresAt <= now {
		return false, nil
	}
	k := key(e)
	old, have := x.m[k]
	if have && !e.newer(old) {
		return false, nil
	}
	for hk, other := range x.byRoom[e.Room.ID] {
		if hk != e.Host.Key && other.ExpiresAt > now && x.verified(other.Host) {
			return false, ErrConflict
		}
	}
	if !have {
		verified := x.verified(e.Host)
		switch {
		case verified && x.perHost[e.Host.Key] >= x.lim.MaxPerHost:
			return false, ErrHostFull
		case !verified && (x.perHost[e.Host.Key] >= x.lim.MaxPerUnverified || x.unver >= x.lim.MaxUnverified):
			return false, ErrHostFull
		}
	}
	x.setPendingLocked(pfxIndex+k, pendingWrite{val: e.Raw})
	if have {
		x.deleteLocked(old)
	}
	x.insertLocked(e)
	if x.verified(e.Host) {
		// The room ID is this verified host's now: claims other hosts
		// made while it was not verified go to the evidence.
		for hk, other := range x.byRoom[e.Room.ID] {
			if hk != e.Host.Key && !x.verified(other.Host) {
				x.dropLocked(other)
			}
		}
	}
	return true, nil
}

// dropLocked removes a claim and keeps it as conflict evidence.
func (x *Index) dropLocked(e *Entry) {
	x.deleteLocked(e)
	x.setPendingLocked(pfxIndex+key(e), pendingWrite{del: true})
	x.addConflictLocked(e.Raw)
}

// Fresh reports whether an entry with this nonce would be newer than the
// stored one (a cheap duplicate check for gossip validators).
func (x *Index) Fresh(hostKey identity.AgentID, roomID string, nonce int64) bool {
	x.mu.RLock()
	defer x.mu.RUnlock()
	old, ok := x.m[string(hostKey)+"/"+roomID]
	return !ok || nonce > old.Nonce
}

// Claims returns every unexpired entry for a room ID, verified hosts
// first, then newest first.
func (x *Index) Claims(roomID string, now int64) []*Entry {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.claimsLocked(roomID, now)
}

func (x *Index) claimsLocked(roomID string, now int64) []*Entry {
	var out []*Entry
	ver := map[*Entry]bool{}
	for _, e := range x.byRoom[roomID] {
		if e.ExpiresAt > now {
			out = append(out, e)
			ver[e] = x.verified(e.Host)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if ver[out[i]] != ver[out[j]] {
			return ver[out[i]]
		}
		if out[i].IssuedAt != out[j].IssuedAt {
			return out[i].IssuedAt > out[j].IssuedAt
		}
		return out[i].Host.Key < out[j].Host.Key
	})
	return out
}

// Room returns the preferred unexpired entry for a room ID: a verified
// host's over an unverified one's, then the newest.
func (x *Index) Room(roomID string, now int64) (*Entry, bool) {
	c := x.Claims(roomID, now)
	if len(c) == 0 {
		return nil, false
	}
	return c[0], true
}

// Entries returns one entry per room ID (the preferred one, see Room),
// and with verifiedOnly only rooms of verified hosts.
func (x *Index) Entries(now int64, verifiedOnly bool) []*Entry {
	x.mu.RLock()
	defer x.mu.RUnlock()
	out := make([]*Entry, 0, len(x.byRoom))
	for id := range x.byRoom {
		c := x.claimsLocked(id, now)
		if len(c) == 0 || verifiedOnly && !x.verified(c[0].Host) {
			continue
		}
		out = append(out, c[0])
	}
	return out
}

// Summaries returns every unexpired remote room, once per room ID.
func (x *Index) Summaries(now int64) []directory.Entry {
	es := x.Entries(now, false)
	out := make([]directory.Entry, 0, len(es))
	for _, e := range es {
		out = append(out, e.Room)
	}
	return out
}

// Bindings returns the host bindings learned from unexpired announcements.
func (x *Index) Bindings(now int64) []Binding {
	x.mu.RLock()
	defer x.mu.RUnlock()
	seen := map[identity.AgentID]Binding{}
	for _, e := range x.m {
		if e.ExpiresAt > now {
			seen[e.Host.Key] = e.Host
		}
	}
	out := make([]Binding, 0, len(seen))
	for _, b := range seen {
		out = append(out, b)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

// RoomsOf counts unexpired entries per host key.
func (x *Index) RoomsOf(now int64) map[identity.AgentID]int {
	x.mu.RLock()
	defer x.mu.RUnlock()
	out := map[identity.AgentID]int{}
	for _, e := range x.m {
		if e.ExpiresAt > now {
			out[e.Host.Key]++
		}
	}
	return out
}

// DropConflicts settles the room IDs that hostKey claims once its
// binding is verified: the first host verified while holding a claim
// keeps the room ID. For each room ID hostKey claims with its verified
// binding, if another verified host holds it (verified earlier),
// hostKey's own claim goes to the evidence; otherwise every unverified
// host's claim on it does (claims stored before hostKey was verified).
// It returns how many claims it dropped.
func (x *Index) DropConflicts(hostKey identity.AgentID, now int64) int {
	x.mu.Lock()
	var drop []*Entry
	for _, rm := range x.byRoom {
		mine, ok := rm[hostKey]
		if !ok || mine.ExpiresAt <= now || !x.verified(mine.Host) {
			continue
		}
		held := false
		for hk, e := range rm {
			if hk != hostKey && e.ExpiresAt > now && x.verified(e.Host) {
				held = true
			}
		}
		if held {
			drop = append(drop, mine)
			continue
		}
		for hk, e := range rm {
			if hk != hostKey && !x.verified(e.Host) {
				drop = append(drop, e)
			}
		}
	}
	for _, e := range drop {
		x.dropLocked(e)
	}
	x.mu.Unlock()
	for _, e := range drop {
		x.changed(e.Room.ID)
	}
	return len(drop)
}

// AddConflict keeps a signed announcement that claimed a room ID another
// host holds, deduplicated and across restarts: at most
// MaxConflictsPerHost per claiming key and MaxConflicts in all, the
// oldest evicted first, so that a flood of claims keeps the newest
// evidence rather than locking it out.
func (x *Index) AddConflict(raw []byte) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.addConflictLocked(raw)
}

// conflictItem is one piece of conflict evidence.
type conflictItem struct {
	raw   []byte
	actor string // the claiming key, as the envelope names it
	seq   uint64 // order of arrival (at Open: of issue)
}

// claimHead reads an envelope's actor and created_at without verifying
// it (conflict evidence is verified when it is taken, or offline).
func claimHead(raw []byte) (actor string, createdAt int64) {
	var h struct {
		Event struct {
			Actor     string `json:"actor"`
			CreatedAt int64  `json:"created_at"`
		} `json:"event"`
	}
	_ = json.Unmarshal(raw, &h)
	return h.Event.Actor, h.Event.CreatedAt
}

func (x *Index) addConflictLocked(raw []byte) {
	d := sha256.Sum256(raw)
	id := hex.EncodeToString(d[:16])
	if _, ok := x.conflict[id]; ok {
		return
	}
	actor, _ := claimHead(raw)
	if x.conflictPer[actor] >= MaxConflictsPerHost {
		x.evictConflictLocked(actor, true)
	} else if len(x.conflict) >= MaxConflicts {
		x.evictConflictLocked("", false)
	}
	x.conflictSeq++
	x.conflict[id] = &conflictItem{raw: raw, actor: actor, seq: x.conflictSeq}
	x.conflictPer[actor]++
	x.setPendingLocked(pfxConflict+id, pendingWrite{val: raw})
}

// evictConflictLocked drops the oldest piece of evidence (of actor only,
// with byActor).
func (x *Index) evictConflictLocked(actor string, byActor bool) {
	oldest, at := "", uint64(0)
	for id, c := range x.conflict {
		if (!byActor || c.actor == actor) && (oldest == "" || c.seq < at) {
			oldest, at = id, c.seq
		}
	}
	if oldest == "" {
		return
	}
	c := x.conflict[oldest]
	delete(x.conflict, oldest)
	if x.conflictPer[c.actor]--; x.conflictPer[c.actor] <= 0 {
		delete(x.conflictPer, c.actor)
	}
	x.setPendingLocked(pfxConflict+oldest, pendingWrite{del: true})
}

// SetOwn keeps this host's latest signed announcement of one of its
// rooms (stored at the next Flush), so that a restart reuses it instead of
// announcing every room again.
func (x *Index) SetOwn(roomID string, raw []byte) {
	x.mu.Lock()
	x.own[roomID] = raw
	delete(x.ownOpen, roomID)
	x.setPendingLocked(pfxOwn+roomID, pendingWrite{val: raw})
	x.mu.Unlock()
}

// OwnAtOpen returns this host's stored announcements as Open parsed and
// verified them (those SetOwn has not replaced since), so that the
// federation's start does not verify its own signatures a second time.
func (x *Index) OwnAtOpen() map[string]*Entry {
	x.mu.RLock()
	defer x.mu.RUnlock()
	out := make(map[string]*Entry, len(x.ownOpen))
	for k, e := range x.ownOpen {
		out[k] = e
	}
	return out
}

// Own returns this host's stored announcements (unexpired at Open), by
// room ID.
func (x *Index) Own() map[string][]byte {
	x.mu.RLock()
	defer x.mu.RUnlock()
	out := make(map[string][]byte, len(x.own))
	for k, v := range x.own {
		out[k] = v
	}
	return out
}

// Flush writes what changed since the last Flush in one batch. The index
// is a cache of signed gossip: what a crash loses between flushes is
// announced again. The owner (federation) calls it every second and when
// it stops. On a write error the batch stays pending (unless newer
// changes replaced it) for the next Flush.
func (x *Index) Flush() error {
	x.flushMu.Lock()
	defer x.flushMu.Unlock()
	x.mu.Lock()
	batch := x.pending
	if len(batch) == 0 {
		x.mu.Unlock()
		return nil
	}
	x.pending = map[string]pendingWrite{}
	x.mu.Unlock()
	err := x.write(batch)
	if err != nil {
		x.mu.Lock()
		for k, w := range batch {
			if _, newer := x.pending[k]; !newer {
				x.setPendingLocked(k, w)
			}
		}
		x.mu.Unlock()
	}
	return err
}

func (x *Index) write(batch map[string]pendingWrite) error {
	if x.writeHook != nil {
		x.writeHook(len(batch))
	}
	wb := x.db.NewWriteBatch()
	defer wb.Cancel()
	for k, w := range batch {
		var err error
		if w.del {
			err = wb.Delete([]byte(k))
		} else {
			err = wb.Set([]byte(k), w.val)
		}
		if err != nil {
			return err
		}
	}
	return wb.Flush()
}

// Pending reports how many stored keys wait for the next Flush.
func (x *Index) Pending() int {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return len(x.pending)
}

// Conflicts returns the kept conflict evidence, in a stable order.
func (x *Index) Conflicts() []json.RawMessage {
	x.mu.RLock()
	defer x.mu.RUnlock()
	ids := make([]string, 0, len(x.conflict))
	for id := range x.conflict {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	out := make([]json.RawMessage, len(ids))
	for i, id := range ids {
		out[i] = x.conflict[id].raw
	}
	return out
}

// Len returns the number of stored entries (expired ones included until
// they are replaced or the node restarts).
func (x *Index) Len() int {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return len(x.m)
}

// Live returns every unexpired entry (of verified hosts only, with
// verifiedOnly). Entries are immutable: callers must not modify them.
func (x *Index) Live(now int64, verifiedOnly bool) []*Entry {
	x.mu.RLock()
	defer x.mu.RUnlock()
	out := make([]*Entry, 0, len(x.m))
	for _, e := range x.m {
		if e.ExpiresAt > now && (!verifiedOnly || x.verified(e.Host)) {
			out = append(out, e)
		}
	}
	return out
}

// Raw returns the signed bytes of every unexpired entry (of verified hosts
// only, with verifiedOnly).
func (x *Index) Raw(now int64, verifiedOnly bool) [][]byte {
	x.mu.RLock()
	defer x.mu.RUnlock()
	out := make([][]byte, 0, len(x.m))
	for _, e := range x.m {
		if e.ExpiresAt > now && (!verifiedOnly || x.verified(e.Host)) {
			out = append(out, e.Raw)
		}
	}
	return out
}
