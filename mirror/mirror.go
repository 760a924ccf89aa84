package mirror

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/adpnode/adpnode/adp"
	"github.com/adpnode/adpnode/adp/assertion"
	"github.com/adpnode/adpnode/adp/identity"
	"github.com/adpnode/adpnode/adp/record"
	"github.com/adpnode/adpnode/adp/room"
	"github.com/adpnode/adpnode/federation"
	"github.com/adpnode/adpnode/fedport"
	"github.com/adpnode/adpnode/hostport"
	"github.com/adpnode/adpnode/index"
	"github.com/adpnode/adpnode/internal/changefeed"
	"github.com/adpnode/adpnode/internal/groupcommit"
	"github.com/adpnode/adpnode/internal/periodic"
	"github.com/adpnode/adpnode/internal/reclaim"
	"github.com/adpnode/adpnode/internal/safehttp"
	"github.com/adpnode/adpnode/live"
	"github.com/adpnode/adpnode/witness"
)

// Target kinds: what to mirror.
const (
	TargetRoom = "room" // one room, by Room URL
	TargetHost = "host" // every public room of a host, by host key or origin
	TargetTag  = "tag"  // every public room with a tag
	TargetAll  = "all"  // every public room in the index
)

// Target is one mirroring rule.
type Target = fedport.MirrorTarget

// ParseTarget validates a rule and gives it its stable ID.
func ParseTarget(kind, value string) (Target, error) {
	value = strings.TrimSpace(value)
	switch kind {
	case TargetRoom:
		u, err := url.Parse(value)
		if err != nil || u.Host == "" || !strings.Contains(u.Path, "/v1/rooms/") || !record.ValidRoomID(u.Path[strings.LastIndex(u.Path, "/")+1:]) {
			return Target{}, fmt.Errorf("a room target is a Room URL: scheme://host/v1/rooms/<room id>")
		}
		value = u.Scheme + "://" + u.Host + u.Path
	case TargetHost:
		if _, err := identity.ParseAgentID(value); err != nil {
			if u, err := url.Parse(value); err != nil || u.Host == "" {
				return Target{}, fmt.Errorf("a host target is a host key (did:agent:…) or an origin")
			}
			value = strings.TrimSuffix(value, "/")
		}
	case TargetTag:
		if value == "" {
			return Target{}, fmt.Errorf("a tag target needs a tag")
		}
	case TargetAll:
		value = ""
	default:
		return Target{}, fmt.Errorf("target kind must be room, host, tag or all")
	}
	return Target{ID: kind + ":" + value, Kind: kind, Value: value}, nil
}

// matches reports whether e falls under t.
func matches(t Target, e *index.Entry) bool {
	switch t.Kind {
	case TargetRoom:
		return e.Room.URL == t.Value
	case TargetHost:
		return string(e.Host.Key) == t.Value || e.Host.Origin == t.Value
	case TargetTag:
		for _, tag := range e.Room.Tags {
			if strings.EqualFold(tag, t.Value) {
				return true
			}
		}
		return false
	case TargetAll:
		return true
	}
	return false
}

// Config bounds a mirror.
type Config struct {
	MaxRooms int   // default 1000
	MaxBytes int64 // default 10 GiB of stored records
	// AnnounceWitnessEvery is how often the mirror gossips which host
	// logs its witness witnesses (default 30 s).
	AnnounceWitnessEvery time.Duration
	// OnVerified, if set, is called after each record is stored (metrics,
	// benchmarks); live is set for a record that arrived on the room's
	// live stream (not by backfill), whose age is replication lag. It must
	// not block.
	OnVerified func(roomID string, rec *record.Record, live bool)
	// AllowPrivateTargets lets room targets name loopback and private
	// hosts (tests, closed networks); otherwise the probe of a room
	// target's URL dials only public addresses (internal/safehttp).
	AllowPrivateTargets bool
	// WitnessKey, when set, runs a C2SP tlog-witness (Witness) for the
	// logs of the hosts this mirror mirrors, cosigning with this key
	// (the node's host key).
	WitnessKey ed25519.PrivateKey
	// WitnessName names the witness in its cosignatures: the node's
	// public host[:port] + WitnessSuffix (the default when empty).
	WitnessName string
	// Names, when set, gives the self-asserted profile names of a
	// mirrored room's agents for its Markdown transcript (the names its
	// host shows; docs/profiles.md), "" for an agent without one. It is
	// called with no lock held and may ask the room's host.
	Names func(roomID string, ids []identity.AgentID) map[identity.AgentID]string
	Log   *slog.Logger
}

