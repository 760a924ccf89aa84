package node

import (
	"context"
	"crypto/rand"
	"encoding/base32"
	"encoding/binary"
	"errors"
	"log/slog"
	"net/url"
	"runtime/debug"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/dgraph-io/badger/v4"

	"github.com/adpnode/adpnode/adp"
	"github.com/adpnode/adpnode/adp/identity"
	"github.com/adpnode/adpnode/adp/room"
	"github.com/adpnode/adpnode/hostport"
	"github.com/adpnode/adpnode/internal/changefeed"
	"github.com/adpnode/adpnode/internal/groupcommit"
	"github.com/adpnode/adpnode/live"
)

// Node is one authoritative ADP host.
type Node struct {
	cfg    Config
	origin string
	host   string
	log    *slog.Logger

	db     *badger.DB
	commit *groupcommit.Committer

	mu        sync.RWMutex
	rooms     map[string]*hostedRoom
	broken    map[string]*RoomBroken // rooms whose stored chain did not recover
	recovered RecoveryStats

	actors     [actorStripes]sync.Mutex // per-actor serialisation of nonce checks (striped)
	nonces     *nonceCache
	quotas     *quotas
	joins      *joinRequests
	status     *statusBoard
	hub        *hub
	viewers    *live.Hub[struct{}] // viewer streams (viewer.go)
	packs      *packFetcher
	sched      *scheduler
	feed       *changefeed.Feed // the change feed (feed.go)
	archiveMu  sync.RWMutex
	archiveKey identity.AgentID          // SetArchiveHostLog
	archiveLog func(lastHash string) any // SetArchiveHostLog

	finishMu sync.Mutex  // serialises end-of-room work (scheduler and archive reads)
	snapMu   sync.Mutex  // serialises snapshot writes (snapshotRooms, evict)
	cold     *coldCache  // decoded states of recently read cold rooms (cold.go)
	holdCold atomic.Bool // tests: keep ended rooms' states in memory
	disk     *diskGuard  // free space against Config.DiskReserveBytes (disk.go)

	readFault atomic.Bool // tests: every room history read fails (FailStoreReads)

	closing  atomic.Bool
	inflight sync.WaitGroup
	// profileCount is the number of stored agent profiles (profile.go).
	profileCount atomic.Int64
	profileNew   sync.Mutex // admits first profiles one at a time (profile.go)
	ctx          context.Context
	cancel       context.CancelFunc
	bg           sync.WaitGroup
}

// hostedRoom is one room this node is authoritative for.
type hostedRoom struct {
	id    string
	seqMu sync.Mutex   // the sequencer: one admission+commit at a time
	mu    sync.RWMutex // guards st and cold against readers while Commit mutates st
	// st is the room's state; nil once the room is cold (ended, its state
	// stored and dropped, cold.go): read it through Node.view.
	st   *room.State
	cold *coldRoom // the compact summary of a cold room (nil while st is held)
	// archivedAt is when the end-of-room work ran (0 = not yet).
	archivedAt atomic.Int64
	// snapSeq is the seq of the room's latest stored snapshot.
	snapSeq atomic.Int64
	// unchecked is set on a room restored from its snapshot alone until
	// its first use confirms that the snapshot's head is the stored
	// record (checkSnapshotHead, under checkMu).
	unchecked atomic.Bool
	checkMu   sync.Mutex
	// seal is the folded state of a member-only room (seal.go), nil until
	// its first sealed write after a start; guarded by seqMu.
	seal *sealRoom
}

// actorStripes is how many locks serialise actors' writes; two agents
// share one with probability 1/actorStripes, and then wait for each
// other's durable commit.
const actorStripes = 4096

