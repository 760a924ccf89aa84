// Package hostlog is the host log: every record the node accepts is
// appended, after it is durable and off the write path, as a leaf whose
// data is the record hash's 32 raw bytes, to a C2SP tlog-tiles log kept by
// transparency-dev/tessera's POSIX driver in DATA/tlog. Checkpoints are
// signed notes with the host's Ed25519 key (adp/tlogproof has the pure
// formats and verification).
//
// The log follows the node's change feed (Config.Feed): every stored
// record has a feed entry written in its own transaction, and the log
// stores its feed position (storelayout.FeedPos + "host-log") in the
// transaction that journals the leaves it handled, so after any stop it
// replays the feed from there.
//
// Restart safety: a journal in the node's Badger maps leaf indices to
// records and keeps each room's highest logged seq (its watermark). A
// leaf is journalled before it is handed to tessera, so after a crash the
// journal's tail beyond tessera's integrated size is handed again, in the
// same order. No record is logged twice: a leaf is added only above its
// room's watermark, and only once per index. When the feed no longer
// holds the entries after the log's position (none stored yet, or it fell
// more than the feed's bound behind), the log resynchronises: it appends
// every record above its room's watermark, comparing every room's head
// with the watermarks, then follows the feed from the head it read first.
package hostlog

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/transparency-dev/merkle/compact"
	"github.com/transparency-dev/tessera"
	"github.com/transparency-dev/tessera/storage/posix"
	"golang.org/x/mod/sumdb/note"
	"k8s.io/klog/v2"

	"github.com/adpnode/adpnode/adp"
	"github.com/adpnode/adpnode/adp/tlogproof"
	"github.com/adpnode/adpnode/hostport"
	"github.com/adpnode/adpnode/internal/storelayout"
)

// Dir is the log's directory inside the data directory.
const Dir = "tlog"

// Leaf is one accepted record as the log sees it.
type Leaf struct {
	RoomID string
	Seq    int64
	Hash   [32]byte // the record hash's raw bytes: the leaf data
}

// Feed is the node's change feed (node.Follow).
type Feed interface {
	// FeedHead returns the newest entry's seq.
	FeedHead() uint64
	// Follow hands fn the entries after since, in order, until ctx ends
	// or fn fails; hostport.ErrFeedBehind when they were pruned.
	Follow(ctx context.Context, since uint64, fn func([]hostport.FeedEntry) error) error
}

// Source is what the log reads from the node to resynchronise.
type Source interface {
	// RoomHeads calls fn with every hosted room's last seq.
	RoomHeads(fn func(roomID string, seq int64) bool) error
	// RecordHashes returns up to limit record hashes with seq > after.
	RecordHashes(roomID string, after int64, limit int) ([][32]byte, error)
	// Locate returns the room and seq of the record with this hash
	// (false: no such record).
	Locate(recordHash [32]byte) (roomID string, seq int64, ok bool, err error)
}

// Config configures the host log.
type Config struct {
	// Dir is where tessera keeps tiles, bundles and the checkpoint.
	Dir string
	// DB is the node's database; the journal lives under the l/ prefix.
	DB *badger.DB
	// Key is the host's Ed25519 key; Origin the log origin
	// (tlogproof.Origin of the public host).
	Key    ed25519.PrivateKey
	Origin string
	Source Source
	Feed   Feed
	// CheckpointInterval is the least time between two published
	// checkpoints (default 1 s, at least 100 ms).
	CheckpointInterval time.Duration
	// BatchMaxAge is how long tessera waits to fill a batch (default
	// 50 ms).
	BatchMaxAge time.Duration
	// RoundInterval is the least time between the starts of two rounds
	// (a journal transaction and a tessera integration of what queued
	// meanwhile; default CheckpointInterval). A round has a fixed cost of
	// synced writes whatever its size, and a checkpoint is published at
	// most once per CheckpointInterval anyway, so starting rounds more
	// often costs the node write throughput and makes no record covered
	// sooner. A record arriving after a quiet spell starts a round at
	// once.
	RoundInterval time.Duration
	Log           *slog.Logger
}