// Stats are the mirror's counters.
type Stats = fedport.MirrorStats

// Federation is what the mirror needs of the federation peer: its topics
// (evidence and witness announcements), record streams and backfill, its
// host key and signer, its peers and which host bindings it verified.
// The composition root passes the running peer.
type Federation interface {
	JoinTopic(name string, validate func(author peer.ID, data []byte) (any, federation.Verdict), deliver func(v any, author peer.ID)) (*federation.TopicHandle, error)
	SetBackfillSource(src federation.BackfillSource)
	Backfill(ctx context.Context, id peer.ID, roomID string, afterSeq int64, limit int) (*federation.BackfillBatch, error)
	FollowRecords(host peer.ID, fn func(*federation.StreamedRecord)) error
	HostKey() identity.AgentID
	Signer() *assertion.Signer
	Peers() []fedport.PeerInfo
	Verified(b index.Binding) bool
}

// Mirror replicates remote public rooms.
type Mirror struct {
	cfg Config
	n   Host
	db  *badger.DB
	fed Federation
	idx *index.Index
	log *slog.Logger
	// reconcileWake wakes the reconcile loop (the index signals it on
	// every change); reconciles counts the loop's runs (tests).
	reconcileWake *periodic.Signal
	reconciles    atomic.Int64
	// probe reads the Room URLs of rooms an operator asks to mirror.
	probe *http.Client

	mu       sync.Mutex
	targets  map[string]Target
	rooms    map[string]*Room // host key/room id
	followed map[peer.ID]bool
	faulty   map[identity.AgentID]bool
	bytes    atomic.Int64
	stats    Stats

	commit   *groupcommit.Committer
	feed     *changefeed.Feed    // one entry per verified record stored (Follow)
	live     *live.Hub[struct{}] // live streams of the rooms, by room key
	gapQ     chan *Room
	evTopic  *federation.TopicHandle
	wTopic   *federation.TopicHandle
	ctx      context.Context
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	stopOnce sync.Once
	closeMu  sync.RWMutex // orders goroutine starts against Close

	snapMu    sync.Mutex // orders snapshot writes against purges
	recovered RecoveryStats

	witness *witness.Witness // nil without Config.WitnessKey
	hl      *hostLogs        // host log proofs of ended rooms (hostlog.go)

	witnessMu sync.Mutex
	onWitness func(assertion.Witness) // OnWitness

	// originsMu guards origins: each mirrored host's current log origin,
	// from its newest announcement whose binding federation verified
	// (witness.go), so the witness follows a host whose public URL
	// changed.
	originsMu sync.Mutex
	origins   map[identity.AgentID]announcedOrigin
}