// Open opens (or creates) the node's database, recovers every room by
// verified replay, and starts the scheduler.
func Open(cfg Config) (*Node, error) {
	cfg.Defaults()
	origin, err := Origin(cfg.PublicURL)
	if err != nil {
		return nil, err
	}
	u, _ := url.Parse(origin)
	if !cfg.InMemory {
		if err := CheckDiskReserve(cfg.DiskReserveBytes); err != nil {
			return nil, err
		}
	}
	opts := BadgerOptions(cfg.DataDir)
	if cfg.InMemory {
		opts = opts.WithInMemory(true).WithDir("").WithValueDir("")
	}
	db, err := openBadger(opts, cfg.Log)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	n := &Node{
		cfg: cfg, origin: origin, host: u.Host, log: cfg.Log, db: db,
		rooms:   map[string]*hostedRoom{},
		broken:  map[string]*RoomBroken{},
		nonces:  newNonceCache(cfg.Window),
		quotas:  newQuotas(),
		status:  newStatusBoard(),
		hub:     newHub(cfg.SSEBuffer),
		viewers: live.NewHub[struct{}](cfg.SSEBuffer),
		cold:    newColdCache(coldCacheRooms),
		ctx:     ctx, cancel: cancel,
		disk: newDiskGuard(cfg.DataDir, cfg.DiskReserveBytes, cfg.Log),
	}
	n.packs = newPackFetcher(cfg.Packs, db)
	n.joins = newJoinRequests(db)
	if err := n.recover(); err != nil {
		cancel()
		db.Close()
		return nil, err
	}
	n.dropRetired()
	// Verifying new tables and decoding snapshots leave garbage far larger
	// than what a node keeps; hand it back now rather than let an idle
	// node hold it until the runtime's scavenger gets to it.
	debug.FreeOSMemory()
	n.commit = groupcommit.New(db, 4096)
	n.commit.OnError(func(err error) { n.disk.noteWriteError(err) })
	if err := n.openFeed(); err != nil {
		n.commit.Close()
		cancel()
		db.Close()
		return nil, err
	}
	n.startStorage()
	n.sched = newScheduler(n)
	n.bg.Add(2)
	go func() { defer n.bg.Done(); n.sched.run(ctx) }()
	go func() { defer n.bg.Done(); n.runSnapshots(ctx) }()
	return n, nil
}

// Close stops accepting writes, waits for writes in flight, ends every live
// stream, flushes storage and closes the database.
func (n *Node) Close() error {
	if n.closing.Swap(true) {
		return nil
	}
	n.inflight.Wait()
	n.cancel()
	n.feed.Close() // followers end with groupcommit.ErrClosed
	n.bg.Wait()
	n.hub.Close(live.ReasonShutdown)
	n.viewers.Close(live.ReasonShutdown)
	n.commit.Close()
	if err := n.snapshotRooms(); err != nil {
		n.log.Warn("store room snapshots at close", "err", err)
	}
	return n.db.Close()
}

// Origin returns the service origin (JWT audience, Room URL host).
func (n *Node) Origin() string { return n.origin }

// Host returns the host[:port] of the origin.
func (n *Node) Host() string { return n.host }

// Config returns the node's effective configuration.
func (n *Node) Config() Config { return n.cfg }

// Policy is the part of the effective configuration that the HTTP API
// enforces and publishes (discovery).
func (n *Node) Policy() hostport.Policy { return n.cfg.Policy() }

// NowMs reads the node clock in Unix milliseconds.
func (n *Node) NowMs() int64 { return n.cfg.Now().UnixMilli() }

// RoomURL returns the canonical Room URL (§7.2).
func (n *Node) RoomURL(id string) string { return n.origin + "/v1/rooms/" + id }

func (n *Node) room(id string) (*hostedRoom, bool) {
	n.mu.RLock()
	r, ok := n.rooms[id]
	n.mu.RUnlock()
	if ok && r.unchecked.Load() && n.checkSnapshotHead(r) != nil {
		return nil, false // set aside: noRoom answers why
	}
	return r, ok
}

// roomList returns every hosted room.
func (n *Node) roomList() []*hostedRoom {
	n.mu.RLock()
	defer n.mu.RUnlock()
	out := make([]*hostedRoom, 0, len(n.rooms))
	for _, r := range n.rooms {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].id < out[j].id })
	return out
}

// stateConfig is the kernel configuration of hosted room id.
func (n *Node) stateConfig(id string, src packSource) room.Config {
	return room.Config{Limits: n.cfg.Limits, Packs: src, History: n.history(id)}
}

// noRoom is the error for a room ID this node cannot serve: unavailable
// for a room whose stored chain did not recover, room_not_found otherwise.
func (n *Node) noRoom(id string) error {
	n.mu.RLock()
	rb, r := n.broken[id], n.rooms[id]
	n.mu.RUnlock()
	if rb != nil {
		return rb.adpError()
	}
	if r != nil && r.unchecked.Load() {
		// Its snapshot's head could not be read yet: retry.
		return storageUnavailable()
	}
	return adp.Errorf(adp.CodeRoomNotFound, "room does not exist")
}

// BrokenRooms lists the rooms whose stored chain did not recover.
func (n *Node) BrokenRooms() []*RoomBroken {
	n.mu.RLock()
	defer n.mu.RUnlock()
	out := make([]*RoomBroken, 0, len(n.broken))
	for _, rb := range n.broken {
		out = append(out, rb)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].RoomID < out[j].RoomID })
	return out
}