// Journal key space: key and value shapes are in the storage layout
// table (internal/storelayout, docs/storage.md).
const (
	pfxPart    = storelayout.TlogPart
	pfxRun     = storelayout.TlogRun
	pfxMark    = storelayout.TlogMark
	keyNext    = storelayout.TlogNext
	keyClean   = storelayout.TlogClean
	keyFence   = storelayout.TlogFence
	keyPos     = storelayout.FeedPos + FeedFollower
	pfxV1Index = storelayout.TlogIndex
	pfxV1Hash  = storelayout.TlogHash
)

// FeedFollower is the log's name among the feed's followers.
const FeedFollower = "host-log"

const (
	maxMarks   = 1 << 16 // watermarks cached in memory
	readHashes = 4096    // record hashes read per gap-fill step
)

// chunk is the leaves per journal transaction and tessera round (a
// variable for the integration benchmark only).
var chunk = 4096

var klogOnce sync.Once

// Log is the running host log.
type Log struct {
	cfg      Config
	log      *slog.Logger
	add      tessera.AddFn
	shutdown func(context.Context) error
	reader   tessera.LogReader
	verifier note.Verifier
	vkey     string

	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
	// follow ends the live follow at Close (the writer then drains the
	// feed up to closeHead).
	follow    context.Context
	endFollow context.CancelFunc
	closeHead atomic.Uint64
	noDrain   atomic.Bool // tests: stop as a crash would (CrashForTest)

	closing atomic.Bool
	stop    chan struct{} // closed when Close begins: ends a pace wait
	rounds  atomic.Uint64 // rounds begun (Rounds)
	next    uint64        // journal length; writer goroutine only after Open
	pos     uint64        // the feed position journalled; writer goroutine
	marks   map[string]int64
	failed  atomic.Pointer[error]

	// The round being gathered (writer goroutine).
	pending    []Leaf
	pendingPos uint64
	lastRound  time.Time

	nodeMu sync.Mutex
	nodes  map[compact.NodeID][]byte // complete subtrees' hashes (proof.go)

	witnessed atomic.Pointer[Witnessed] // SetWitnessed
	onRound   atomic.Pointer[func()]    // OnRound

	// The fence after a restore (Fenced): while set, nothing is journalled
	// beyond fenceSize; unfenced is closed by Unfence.
	fenced    atomic.Bool
	fenceSize uint64
	unfenced  chan struct{}
	fenceOnce sync.Once

	cpMu     sync.Mutex
	cpRaw    []byte
	cpParsed tlogproof.Checkpoint
}