// Open loads the mirror's targets and rooms (replaying each stored chain
// through the kernel), then starts following, backfilling and witnessing.
func Open(cfg Config, n Host, fed Federation, idx *index.Index) (*Mirror, error) {
	if cfg.MaxRooms == 0 {
		cfg.MaxRooms = 1000
	}
	if cfg.MaxBytes == 0 {
		cfg.MaxBytes = 10 << 30
	}
	if cfg.AnnounceWitnessEvery == 0 {
		cfg.AnnounceWitnessEvery = 30 * time.Second
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &Mirror{cfg: cfg, n: n, db: n.DB(), fed: fed, idx: idx, log: cfg.Log, targets: map[string]Target{},
		rooms: map[string]*Room{}, followed: map[peer.ID]bool{}, faulty: map[identity.AgentID]bool{},
		live: live.NewHub[struct{}](streamBuffer), reconcileWake: periodic.NewSignal(),
		gapQ: make(chan *Room, 4096), ctx: ctx, cancel: cancel, commit: groupcommit.New(n.DB(), 16384),
		probe: safehttp.Client(safehttp.Options{Timeout: probeTimeout, AllowPrivate: cfg.AllowPrivateTargets})}
	var err error
	if m.feed, err = changefeed.Open(m.db, pfxFeed, pfxFeedPos); err != nil {
		cancel()
		m.commit.Close()
		return nil, err
	}
	m.commit.SetFeed(m.feed.Committer())
	if err := m.load(); err != nil {
		cancel()
		m.commit.Close()
		return nil, err
	}
	if err := m.openWitness(); err != nil {
		cancel()
		m.commit.Close()
		return nil, err
	}
	if err := m.openHostLogs(); err != nil {
		cancel()
		m.commit.Close()
		return nil, err
	}
	if m.evTopic, err = fed.JoinTopic(EvidenceTopic, m.validateEvidence, m.deliverEvidence); err != nil {
		cancel()
		return nil, err
	}
	if m.wTopic, err = fed.JoinTopic(WitnessTopic, m.validateWitness, m.deliverWitness); err != nil {
		cancel()
		return nil, err
	}
	fed.SetBackfillSource(m.serveBackfill)
	m.mu.Lock()
	for _, r := range m.rooms {
		m.followLocked(r)
		m.queueGap(r)
	}
	m.mu.Unlock()
	idx.Watch(m.reconcileWake)
	m.goLoop(m.reconcileLoop)
	for i := 0; i < 2; i++ {
		m.goLoop(m.gapLoop)
	}
	m.goLoop(m.evidenceLoop)
	m.goLoop(m.runSnapshots)
	m.startHostLogs()
	return m, nil
}

// goLoop runs fn on a goroutine the mirror owns; nothing starts once Close
// has begun.
func (m *Mirror) goLoop(fn func(context.Context)) {
	m.closeMu.RLock()
	defer m.closeMu.RUnlock()
	if m.ctx.Err() != nil {
		return
	}
	m.wg.Add(1)
	go func() { defer m.wg.Done(); fn(m.ctx) }()
}

// Close stops the mirror's loops (the federation and node stay up).
func (m *Mirror) Close() {
	m.stopOnce.Do(func() {
		m.closeMu.Lock()
		m.cancel()
		m.closeMu.Unlock()
		m.wg.Wait()
		m.hl.client.CloseIdleConnections()
		m.stopTimers()
		m.live.Close(live.ReasonShutdown)
		// Store the rooms' states, so that the next start replays
		// nothing (or only what arrives from here on).
		if err := m.snapshotRooms(); err != nil {
			m.log.Warn("store mirror room snapshots", "err", err)
		}
		m.commit.Close()
		m.feed.Close()
	})
}

// FeedHead returns the seq of the newest entry of the mirror's change
// feed: one entry per verified record stored, in the record's transaction.
func (m *Mirror) FeedHead() uint64 { return m.feed.Head() }

// Follow hands fn every entry of the mirror's change feed after since, as
// node.Follow does for the node's; it returns groupcommit.ErrClosed once
// the mirror closed.
func (m *Mirror) Follow(ctx context.Context, since uint64, fn func([]hostport.FeedEntry) error) error {
	return m.feed.Follow(ctx, since, fn)
}

// FeedPosKey is the key under which follower stores its position in the
// mirror's feed, with its own writes; the feed is pruned behind it.
func (m *Mirror) FeedPosKey(follower string) []byte { return m.feed.PosKey(follower) }

// stopTimers stops the rooms' pending gap checks (none is armed once the
// context is cancelled, see armGapLocked).
func (m *Mirror) stopTimers() {
	m.mu.Lock()
	rooms := make([]*Room, 0, len(m.rooms))
	for _, r := range m.rooms {
		rooms = append(rooms, r)
	}
	m.mu.Unlock()
	for _, r := range rooms {
		r.mu.Lock()
		if r.gapTimer != nil {
			r.gapTimer.Stop()
			r.gapTimer = nil
		}
		r.mu.Unlock()
	}
}

// Stats returns the mirror's counters.
func (m *Mirror) Stats() *Stats { return &m.stats }

func (m *Mirror) now() int64 { return m.n.NowMs() }

// load reads targets and room metadata, and restores every room (from its
// snapshot and the records after it, or by replaying its whole chain).
func (m *Mirror) load() error {
	// Cosignatures of mirrored rooms (checkpoint.cosign, retired): no
	// code reads them any more.
	if dropped, err := reclaim.DropRetired(m.db, []byte(pfxMirrorW)); err != nil {
		m.log.Warn("drop retired mirror cosignatures", "err", err)
	} else if dropped {
		m.log.Info("dropped retired checkpoint.cosign assertions (m/w/)")
	}
	err := scan(m.db, []byte(pfxTarget), func(k, v []byte) error {
		var t Target
		if err := json.Unmarshal(v, &t); err != nil {
			return err
		}
		m.targets[t.ID] = t
		return nil
	})
	if err != nil {
		return err
	}
	var metas []roomMeta
	err = scan(m.db, []byte(pfxMeta), func(k, v []byte) error {
		var rm roomMeta
		if err := json.Unmarshal(v, &rm); err != nil {
			return err
		}
		metas = append(metas, rm)
		return nil
	})
	if err != nil {
		return err
	}
	start := time.Now()
	for _, rm := range metas {
		r, fromSnapshot, replayed, err := m.restoreRoom(rm)
		if err != nil {
			return fmt.Errorf("mirror %s: %w", rm.URL, err)
		}
		m.rooms[roomKey(rm.Host, rm.RoomID)] = r
		if rm.Faulty {
			m.faulty[rm.Host] = true
		}
		m.recovered.Rooms++
		m.recovered.Replayed += replayed
		if fromSnapshot {
			m.recovered.FromSnapshot++
		}
	}
	m.recovered.Took = time.Since(start)
	m.log.Info("mirror loaded", "targets", len(m.targets), "rooms", len(m.rooms), "bytes", m.bytes.Load(),
		"from_snapshot", m.recovered.FromSnapshot, "records_replayed", m.recovered.Replayed, "took", m.recovered.Took.Round(time.Millisecond).String())
	return nil
}

// AddTarget stores a rule; matching rooms are picked up at once. A room
// target is checked first (see checkRoomTarget): a room that cannot be
// mirrored is refused with the reason, as an *adp.Error.
func (m *Mirror) AddTarget(kind, value string) (Target, error) {
	t, err := ParseTarget(kind, value)
	if err != nil {
		return Target{}, adp.Reason(adp.CodeInvalidRequest, "target", err.Error())
	}
	if t.Kind == TargetRoom {
		if err := m.checkRoomTarget(m.ctx, t.Value); err != nil {
			return Target{}, err
		}
	}
	t.AddedAt = m.now()
	if err := m.db.Update(func(txn *badger.Txn) error { return putJSON(txn, []byte(pfxTarget+t.ID), t) }); err != nil {
		return Target{}, err
	}
	m.mu.Lock()
	m.targets[t.ID] = t
	m.mu.Unlock()
	if m.reconcile() {
		m.wakeReconcile() // the loop retries what failed
	}
	return t, nil
}

// RemoveTarget deletes a rule and, with purge, the rooms only it matched
// (their stored records too).
func (m *Mirror) RemoveTarget(id string, purge bool) error {
	m.mu.Lock()
	_, ok := m.targets[id]
	delete(m.targets, id)
	m.mu.Unlock()
	if !ok {
		return errNoTarget
	}
	if err := m.db.Update(func(txn *badger.Txn) error { return txn.Delete([]byte(pfxTarget + id)) }); err != nil {
		return err
	}
	if purge {
		m.mu.Lock()
		var drop []*Room
		for k, r := range m.rooms {
			if !m.wantedLocked(r.entryLike()) {
				drop = append(drop, r)
				delete(m.rooms, k)
			}
		}
		m.mu.Unlock()
		// No snapshot of a dropped room may be written after its keys
		// are gone.
		m.snapMu.Lock()
		defer m.snapMu.Unlock()
		var prefixes [][]byte
		for _, r := range drop {
			prefixes = append(prefixes, r.remove()...)
		}
		// The rooms are frozen: let the writes already queued for them
		// land before their keys are dropped, or they would outlive it.
		if err := m.commit.Flush(); err != nil {
			m.log.Warn("mirror purge", "err", err)
		}
		// Drop the keys and give the bytes back to the file system.
		if len(prefixes) > 0 {
			if err := reclaim.DropPrefixes(m.db, m.log, prefixes...); err != nil {
				m.log.Warn("mirror purge", "rooms", len(drop), "err", err)
			}
		}
	}
	return nil
}

var errNoTarget = errors.New("no such mirror target")

// Targets lists the rules.
func (m *Mirror) Targets() []Target {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]Target, 0, len(m.targets))
	for _, t := range m.targets {
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// wantedLocked reports whether a target wants e. Broad targets (all, tag)
// take only rooms of hosts whose binding is verified, so that a peer
// announcing thousands of fake rooms fills no mirror slots; room and
// host targets name what the operator chose.
func (m *Mirror) wantedLocked(e *index.Entry) bool {
	if e.Room.Visibility != room.Public {
		return false
	}
	verified := -1
	for _, t := range m.targets {
		if !matches(t, e) {
			continue
		}
		if t.Kind == TargetRoom || t.Kind == TargetHost {
			return true
		}
		if verified < 0 {
			verified = 0
			if m.fed.Verified(e.Host) {
				verified = 1
			}
		}
		if verified == 1 {
			return true
		}
	}
	return false
}

// Reconcile timing: a change of the index (an announcement stored or
// dropped, a host's verification changed) wakes the loop, which runs at
// most once per reconcileGap; a failed step is retried with a backoff
// from reconcileGap up to reconcileIdle; with nothing to do the loop
// runs once per reconcileIdle (what no one signals: entries expiring,
// room and byte limits freeing up).
const (
	reconcileGap  = 500 * time.Millisecond
	reconcileIdle = 30 * time.Second
)

// wakeReconcile runs the reconcile loop soon (non-blocking).
func (m *Mirror) wakeReconcile() {
	m.reconcileWake.Wake()
}

// reconcileLoop picks up newly announced rooms that match a target.
func (m *Mirror) reconcileLoop(ctx context.Context) {
	backoff := reconcileGap
	periodic.Loop(ctx, m.reconcileWake.C(), reconcileGap, reconcileIdle, func() time.Duration {
		m.reconciles.Add(1)
		if !m.reconcile() {
			backoff = reconcileGap
			return 0
		}
		next := backoff
		backoff = min(2*backoff, reconcileIdle)
		return next
	})
}

// reconcile starts mirroring every indexed public room a target matches,
// within the room and byte limits, and queues catch-up for rooms whose
// announced seq is ahead of the verified tip. It reports whether a step
// failed and should be retried.
func (m *Mirror) reconcile() (retry bool) {
	now := m.now()
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, e := range m.idx.Entries(now, false) {
		if !m.wantedLocked(e) || m.faulty[e.Host.Key] {
			continue
		}
		rk := roomKey(e.Host.Key, e.Room.ID)
		r, have := m.rooms[rk]
		if !have {
			if len(m.rooms) >= m.cfg.MaxRooms || m.bytes.Load() >= m.cfg.MaxBytes {
				continue
			}
			hostPeer, err := peer.Decode(e.Host.PeerID)
			if err != nil {
				continue
			}
			r = m.newRoom(roomMeta{Host: e.Host.Key, HostPeer: e.Host.PeerID, RoomID: e.Room.ID, URL: e.Room.URL, AddedAt: now}, hostPeer)
			if err := r.saveMeta(); err != nil {
				m.log.Error("mirror meta", "room", e.Room.URL, "err", err)
				retry = true
				continue
			}
			m.rooms[rk] = r
			m.wakeProofScan()
			m.log.Info("mirroring room", "room", e.Room.URL)
		}
		if !m.followLocked(r) {
			retry = true
		}
		m.noteOrigin(e)
		if e.Room.Seq > r.Tip() {
			r.wantSeq(e.Room.Seq)
			m.queueGap(r)
		}
	}
	return retry
}

// followLocked subscribes to the room's host record stream once per host;
// it reports whether the room's host is followed.
func (m *Mirror) followLocked(r *Room) bool {
	if m.followed[r.hostPeer] {
		return true
	}
	host := r.hostPeer
	if err := m.fed.FollowRecords(host, func(sr *federation.StreamedRecord) { m.onStream(host, sr) }); err != nil {
		m.log.Error("follow host", "peer", host, "err", err)
		return false
	}
	m.followed[host] = true
	return true
}

// onStream routes a verified stream message to its mirrored room.
func (m *Mirror) onStream(host peer.ID, sr *federation.StreamedRecord) {
	m.mu.Lock()
	r := m.rooms[roomKey(sr.Checkpoint.Host, sr.Record.RoomID)]
	m.mu.Unlock()
	if r == nil {
		return
	}
	r.offerStream(sr)
}

// queueGap asks the gap workers to catch r up (non-blocking).
func (m *Mirror) queueGap(r *Room) {
	if !r.gapQueued.CompareAndSwap(false, true) {
		return
	}
	select {
	case m.gapQ <- r:
	default:
		r.gapQueued.Store(false)
	}
}

// Rooms lists mirrored rooms.
func (m *Mirror) Rooms() []*Room {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]*Room, 0, len(m.rooms))
	for _, r := range m.rooms {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].url < out[j].url })
	return out
}