var roomIDEncoding = base32.NewEncoding("0123456789abcdefghijklmnopqrstuv").WithPadding(base32.NoPadding)

// newRoomID returns an Xid-compatible room ID: 12 bytes (4 of time, 8
// random) as 20 lowercase base32hex characters (§7.1, DECISIONS 5).
func (n *Node) newRoomID() string {
	var b [12]byte
	binary.BigEndian.PutUint32(b[:4], uint32(n.cfg.Now().Unix()))
	rand.Read(b[4:])
	return roomIDEncoding.EncodeToString(b[:])
}

// readRecords returns up to limit records of a room with seq > after.
func (n *Node) readRecords(roomID string, after int64, limit int) ([][]byte, error) {
	var out [][]byte
	err := n.db.View(func(txn *badger.Txn) error {
		opts := badger.IteratorOptions{PrefetchValues: true, PrefetchSize: min(limit, 256), Prefix: recordKey(roomID, 0)[:len(pfxRecord)+len(roomID)+1]}
		it := txn.NewIterator(opts)
		defer it.Close()
		for it.Seek(recordKey(roomID, after+1)); it.Valid() && len(out) < limit; it.Next() {
			v, err := it.Item().ValueCopy(nil)
			if err != nil {
				return err
			}
			out = append(out, v)
		}
		return nil
	})
	return out, err
}

// recordAt returns the stored record at seq.
func (n *Node) recordAt(roomID string, seq int64) ([]byte, error) {
	var out []byte
	err := n.db.View(func(txn *badger.Txn) error {
		item, err := txn.Get(recordKey(roomID, seq))
		if err != nil {
			return err
		}
		out, err = item.ValueCopy(nil)
		return err
	})
	return out, err
}

// lookupEnvelope finds an accepted envelope by its digest (Identity §9).
func (n *Node) lookupEnvelope(d [32]byte) (string, int64, bool, error) {
	var roomID string
	var seq int64
	found := false
	err := n.db.View(func(txn *badger.Txn) error {
		item, err := txn.Get(envelopeKey(d))
		if errors.Is(err, badger.ErrKeyNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		return item.Value(func(v []byte) error {
			roomID, seq, found = parseEnvelopeValue(v)
			return nil
		})
	})
	return roomID, seq, found, err
}

func internal(err error) *adp.Error {
	return &adp.Error{Code: adp.CodeInternal, Message: err.Error()}
}

// Ready reports whether the node accepts traffic.
func (n *Node) Ready() bool { return !n.closing.Load() }

// DrainStreams ends every live stream (graceful shutdown).
func (n *Node) DrainStreams() { n.hub.Drain(live.ReasonShutdown) }

// DB returns the node's Badger database, for the other components of the
// process (index, mirrors) that keep their own key spaces in it.
func (n *Node) DB() *badger.DB { return n.db }

// HostsRoom reports whether this node is authoritative for roomID.
func (n *Node) HostsRoom(roomID string) bool {
	_, ok := n.room(roomID)
	return ok
}

// SetArchiveHostLog registers what an archive manifest embeds as
// extra.host_log: the host log's proof of the room's last record (nil:
// none yet, e.g. no checkpoint covers it), with the witnesses'
// cosignatures on its checkpoint; and extra.host_key, the key that signs
// the log's checkpoints.
func (n *Node) SetArchiveHostLog(hostKey identity.AgentID, fn func(lastHash string) any) {
	n.archiveMu.Lock()
	n.archiveKey, n.archiveLog = hostKey, fn
	n.archiveMu.Unlock()
}

// RecordHash returns the hash of a hosted room's record at seq; a store
// that cannot be read is an error, not "absent".
func (n *Node) RecordHash(roomID string, seq int64) (string, bool, error) {
	hr, ok := n.room(roomID)
	if !ok {
		return "", false, nil
	}
	var h string
	var found bool
	var err error
	if verr := n.view(hr, func(st *room.State) { h, found, err = st.RecordHash(seq) }); verr != nil {
		return "", false, verr
	}
	return h, found, err
}

// MaxBodyBytes is the largest request body the node accepts.
func (n *Node) MaxBodyBytes() int64 { return n.cfg.MaxBodyBytes }

// Logger is the node's structured logger (Config.Log).
func (n *Node) Logger() *slog.Logger { return n.log }