// Open opens (or creates) the host log, hands tessera the journalled
// leaves it has not integrated, and starts the writer, which first scans
// for records never journalled unless the last Close was clean.
func Open(cfg Config) (*Log, error) {
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.CheckpointInterval == 0 {
		cfg.CheckpointInterval = time.Second
	}
	if cfg.BatchMaxAge == 0 {
		cfg.BatchMaxAge = 50 * time.Millisecond
	}
	if cfg.RoundInterval <= 0 {
		cfg.RoundInterval = cfg.CheckpointInterval
	}
	if cfg.DB == nil || cfg.Source == nil || cfg.Feed == nil || len(cfg.Key) != ed25519.PrivateKeySize || cfg.Origin == "" {
		return nil, errors.New("hostlog: DB, Source, Feed, Key and Origin are required")
	}
	if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
		return nil, err
	}
	if err := checkOrigin(cfg); err != nil {
		return nil, err
	}
	// tessera logs through klog: send it to our structured log.
	klogOnce.Do(func() { klog.SetSlogLogger(cfg.Log.With("component", "tessera")) })
	signer, err := tlogproof.Signer(cfg.Origin, cfg.Key)
	if err != nil {
		return nil, err
	}
	pub := cfg.Key.Public().(ed25519.PublicKey)
	v, err := tlogproof.Verifier(cfg.Origin, pub)
	if err != nil {
		return nil, err
	}
	vkey, _ := tlogproof.VerifierKey(cfg.Origin, pub)
	ctx, cancel := context.WithCancel(context.Background())
	posixDrv, err := posix.New(ctx, posix.Config{Path: cfg.Dir})
	if err != nil {
		cancel()
		return nil, err
	}
	drv, err := newQuietDriver(ctx, posixDrv) // quiet.go
	if err != nil {
		cancel()
		return nil, err
	}
	opts := tessera.NewAppendOptions().
		WithCheckpointSigner(signer).
		// The writer hands tessera at most one chunk at a time and waits
		// for it, and a batch never fills: tessera's timer flush and its
		// size flush could otherwise race and sequence two batches out
		// of the order they were added in, and the journal would not
		// match the log.
		WithBatching(uint(2*chunk), cfg.BatchMaxAge).
		WithPushback(uint(4 * chunk)).
		WithCheckpointInterval(publishInterval(cfg.CheckpointInterval)).
		WithShutdownTimeout(10 * time.Second)
	statsCtx, stopStats := context.WithCancel(ctx)
	app, shutdown, _, err := tessera.NewAppender(statsCtx, drv, opts)
	stopStats() // ends tessera's statistics loop (quiet.go)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("hostlog: %w", err)
	}
	l := &Log{cfg: cfg, log: cfg.Log, add: app.Add, shutdown: shutdown, reader: drv.real, verifier: v, vkey: vkey,
		ctx: ctx, cancel: cancel, done: make(chan struct{}), stop: make(chan struct{}), marks: map[string]int64{}, nodes: map[compact.NodeID][]byte{}}
	l.follow, l.endFollow = context.WithCancel(ctx)
	havePos, err := l.loadJournal()
	if err == nil {
		err = l.convertV1()
	}
	if err == nil {
		err = l.loadFence()
	}
	if err != nil {
		cancel()
		return nil, err
	}
	if err := l.replayTail(); err != nil {
		cancel()
		return nil, err
	}
	go l.run(!havePos)
	return l, nil
}

// publishInterval is tessera's checkpoint interval for the log's
// CheckpointInterval. Tessera publishes when an integration completes,
// unless the published checkpoint is younger than its interval; then it
// tries again only a whole interval later. The writer's rounds, which
// begin at most once per RoundInterval (by default the checkpoint
// interval), already space the integrations; with tessera's interval
// equal to theirs, a round whose integration ends a little less than an
// interval after the last publication was published an interval late
// (BenchmarkBurstCoveredLatency: p99 2.2–2.9 s at 1 s). At half the
// interval each round's checkpoint is published when its integration
// ends, and two are still never less than half an interval apart.
func publishInterval(cpInt time.Duration) time.Duration {
	return max(minPublishInterval, cpInt/2)
}

// minPublishInterval is the least checkpoint interval tessera's POSIX
// driver accepts.
const minPublishInterval = 100 * time.Millisecond

// checkOrigin compares the origin of the published checkpoint with the
// configured one. The origin is the public host's, so an operator who
// changes public_url changes it, and the published checkpoint would no
// longer verify against the log's verifier (nor could clients tell the
// log from another) until tessera publishes again, which it does only
// when the tree grows. The log goes on under the new origin: the old
// checkpoint is removed (with a warning naming both origins), and
// tessera publishes one under the new origin at its next tick, over the
// same tree, so it covers the old leaves and then the new ones.
func checkOrigin(cfg Config) error {
	path := filepath.Join(cfg.Dir, "checkpoint")
	raw, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	text, _, _ := bytes.Cut(raw, []byte("\n\n"))
	c, err := tlogproof.ParseCheckpoint(append(text, '\n'))
	switch {
	case err != nil:
		cfg.Log.Warn("host log: the published checkpoint does not parse; publishing a new one", "err", err)
	case c.Origin == cfg.Origin:
		return nil
	default:
		cfg.Log.Warn("host log: the log origin changed (public_url changed?); going on under the new origin, whose first checkpoint covers the old leaves",
			"old_origin", c.Origin, "new_origin", cfg.Origin, "size", c.Size)
	}
	return os.Remove(path)
}