// RoomCount is how many rooms the mirror holds.
func (m *Mirror) RoomCount() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.rooms)
}

// Room finds a mirrored room by ID (and host key when several hosts use
// one ID).
func (m *Mirror) Room(roomID string, host identity.AgentID) (*Room, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if host != "" {
		r, ok := m.rooms[roomKey(host, roomID)]
		return r, ok
	}
	for _, r := range m.rooms {
		if r.id == roomID {
			return r, true
		}
	}
	return nil, false
}

// markFaulty freezes every mirrored room of a host.
func (m *Mirror) markFaulty(host identity.AgentID) {
	m.mu.Lock()
	m.faulty[host] = true
	var rs []*Room
	for _, r := range m.rooms {
		if r.host == host {
			rs = append(rs, r)
		}
	}
	m.mu.Unlock()
	for _, r := range rs {
		r.freeze()
	}
}

// Faulty reports whether host has been proven faulty.
func (m *Mirror) Faulty(host identity.AgentID) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.faulty[host]
}

// retryLater queues r for catch-up again in a few seconds (transient
// failures such as an unreachable external pack).
func (m *Mirror) retryLater(r *Room) {
	m.goLoop(func(ctx context.Context) {
		select {
		case <-ctx.Done():
		case <-time.After(5 * time.Second):
			m.queueGap(r)
		}
	})
}