// loadJournal reads the journal length and the feed position (false:
// none stored), and drops the retired clean-stop mark.
func (l *Log) loadJournal() (havePos bool, err error) {
	err = l.cfg.DB.Update(func(txn *badger.Txn) error {
		item, err := txn.Get([]byte(keyNext))
		switch {
		case errors.Is(err, badger.ErrKeyNotFound):
		case err != nil:
			return err
		default:
			if err := item.Value(func(v []byte) error { l.next = binary.BigEndian.Uint64(v); return nil }); err != nil {
				return err
			}
		}
		item, err = txn.Get([]byte(keyPos))
		switch {
		case errors.Is(err, badger.ErrKeyNotFound):
		case err != nil:
			return err
		default:
			if err := item.Value(func(v []byte) error { l.pos = binary.BigEndian.Uint64(v); return nil }); err != nil {
				return err
			}
			havePos = true
		}
		if _, err := txn.Get([]byte(keyClean)); err == nil {
			return txn.Delete([]byte(keyClean))
		} else if !errors.Is(err, badger.ErrKeyNotFound) {
			return err
		}
		return nil
	})
	return havePos, err
}

// loadFence reads the restore fence (storelayout.TlogFence, written by
// node.RestoreDir): the database is a backup's, and the log the node
// kept after that backup may have had more leaves, which witnesses saw
// and cosigned. The journal rebuilds the backup's tree exactly (replayTail
// re-adds it in journal order), a prefix of any tree the log published
// later; any leaf beyond it could differ from what the witnesses saw, so
// none is added until Unfence (the witness submitter calls it once every
// witness cosigned the rebuilt tree, which proves none holds a larger
// one).
func (l *Log) loadFence() error {
	err := l.cfg.DB.View(func(txn *badger.Txn) error {
		_, err := txn.Get([]byte(keyFence))
		return err
	})
	switch {
	case errors.Is(err, badger.ErrKeyNotFound):
		return nil
	case err != nil:
		return err
	}
	l.fenced.Store(true)
	l.fenceSize = l.next
	l.unfenced = make(chan struct{})
	l.log.Warn("host log: the data dir was restored from a backup; the log publishes nothing beyond the backup's tree until its witnesses confirm they hold no larger one (records are accepted and kept meanwhile, and logged then)",
		"size", l.next)
	return nil
}

// Fenced reports whether the log holds back after a restore, and the
// size of the tree it holds at.
func (l *Log) Fenced() (size uint64, fenced bool) {
	if !l.fenced.Load() {
		return 0, false
	}
	return l.fenceSize, true
}

// Unfence lifts the restore fence for good: the log goes on from the
// backup's tree, logging every record accepted since (it follows the
// feed from its position, or resynchronises).
func (l *Log) Unfence() error {
	if !l.fenced.Load() {
		return nil
	}
	if err := l.cfg.DB.Update(func(txn *badger.Txn) error { return txn.Delete([]byte(keyFence)) }); err != nil {
		return err
	}
	l.fenceOnce.Do(func() {
		l.fenced.Store(false)
		close(l.unfenced)
		l.log.Info("host log: every witness holds a prefix of the restored tree; logging resumes", "size", l.fenceSize)
	})
	return nil
}

// replayTail hands tessera the journalled leaves it has not integrated
// (a crash between the journal write and integration).
func (l *Log) replayTail() error {
	size, err := l.reader.IntegratedSize(l.ctx)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if size > l.next {
		return fmt.Errorf("hostlog: the log in %s has %d leaves but the journal only %d: it is not this node's log", l.cfg.Dir, size, l.next)
	}
	for from := size; from < l.next; {
		to := min(l.next, from+uint64(chunk))
		var leaves []Leaf
		err := l.cfg.DB.View(func(txn *badger.Txn) (err error) {
			leaves, err = leavesIn(txn, from, to)
			return err
		})
		if err != nil {
			return err
		}
		hashes := make([][32]byte, len(leaves))
		for i, lf := range leaves {
			hashes[i] = lf.Hash
		}
		if err := l.integrate(from, hashes); err != nil {
			return err
		}
		l.log.Info("host log: re-added journalled leaves after a crash", "from", from, "count", len(hashes))
		from += uint64(len(hashes))
	}
	return nil
}

// integrate hands tessera leaves that must land at first, first+1, …
// and waits until they are integrated.
func (l *Log) integrate(first uint64, hashes [][32]byte) error {
	futures := make([]tessera.IndexFuture, len(hashes))
	for i, h := range hashes {
		futures[i] = l.add(l.ctx, tessera.NewEntry(h[:]))
	}
	for i, f := range futures {
		idx, err := f()
		if err != nil {
			return fmt.Errorf("hostlog: integrate leaf %d: %w", first+uint64(i), err)
		}
		if idx.Index != first+uint64(i) {
			return fmt.Errorf("hostlog: leaf journalled at %d was sequenced at %d", first+uint64(i), idx.Index)
		}
	}
	return nil
}

// Err reports why the writer stopped, if it did.
func (l *Log) Err() error {
	if p := l.failed.Load(); p != nil {
		return *p
	}
	return nil
}

// errDrained ends the follow that drains the feed at Close.
var errDrained = errors.New("hostlog: drained")

func (l *Log) run(resync bool) {
	defer close(l.done)
	fail := func(err error) {
		if err != nil && l.ctx.Err() == nil {
			l.failed.Store(&err)
			l.log.Error("host log stopped; records stay durable and are logged at the next start", "err", err)
		}
	}
	if l.fenced.Load() {
		select {
		case <-l.unfenced:
		case <-l.stop:
			return
		case <-l.ctx.Done():
			return
		}
	}
	// Every pass of the loop but the first follows a resync: the only
	// case that loops is a feed that no longer holds the log's position.
	for ; ; resync = true {
		if resync {
			if err := l.resync(); err != nil {
				fail(err)
				return
			}
		}
		err := l.cfg.Feed.Follow(l.follow, l.since(), l.take)
		switch {
		case errors.Is(err, hostport.ErrFeedBehind):
			l.log.Warn("host log: the change feed no longer holds the entries after the log's position; resynchronising from every room's head", "position", l.since())
		case l.follow.Err() != nil && l.noDrain.Load():
			return
		case l.follow.Err() != nil && l.ctx.Err() == nil:
			// Close: log what the feed held when it began, in one round.
			err = nil
			if l.since() < l.closeHead.Load() {
				err = l.cfg.Feed.Follow(l.ctx, l.since(), l.take)
				if errors.Is(err, errDrained) {
					err = nil
				}
			}
			if err == nil {
				err = l.flushPending()
			}
			fail(err)
			return
		default:
			fail(err)
			return
		}
	}
}

// since is the feed position to follow from: after what is journalled
// and what the round being gathered holds.
func (l *Log) since() uint64 { return max(l.pos, l.pendingPos) }

// resync appends every record above its room's watermark, and sets the
// position to the feed's head as it was before the scan (what the feed
// holds beyond it the watermarks skip). It drops the round being
// gathered: the scan covers it.
func (l *Log) resync() error {
	head := l.cfg.Feed.FeedHead()
	l.pending, l.pendingPos = nil, 0
	before := l.next
	if err := l.catchUp(); err != nil {
		return err
	}
	if l.next != before {
		l.rounds.Add(1)
		l.lastRound = time.Now()
	}
	l.pos = head
	return l.cfg.DB.Update(func(txn *badger.Txn) error {
		return txn.Set([]byte(keyPos), binary.BigEndian.AppendUint64(nil, head))
	})
}

// maxPending bounds the leaves a round gathers (about 100 MiB).
const maxPending = 1 << 20

// take gathers a batch of feed entries into the round, and runs the round
// once RoundInterval has passed since the last one began (a record after
// a quiet spell starts one at once); what the feed holds meanwhile joins
// the round. Once Close began, it gathers up to the feed's head at that
// moment and runs one round.
func (l *Log) take(batch []hostport.FeedEntry) error {
	for _, e := range batch {
		l.pending = append(l.pending, Leaf{RoomID: e.RoomID, Seq: e.RecordSeq, Hash: e.Hash})
	}
	l.pendingPos = batch[len(batch)-1].Seq
	if l.closing.Load() {
		if l.noDrain.Load() || l.pendingPos < l.closeHead.Load() {
			return nil
		}
		if err := l.flushPending(); err != nil {
			return err
		}
		return errDrained
	}
	if len(l.pending) < maxPending {
		if wait := l.cfg.RoundInterval - time.Since(l.lastRound); wait > 0 {
			if l.cfg.Feed.FeedHead() > l.pendingPos {
				return nil // read what is there first
			}
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-l.stop:
			case <-l.ctx.Done():
			}
			t.Stop()
			if l.cfg.Feed.FeedHead() > l.pendingPos || l.closing.Load() {
				return nil // it joins this round
			}
		}
	}
	return l.flushPending()
}

// flushPending runs a round over what was gathered.
func (l *Log) flushPending() error {
	if l.pendingPos <= l.pos {
		return nil
	}
	l.lastRound = time.Now()
	l.rounds.Add(1)
	batch, pos := l.pending, l.pendingPos
	l.pending = nil
	if err := l.process(batch, pos); err != nil {
		return err
	}
	l.pos = pos
	if fn := l.onRound.Load(); fn != nil {
		(*fn)()
	}
	return nil
}

// OnRound registers fn, called (on the log's writer goroutine: it must
// not block) after each round has handed its leaves to tessera, which
// publishes the checkpoint covering them within its checkpoint interval:
// a reader of checkpoints (the witness submitter) polls after it instead
// of all the time.
func (l *Log) OnRound(fn func()) { l.onRound.Store(&fn) }

// Rounds returns how many rounds the writer has begun since Open (each
// journals and integrates what queued since the last one).
func (l *Log) Rounds() uint64 { return l.rounds.Load() }

// process journals and integrates a batch, filling any gap below a leaf
// from the store and skipping what a room's watermark already covers,
// and journals pos, the feed position after the batch, with its last
// chunk (alone when the batch had nothing new).
func (l *Log) process(batch []Leaf, pos uint64) error {
	var pending []Leaf
	for _, lf := range batch {
		wm, err := l.mark(lf.RoomID)
		if err != nil {
			return err
		}
		if lf.Seq <= wm {
			continue
		}
		if lf.Seq > wm+1 {
			gap, err := l.readGap(lf.RoomID, wm, lf.Seq-1)
			if err != nil {
				return err
			}
			pending = append(pending, gap...)
		}
		pending = append(pending, lf)
		l.marks[lf.RoomID] = lf.Seq
		if len(pending) >= chunk {
			if err := l.commit(pending, 0); err != nil {
				return err
			}
			pending = nil
		}
	}
	if len(pending) > 0 {
		return l.commit(pending, pos)
	}
	return l.cfg.DB.Update(func(txn *badger.Txn) error {
		return txn.Set([]byte(keyPos), binary.BigEndian.AppendUint64(nil, pos))
	})
}

// readGap returns the leaves of roomID with after < seq <= upto.
func (l *Log) readGap(roomID string, after, upto int64) ([]Leaf, error) {
	var out []Leaf
	for after < upto {
		hs, err := l.cfg.Source.RecordHashes(roomID, after, int(min(upto-after, readHashes)))
		if err != nil {
			return nil, err
		}
		if len(hs) == 0 {
			return nil, fmt.Errorf("hostlog: room %s has no record after seq %d below %d", roomID, after, upto+1)
		}
		for _, h := range hs {
			after++
			out = append(out, Leaf{RoomID: roomID, Seq: after, Hash: h})
		}
	}
	return out, nil
}

// mark returns the room's watermark (0: nothing logged).
func (l *Log) mark(roomID string) (int64, error) {
	if wm, ok := l.marks[roomID]; ok {
		return wm, nil
	}
	if len(l.marks) >= maxMarks {
		clear(l.marks)
	}
	var wm int64
	err := l.cfg.DB.View(func(txn *badger.Txn) error {
		item, err := txn.Get([]byte(pfxMark + roomID))
		if errors.Is(err, badger.ErrKeyNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		return item.Value(func(v []byte) error { wm = int64(binary.BigEndian.Uint64(v)); return nil })
	})
	if err != nil {
		return 0, err
	}
	l.marks[roomID] = wm
	return wm, nil
}

// commit journals leaves, a chunk at a time, and hands them to tessera;
// pos (0: none) is the feed position journalled with the last chunk.
// Each chunk is grouped by room first (journal.go: one run per room).
func (l *Log) commit(leaves []Leaf, pos uint64) error {
	for len(leaves) > 0 {
		n := min(len(leaves), chunk)
		part := groupByRoom(leaves[:n])
		leaves = leaves[n:]
		first := l.next
		p := uint64(0)
		if len(leaves) == 0 {
			p = pos
		}
		err := l.journal(first, part, p)
		if err != nil {
			// Nothing of this chunk counts as journalled: forget the
			// cached watermarks so the rooms are read again.
			clear(l.marks)
			return err
		}
		l.next = first + uint64(len(part))
		hashes := make([][32]byte, len(part))
		for i, lf := range part {
			hashes[i] = lf.Hash
		}
		if err := l.integrate(first, hashes); err != nil {
			return err
		}
	}
	return nil
}

// catchUp appends every record above its room's watermark. Rooms are
// streamed from the source (not collected), so a start over millions of
// rooms holds one batch of leaves at a time.
func (l *Log) catchUp() error {
	var batch []Leaf
	var ferr error
	if err := l.cfg.Source.RoomHeads(func(id string, seq int64) bool {
		if l.ctx.Err() != nil {
			return false
		}
		wm, err := l.mark(id)
		if err != nil {
			ferr = err
			return false
		}
		if seq > wm {
			gap, err := l.readGap(id, wm, seq)
			if err != nil {
				ferr = err
				return false
			}
			batch = append(batch, gap...)
			l.marks[id] = seq
		}
		if len(batch) >= chunk {
			if ferr = l.commit(batch, 0); ferr != nil {
				return false
			}
			batch = nil
		}
		return true
	}); err != nil {
		return err
	}
	if ferr != nil {
		return ferr
	}
	if len(batch) > 0 {
		return l.commit(batch, 0)
	}
	return nil
}

// Close ends a round's pace wait, logs every record the feed held when
// it began, waits until tessera has published a checkpoint covering every
// leaf it was handed, and stops. The caller closes the database
// afterwards. Records stored after Close began are logged at the next
// start, which follows the feed from the journalled position.
func (l *Log) Close() error {
	if l.closing.Swap(true) {
		return nil
	}
	l.closeHead.Store(l.cfg.Feed.FeedHead())
	close(l.stop)
	l.endFollow()
	<-l.done
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	var err error
	if l.Err() == nil {
		err = l.shutdown(ctx)
	}
	l.cancel()
	return err
}

// Origin returns the log origin.
func (l *Log) Origin() string { return l.cfg.Origin }

// VerifierKey returns the note verifier key of the log's checkpoints.
func (l *Log) VerifierKey() string { return l.vkey }

// Verifier returns the note verifier of the log's checkpoints.
func (l *Log) Verifier() note.Verifier { return l.verifier }

// Checkpoint returns the latest published signed checkpoint and its body.
func (l *Log) Checkpoint(ctx context.Context) ([]byte, tlogproof.Checkpoint, error) {
	raw, err := l.reader.ReadCheckpoint(ctx)
	if errors.Is(err, os.ErrNotExist) {
		return nil, tlogproof.Checkpoint{}, adp.Errorf(adp.CodeNotFound, "the host log has published no checkpoint yet")
	}
	if err != nil {
		return nil, tlogproof.Checkpoint{}, err
	}
	l.cpMu.Lock()
	defer l.cpMu.Unlock()
	if string(raw) == string(l.cpRaw) {
		return l.cpRaw, l.cpParsed, nil
	}
	c, _, err := tlogproof.Open(raw, l.verifier)
	if err != nil {
		return nil, tlogproof.Checkpoint{}, fmt.Errorf("hostlog: own checkpoint does not verify: %w", err)
	}
	l.cpRaw, l.cpParsed = raw, c
	return raw, c, nil
}

// CheckpointTime returns when the latest checkpoint was published: its
// file's modification time (tessera writes the file only when the tree
// grew), on the host's clock.
func (l *Log) CheckpointTime() (time.Time, error) {
	fi, err := os.Stat(filepath.Join(l.cfg.Dir, "checkpoint"))
	if err != nil {
		return time.Time{}, err
	}
	return fi.ModTime(), nil
}
