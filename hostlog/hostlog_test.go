package hostlog_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/adpnode/adpnode/adp"
	"github.com/adpnode/adpnode/adp/tlogproof"
	"github.com/adpnode/adpnode/hostlog"
	"github.com/adpnode/adpnode/hostport"
	"github.com/adpnode/adpnode/internal/testwait"
)

// code is err's ADP code ("other: …" for any other error).
func code(err error) adp.Code {
	if ae, ok := err.(*adp.Error); ok {
		return ae.Code
	}
	return "other: " + adp.Code(fmt.Sprint(err))
}

// rooms is a fake node: each room's record hashes in seq order, and its
// change feed.
type rooms struct {
	mu    sync.Mutex
	r     map[string][][32]byte
	at    map[[32]byte]hostlog.Leaf // record hash → its room and seq
	feed  []hostport.FeedEntry
	floor uint64 // entries at or below it are pruned
	wake  chan struct{}
}

func newRooms() *rooms {
	return &rooms{r: map[string][][32]byte{}, at: map[[32]byte]hostlog.Leaf{}, wake: make(chan struct{})}
}

func (s *rooms) FeedHead() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return uint64(len(s.feed))
}

func (s *rooms) Follow(ctx context.Context, since uint64, fn func([]hostport.FeedEntry) error) error {
	pos := since
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		s.mu.Lock()
		if pos < s.floor {
			s.mu.Unlock()
			return hostport.ErrFeedBehind
		}
		batch := append([]hostport.FeedEntry(nil), s.feed[pos:min(uint64(len(s.feed)), pos+512)]...)
		wake := s.wake
		s.mu.Unlock()
		if len(batch) > 0 {
			if err := fn(batch); err != nil {
				return err
			}
			pos = batch[len(batch)-1].Seq
			continue
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// entry adds a feed entry for lf (under s.mu).
func (s *rooms) entry(lf hostlog.Leaf) {
	s.feed = append(s.feed, hostport.FeedEntry{Seq: uint64(len(s.feed) + 1), RoomID: lf.RoomID, RecordSeq: lf.Seq, Hash: lf.Hash})
	close(s.wake)
	s.wake = make(chan struct{})
}

// again hands lf to the feed once more (a follower replaying).
func (s *rooms) again(lf hostlog.Leaf) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.entry(lf)
}

// prune drops the feed's entries at or below floor.
func (s *rooms) prune(floor uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.floor = floor
}

func (s *rooms) Locate(h [32]byte) (string, int64, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	lf, ok := s.at[h]
	return lf.RoomID, lf.Seq, ok, nil
}

func (s *rooms) RoomHeads(fn func(string, int64) bool) error {
	s.mu.Lock()
	ids := make([]string, 0, len(s.r))
	for id := range s.r {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	heads := make([]int64, len(ids))
	for i, id := range ids {
		heads[i] = int64(len(s.r[id]))
	}
	s.mu.Unlock()
	for i, id := range ids {
		if !fn(id, heads[i]) {
			break
		}
	}
	return nil
}

func (s *rooms) RecordHashes(id string, after int64, limit int) ([][32]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	hs := s.r[id]
	if after >= int64(len(hs)) {
		return nil, nil
	}
	end := min(int64(len(hs)), after+int64(limit))
	return append([][32]byte(nil), hs[after:end]...), nil
}

// accept stores a new record of room id and returns its leaf.
func (s *rooms) accept(id string) hostlog.Leaf {
	s.mu.Lock()
	defer s.mu.Unlock()
	seq := int64(len(s.r[id]) + 1)
	var b [64]byte
	copy(b[:], id)
	binary.BigEndian.PutUint64(b[56:], uint64(seq))
	h := sha256.Sum256(b[:])
	s.r[id] = append(s.r[id], h)
	s.at[h] = hostlog.Leaf{RoomID: id, Seq: seq, Hash: h}
	// The node also finds a record by its envelope's hash.
	s.at[envelopeHash(h)] = s.at[h]
	s.entry(s.at[h])
	return s.at[h]
}

// envelopeHash stands for the hash of the envelope of the record with
// record hash h, which the node's Locate also answers.
func envelopeHash(h [32]byte) [32]byte { return sha256.Sum256(h[:]) }

type env struct {
	t     testing.TB
	host  string // the public host; "" is 127.0.0.1:1
	dir   string
	key   ed25519.PrivateKey
	src   *rooms
	db    *badger.DB
	log   *hostlog.Log
	cpInt time.Duration
	round time.Duration // RoundInterval (0: the default)
	logs  *slog.Logger  // nil: slog.Default
}

func newEnv(t testing.TB) *env {
	_, key, _ := ed25519.GenerateKey(nil)
	e := &env{t: t, dir: t.TempDir(), key: key, src: newRooms(), cpInt: 100 * time.Millisecond}
	e.open()
	t.Cleanup(func() { e.close() })
	return e
}

func (e *env) open() {
	e.t.Helper()
	db, err := badger.Open(badger.DefaultOptions(filepath.Join(e.dir, "db")).WithLogger(nil).
		WithMemTableSize(8 << 20).WithNumMemtables(2).WithBlockCacheSize(1 << 20))
	if err != nil {
		e.t.Fatal(err)
	}
	e.db = db
	batch := 10 * time.Millisecond
	if e.cpInt == 0 {
		batch = 0 // the daemon's defaults
	}
	e.log, err = hostlog.Open(hostlog.Config{Dir: filepath.Join(e.dir, hostlog.Dir), DB: db, Key: e.key,
		Origin: e.origin(), Source: e.src, Feed: e.src, CheckpointInterval: e.cpInt, BatchMaxAge: batch, RoundInterval: e.round, Log: e.logs})
	if err != nil {
		db.Close()
		e.db = nil
		e.t.Fatal(err)
	}
}

func (e *env) origin() string {
	if e.host == "" {
		return tlogproof.Origin("127.0.0.1:1")
	}
	return tlogproof.Origin(e.host)
}

func (e *env) close() {
	if e.log != nil {
		if err := e.log.Close(); err != nil {
			e.t.Errorf("close: %v", err)
		}
		e.log = nil
	}
	if e.db != nil {
		e.db.Close()
		e.db = nil
	}
}

// crash stops the log as a killed process would: what it had not
// journalled is lost with it.
func (e *env) crash() {
	if err := e.log.CrashForTest(); err != nil {
		e.t.Errorf("crash: %v", err)
	}
	e.log = nil
	e.close()
}

// waitSize polls until the published checkpoint covers n leaves.
func (e *env) waitSize(n uint64) tlogproof.Checkpoint {
	e.t.Helper()
	var cp tlogproof.Checkpoint
	testwait.Until(e.t, 60*time.Second, fmt.Sprintf("a checkpoint of %d leaves", n), func() bool {
		var err error
		_, cp, err = e.log.Checkpoint(context.Background())
		if err == nil && cp.Size >= n {
			return true
		}
		if err := e.log.Err(); err != nil {
			e.t.Fatal(err)
		}
		return false
	})
	if cp.Size > n {
		e.t.Fatalf("checkpoint size %d, want %d (a record logged twice?)", cp.Size, n)
	}
	return cp
}

func (e *env) total() uint64 {
	e.src.mu.Lock()
	defer e.src.mu.Unlock()
	n := 0
	for _, hs := range e.src.r {
		n += len(hs)
	}
	return uint64(n)
}

// checkAll verifies that every record of every room is in the log exactly
// once, with an inclusion proof against the signed checkpoint.
func (e *env) checkAll(cp tlogproof.Checkpoint) { e.check(cp, func(string, int) bool { return true }) }

// check verifies the records which(room, seq) selects.
func (e *env) check(cp tlogproof.Checkpoint, which func(string, int) bool) {
	e.t.Helper()
	ctx := context.Background()
	seen := map[uint64]bool{}
	e.src.mu.Lock()
	all := map[string][][32]byte{}
	for id, hs := range e.src.r {
		all[id] = hs
	}
	e.src.mu.Unlock()
	for id, hs := range all {
		for i, h := range hs {
			if !which(id, i+1) {
				continue
			}
			rp, err := e.log.Inclusion(ctx, h, 0)
			if err != nil {
				e.t.Fatalf("room %s seq %d: %v", id, i+1, err)
			}
			if len(seen) == 0 {
				// The whole offline check once (its cost is the
				// checkpoint's signature); the proofs of the rest
				// against the same verified root.
				got, err := tlogproof.VerifyRecord(rp, e.log.Verifier())
				if err != nil || got.Size != cp.Size || got.Hash != cp.Hash {
					e.t.Fatalf("room %s seq %d: verify: %v (size %d)", id, i+1, err, got.Size)
				}
			}
			if err := tlogproof.VerifyInclusion(rp.Inclusion, h, cp.Hash); err != nil || rp.Inclusion.TreeSize != cp.Size {
				e.t.Fatalf("room %s seq %d: %v", id, i+1, err)
			}
			if seen[rp.Inclusion.LeafIndex] {
				e.t.Fatalf("leaf %d holds two records", rp.Inclusion.LeafIndex)
			}
			seen[rp.Inclusion.LeafIndex] = true
			lf, ok, err := e.log.Leaf(rp.Inclusion.LeafIndex)
			if err != nil || !ok || lf.RoomID != id || lf.Seq != int64(i+1) {
				e.t.Fatalf("journal at %d: %+v %v %v", rp.Inclusion.LeafIndex, lf, ok, err)
			}
		}
	}
}

// TestEveryRecordProvesAcrossTiles appends 70,500 records (crossing level-0
// and level-1 tile boundaries: 256² = 65,536) of four tracked rooms spread
// over the whole log and of filler rooms, then verifies every tracked
// room's records and a sample of the rest against the signed checkpoint.
func TestEveryRecordProvesAcrossTiles(t *testing.T) {
	e := newEnv(t)
	tracked := []string{"room-a", "room-b", "room-c", "room-d"}
	n := 70_500
	if raceEnabled {
		n = 2_600 // crosses level-0 tile boundaries only; see race_on_test.go
	}
	for i := range n {
		id := fmt.Sprintf("filler-%d", i%97)
		if i%23 == 0 {
			id = tracked[(i/23)%len(tracked)]
		}
		e.src.accept(id)
	}
	start := time.Now()
	cp := e.waitSize(uint64(n))
	t.Logf("%d leaves logged in %v", n, time.Since(start))
	start = time.Now()
	defer func() { t.Logf("proofs checked in %v", time.Since(start)) }()
	if cp.Hash == tlogproof.EmptyRoot() {
		t.Fatal("empty root")
	}
	e.check(cp, func(id string, seq int) bool {
		return id[:5] == "room-" || seq%50 == 0
	})
	if got := e.log.Journalled(); got != uint64(n) {
		t.Fatalf("journal holds %d leaves", got)
	}
	// The level-0 tile 0 is the first 256 leaf hashes (tlog-tiles).
	res, err := e.log.Read(context.Background(), "tile/0/000")
	if err != nil || len(res.Body) != 256*32 || !res.Immutable {
		t.Fatalf("tile/0/000: %d bytes, immutable %v, %v", len(res.Body), res.Immutable, err)
	}
	lf, _, _ := e.log.Leaf(0)
	if lh := tlogproof.LeafHash(lf.Hash); string(res.Body[:32]) != string(lh[:]) {
		t.Fatal("tile/0/000 does not start with leaf 0's hash")
	}
	// The level-2 partial tile exists: 70,500 leaves span 2 level-1 tiles.
	if !raceEnabled {
		if res, err := e.log.Read(context.Background(), "tile/2/000.p/1"); err != nil || len(res.Body) != 32 || res.Immutable {
			t.Fatalf("tile/2/000.p/1: %d bytes, %v", len(res.Body), err)
		}
	}
}

// TestConsistencyAcrossCheckpoints keeps the checkpoints seen while the
// log grows and proves each one consistent with every later one; old
// sizes also prove inclusion against their own roots.
func TestConsistencyAcrossCheckpoints(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	var cps []tlogproof.Checkpoint
	total := uint64(0)
	for round := range 12 {
		k := 1 + round*round*37
		for i := range k {
			e.src.accept(fmt.Sprintf("r%d", i%3))
		}
		total += uint64(k)
		cps = append(cps, e.waitSize(total))
	}
	for i := range cps {
		for j := i; j < len(cps); j++ {
			p, err := e.log.Consistency(ctx, cps[i].Size, cps[j].Size)
			if err != nil {
				t.Fatal(err)
			}
			if err := tlogproof.VerifyConsistency(p, cps[i].Hash, cps[j].Hash); err != nil {
				t.Fatalf("%d→%d: %v", cps[i].Size, cps[j].Size, err)
			}
			if i < j && cps[i].Size > 1 {
				if err := tlogproof.VerifyConsistency(p, cps[j].Hash, cps[j].Hash); err == nil {
					t.Fatalf("%d→%d verified against a wrong old root", cps[i].Size, cps[j].Size)
				}
			}
		}
	}
	// Inclusion of the first record against every old checkpoint.
	first := e.src.r["r0"][0]
	for _, cp := range cps {
		rp, err := e.log.Inclusion(ctx, first, cp.Size)
		if err != nil {
			t.Fatal(err)
		}
		if rp.Checkpoint != "" {
			t.Fatal("a proof for a given size carries the latest checkpoint")
		}
		if err := tlogproof.VerifyInclusion(rp.Inclusion, first, cp.Hash); err != nil {
			t.Fatalf("size %d: %v", cp.Size, err)
		}
	}
}

// TestRestartAppendsMissedRecordsOnce: a clean restart, a crash with
// records accepted but never appended, and a crash between the journal
// write and integration all end with every record in the log once.
func TestRestartAppendsMissedRecordsOnce(t *testing.T) {
	e := newEnv(t)
	for i := range 1000 {
		e.src.accept(fmt.Sprintf("r%d", i%7))
	}
	e.waitSize(1000)
	e.close()
	e.open()
	e.waitSize(1000)

	// Accepted while the log was down or behind.
	for i := range 300 {
		e.src.accept(fmt.Sprintf("r%d", i%11))
	}
	// And a record the feed hands over twice, and a stale one.
	lf := e.src.accept("r3")
	e.src.again(lf)
	e.src.again(hostlog.Leaf{RoomID: "r0", Seq: 1, Hash: e.src.r["r0"][0]})
	e.crash()
	e.open()
	cp := e.waitSize(e.total())
	e.checkAll(cp)

	// Journalled but not integrated: the journal is ahead of tessera.
	e.close()
	e.open() // clean start: no scan
	e.waitSize(e.total())
	e.src.accept("r-new")
	cp = e.waitSize(e.total())
	e.checkAll(cp)
	e.close()
	e.open()
	if got := e.log.Journalled(); got != e.total() {
		t.Fatalf("journal holds %d leaves, want %d", got, e.total())
	}
}

// loggedAndStopped logs n records of room r, waits for a checkpoint over
// them and stops the log cleanly.
func loggedAndStopped(t *testing.T, n int) *env {
	e := newEnv(t)
	for range n {
		e.src.accept("r")
	}
	e.waitSize(uint64(n))
	e.close()
	return e
}

// editJournal changes the stopped log's database as a crash could have
// left it.
func (e *env) editJournal(edit func(txn *badger.Txn) error) {
	e.t.Helper()
	db, err := badger.Open(badger.DefaultOptions(filepath.Join(e.dir, "db")).WithLogger(nil))
	if err != nil {
		e.t.Fatal(err)
	}
	err = db.Update(edit)
	db.Close()
	if err != nil {
		e.t.Fatal(err)
	}
}

// putJournalV1 writes entry idx of a journal v1 (index → leaf, hash →
// index), as a node before parts and runs left it.
func putJournalV1(txn *badger.Txn, idx uint64, lf hostlog.Leaf) error {
	v := append(append([]byte(nil), lf.Hash[:]...), binary.BigEndian.AppendUint64(nil, uint64(lf.Seq))...)
	v = append(v, lf.RoomID...)
	if err := txn.Set(binary.BigEndian.AppendUint64([]byte("l/i/"), idx), v); err != nil {
		return err
	}
	return txn.Set(append([]byte("l/h/"), lf.Hash[:]...), binary.BigEndian.AppendUint64(nil, idx))
}

// TestJournalAheadOfLogIsReplayed simulates a crash after the journal
// transaction committed and before tessera integrated the leaves.
func TestJournalAheadOfLogIsReplayed(t *testing.T) {
	e := loggedAndStopped(t, 10)
	// Journal leaves 10..14 as commit() would, without tessera: room r's
	// next two records and room s's first three, so that part 0 is
	// extended and r and s each get a run.
	var lfs []hostlog.Leaf
	for _, id := range []string{"r", "r", "s", "s", "s"} {
		lfs = append(lfs, e.src.accept(id))
	}
	e.editJournal(func(txn *badger.Txn) error {
		if err := hostlog.PutLeavesForTest(txn, 10, lfs); err != nil {
			return err
		}
		for _, m := range []struct {
			room string
			seq  uint64
		}{{"r", 12}, {"s", 3}} {
			if err := txn.Set([]byte("l/w/"+m.room), binary.BigEndian.AppendUint64(nil, m.seq)); err != nil {
				return err
			}
		}
		if err := txn.Delete([]byte("l/clean")); err != nil {
			return err
		}
		return txn.Set([]byte("l/n"), binary.BigEndian.AppendUint64(nil, 15))
	})
	e.open()
	e.checkAll(e.waitSize(15))
	for i, lf := range lfs {
		if got, ok, err := e.log.Leaf(uint64(10 + i)); !ok || err != nil || got != lf {
			t.Fatalf("leaf %d is %+v (%v, %v), want %+v", 10+i, got, ok, err, lf)
		}
	}
}

// TestJournalV1Converted: a data dir whose journal a previous release
// wrote (two keys per leaf), ahead of tessera and with a crash's stray
// entries beyond its length, and whose conversion a crash interrupted
// after the first part, is converted at start: every record proves at its
// own index, the strays answer nothing, no v1 key is left, and a second
// start finds nothing to convert.
func TestJournalV1Converted(t *testing.T) {
	e := newEnv(t)
	e.close()
	const n = 600 // three parts
	var lfs []hostlog.Leaf
	for i := range n {
		lfs = append(lfs, e.src.accept([]string{"r", "s", "t"}[i%3]))
	}
	// Room s's next four records in parts that never counted (reversed,
	// beyond the length), and a hash no record has.
	stray := make([]hostlog.Leaf, 4)
	for i := range stray {
		stray[i] = e.src.accept("s")
	}
	never := sha256.Sum256([]byte("never a record"))
	e.editJournal(func(txn *badger.Txn) error {
		if err := hostlog.PutLeavesForTest(txn, 0, lfs[:256]); err != nil {
			return err
		}
		for i := 256; i < n; i++ {
			if err := putJournalV1(txn, uint64(i), lfs[i]); err != nil {
				return err
			}
		}
		for i, lf := range stray {
			if err := putJournalV1(txn, uint64(n+3-i), lf); err != nil {
				return err
			}
		}
		if err := putJournalV1(txn, n+4, hostlog.Leaf{RoomID: "s", Seq: 205, Hash: never}); err != nil {
			return err
		}
		for _, id := range []string{"r", "s", "t"} {
			if err := txn.Set([]byte("l/w/"+id), binary.BigEndian.AppendUint64(nil, n/3)); err != nil {
				return err
			}
		}
		if err := txn.Delete([]byte("l/clean")); err != nil {
			return err
		}
		return txn.Set([]byte("l/n"), binary.BigEndian.AppendUint64(nil, n))
	})
	e.open()
	// The journal's 600 are replayed, the start's scan logs s's four.
	cp := e.waitSize(n + 4)
	e.checkAll(cp)
	for i, lf := range lfs {
		if got, ok, err := e.log.Leaf(uint64(i)); !ok || err != nil || got != lf {
			t.Fatalf("leaf %d is %+v (%v, %v), want %+v", i, got, ok, err, lf)
		}
	}
	for i, lf := range stray {
		rp, err := e.log.Inclusion(context.Background(), lf.Hash, 0)
		if err != nil || rp.Inclusion.LeafIndex != uint64(n+i) {
			t.Fatalf("s seq %d: leaf %d, %v; want leaf %d", lf.Seq, rp.Inclusion.LeafIndex, err, n+i)
		}
	}
	if _, err := e.log.Inclusion(context.Background(), never, 0); code(err) != adp.CodeNotFound {
		t.Fatalf("a stray v1 entry's hash answers %v, want not_found", err)
	}
	if _, ok, _ := e.log.Leaf(n + 4); ok {
		t.Fatal("a leaf beyond the journal's length answers")
	}
	countV1 := func() (keys int) {
		_ = e.db.View(func(txn *badger.Txn) error {
			for _, p := range []string{"l/i/", "l/h/"} {
				it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte(p)})
				for it.Rewind(); it.Valid(); it.Next() {
					keys++
				}
				it.Close()
			}
			return nil
		})
		return keys
	}
	if k := countV1(); k != 0 {
		t.Fatalf("%d journal v1 keys left after the conversion", k)
	}
	e.close()
	e.open()
	e.checkAll(e.waitSize(n + 4))
}

// TestJournalPartEntriesBeyondLengthDropped: a journal part holding
// entries beyond the journal's length (which no transaction of ours
// leaves, but a damaged or hand-edited dir can) answers nothing for them,
// and the next chunk that extends the part replaces them.
func TestJournalPartEntriesBeyondLengthDropped(t *testing.T) {
	e := loggedAndStopped(t, 10)
	never := sha256.Sum256([]byte("never a record"))
	e.editJournal(func(txn *badger.Txn) error {
		return hostlog.PutLeavesForTest(txn, 10, []hostlog.Leaf{{RoomID: "q", Seq: 1, Hash: never}})
	})
	e.open()
	if lf, ok, _ := e.log.Leaf(10); ok {
		t.Fatalf("an entry beyond the journal's length answers as a leaf: %+v", lf)
	}
	lf := e.src.accept("t")
	e.checkAll(e.waitSize(11))
	if got, ok, _ := e.log.Leaf(10); !ok || got != lf {
		t.Fatalf("leaf 10 is %+v (%v), want room t's record", got, ok)
	}
}

// TestHostileRequests: bad sizes, indices beyond a size, unknown hashes and
// malformed or escaping tile paths get clear ADP errors; no tile answer is
// larger than one tile.
func TestHostileRequests(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	for range 600 {
		e.src.accept("r")
	}
	cp := e.waitSize(600)
	last := e.src.r["r"][599]
	if _, err := e.log.Inclusion(ctx, [32]byte{1}, 0); code(err) != adp.CodeNotFound {
		t.Errorf("unknown hash: %v", err)
	}
	if _, err := e.log.Inclusion(ctx, envelopeHash(last), 0); code(err) != adp.CodeNotFound {
		t.Errorf("an envelope's hash (its record is logged): %v", err)
	}
	if _, err := e.log.Inclusion(ctx, last, cp.Size+1); code(err) != adp.CodeInvalidRequest {
		t.Errorf("size beyond checkpoint: %v", err)
	}
	if _, err := e.log.Inclusion(ctx, last, 599); code(err) != adp.CodeInvalidRequest {
		t.Errorf("index beyond size: %v", err)
	}
	if _, err := e.log.Inclusion(ctx, last, 1<<63); code(err) != adp.CodeInvalidRequest {
		t.Errorf("huge size: %v", err)
	}
	if _, err := e.log.Consistency(ctx, 10, 5); code(err) != adp.CodeInvalidRequest {
		t.Errorf("size1 > size2: %v", err)
	}
	if _, err := e.log.Consistency(ctx, 1, 1<<62); code(err) != adp.CodeInvalidRequest {
		t.Errorf("huge size2: %v", err)
	}
	if p, err := e.log.Consistency(ctx, 0, 0); err != nil || p.Size2 != cp.Size || len(p.Hashes) != 0 {
		t.Errorf("0→latest: %+v %v", p, err)
	}
	for _, path := range []string{
		"", "tile", "tile/", "tile/0", "tile/0/", "tile/64/000", "tile/0/x000/000", "tile/0/1", "tile/0/000.p/0",
		"tile/0/000.p/256", "tile/0/000.p/x", "tile/../../db/MANIFEST", "tile/0/../../treeState", "tile/entries/../checkpoint",
		"tile/0/x999/x999/x999/x999/x999/x999/999", "tile/0/9" + string(make([]byte, 100)), "checkpoint/", ".state/treeState",
		"tile/0/005", "tile/entries/009", "tile/1/000", // beyond the tree
	} {
		if res, err := e.log.Read(ctx, path); code(err) != adp.CodeNotFound {
			t.Errorf("Read(%q) = %d bytes, %v", path, len(res.Body), err)
		}
	}
	// The bound: any resource is at most one tile or one bundle.
	for _, path := range []string{"checkpoint", "tile/0/000", "tile/0/001", "tile/0/002.p/88", "tile/1/000.p/2", "tile/entries/000", "tile/entries/002.p/88", "tile/0/000.p/7"} {
		res, err := e.log.Read(ctx, path)
		if err != nil {
			t.Fatalf("Read(%q): %v", path, err)
		}
		if len(res.Body) > 256*34 {
			t.Fatalf("Read(%q) = %d bytes", path, len(res.Body))
		}
		if path == "tile/0/000.p/7" && len(res.Body) != 7*32 {
			t.Fatalf("a partial read of a full tile is %d bytes", len(res.Body))
		}
		if path == "tile/entries/002.p/88" && len(res.Body) != 88*34 {
			t.Fatalf("entries/002.p/88 is %d bytes", len(res.Body))
		}
	}
}

// TestCloseStopsEverything bounds what a log leaves behind: after Close
// the goroutines it (and tessera) started are gone.
func TestCloseStopsEverything(t *testing.T) {
	base := runtime.NumGoroutine()
	e := newEnv(t)
	for range 100 {
		e.src.accept("r")
	}
	e.waitSize(100)
	e.close()
	testwait.Goroutines(t, 20*time.Second, "goroutines back after close", base+2)
}

// TestFeedBehindResyncs. Property: a log whose feed position falls
// below what the feed still holds (pruned, or beyond its bound) is told
// so, resynchronises from every room's head against its watermarks, and
// ends with every record logged exactly once; it then follows the feed
// again.
func TestFeedBehindResyncs(t *testing.T) {
	e := newEnv(t)
	for i := range 200 {
		e.src.accept(fmt.Sprintf("r%d", i%7))
	}
	e.waitSize(200)
	e.close()
	for i := range 300 {
		e.src.accept(fmt.Sprintf("r%d", i%11))
	}
	e.src.prune(e.src.FeedHead() - 10) // the log's position (200) is gone
	e.open()
	cp := e.waitSize(e.total())
	e.checkAll(cp)
	e.src.accept("r-after")
	e.checkAll(e.waitSize(e.total()))
	e.close()
	e.open()
	if got := e.log.Journalled(); got != e.total() {
		t.Fatalf("journal holds %d leaves, want %d", got, e.total())
	}
}

// TestPositionJournalledWithLeaves. Property: the log's feed position
// moves in the transactions that journal its leaves: after a clean stop
// it is the feed's head, so the next start neither rescans nor replays.
func TestPositionJournalledWithLeaves(t *testing.T) {
	e := newEnv(t)
	for i := range 50 {
		e.src.accept(fmt.Sprintf("r%d", i%3))
	}
	e.waitSize(50)
	e.close()
	e.src.prune(50) // nothing before the head is left: a start that needed it would resync
	db, err := badger.Open(badger.DefaultOptions(filepath.Join(e.dir, "db")).WithLogger(nil))
	if err != nil {
		t.Fatal(err)
	}
	var pos uint64
	err = db.View(func(txn *badger.Txn) error {
		item, err := txn.Get([]byte("fp/" + hostlog.FeedFollower))
		if err != nil {
			return err
		}
		return item.Value(func(v []byte) error { pos = binary.BigEndian.Uint64(v); return nil })
	})
	db.Close()
	if err != nil || pos != 50 {
		t.Fatalf("position after a clean stop: %d (%v), want 50", pos, err)
	}
}

// newEnvRound is newEnv with a round interval.
func newEnvRound(t testing.TB, round time.Duration) *env {
	_, key, _ := ed25519.GenerateKey(nil)
	e := &env{t: t, dir: t.TempDir(), key: key, src: newRooms(), cpInt: 100 * time.Millisecond, round: round}
	e.open()
	t.Cleanup(func() { e.close() })
	return e
}

// TestRoundsArePaced: records arriving steadily (about one a
// millisecond) are logged in rounds that begin at most once per
// RoundInterval, so each round carries many records, and every record is
// in the log once. Without pacing a round would begin every batch age
// (10 ms here).
func TestRoundsArePaced(t *testing.T) {
	const interval = 200 * time.Millisecond
	const n = 1000
	e := newEnvRound(t, interval)
	start := time.Now()
	tick := time.NewTicker(time.Millisecond) // the load's pace, not a synchronisation
	for i := range n {
		<-tick.C
		e.src.accept(fmt.Sprintf("r%d", i%5))
	}
	tick.Stop()
	cp := e.waitSize(n)
	elapsed := time.Since(start)
	rounds := e.log.Rounds()
	if most := uint64(elapsed/interval) + 1; rounds > most {
		t.Fatalf("%d rounds in %v: more than one per %v (at most %d)", rounds, elapsed, interval, most)
	}
	if rounds == 0 || n/rounds < 10 {
		t.Fatalf("%d records in %d rounds: want many records per round", n, rounds)
	}
	t.Logf("%d records in %d rounds over %v", n, rounds, elapsed)
	e.checkAll(cp)
}

// TestCloseEndsPaceWait: records queued behind an hour's round interval
// do not hold Close up; Close logs them, and a restart on the same
// directory finds every record exactly once and logs a record arriving
// after a quiet spell at once, not an interval later.
func TestCloseEndsPaceWait(t *testing.T) {
	e := newEnvRound(t, time.Hour)
	e.src.accept("r0") // the first record after a quiet spell: a round at once
	e.waitSize(1)
	const n = 500
	for i := 1; i < n; i++ {
		e.src.accept(fmt.Sprintf("r%d", i%3))
	}
	l := e.log
	if r := l.Rounds(); r != 1 {
		t.Fatalf("%d rounds before the interval ended, want 1", r)
	}
	closed := make(chan struct{})
	go func() { e.close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(2 * time.Minute): // a bound on a hang, not a timing assertion
		t.Fatal("Close waited for the round interval")
	}
	if r := l.Rounds(); r != 2 {
		t.Fatalf("%d rounds, want 2 (Close drains the queue in one)", r)
	}
	e.open()
	e.checkAll(e.waitSize(n))
	if got := e.log.Journalled(); got != n {
		t.Fatalf("journal holds %d leaves, want %d", got, n)
	}
	e.src.accept("r-after")
	e.checkAll(e.waitSize(n + 1))
}

// syncBuffer is a bytes.Buffer safe for a logger's concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

// warnings returns the WARN records logged so far (JSON handler lines).
func (b *syncBuffer) warnings(t *testing.T) []map[string]any {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []map[string]any
	for _, line := range bytes.Split(b.b.Bytes(), []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal(line, &m); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if m["level"] == "WARN" {
			out = append(out, m)
		}
	}
	return out
}

// TestOriginChangeAcrossRestart: a restart under another public host (so
// another origin) warns with both origins and goes on under the new one:
// its first checkpoint, published without waiting for a record, is the
// old tree under the new origin, and the next covers the old leaves and
// the new one, each once. A restart under the same origin warns nothing.
func TestOriginChangeAcrossRestart(t *testing.T) {
	e := newEnv(t)
	for i := range 20 {
		e.src.accept(fmt.Sprintf("r%d", i%3))
	}
	old := e.waitSize(20)
	oldOrigin := e.log.Origin()
	e.close()

	var logs syncBuffer
	e.host = "adp.example.org"
	e.logs = slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	e.open()
	newOrigin := tlogproof.Origin("adp.example.org")
	w := logs.warnings(t)
	if len(w) != 1 || w[0]["old_origin"] != oldOrigin || w[0]["new_origin"] != newOrigin {
		t.Fatalf("warnings %v, want one naming %q and %q", w, oldOrigin, newOrigin)
	}
	cp := e.waitSize(20) // Checkpoint verifies it under the new origin
	if cp.Origin != newOrigin || cp.Hash != old.Hash {
		t.Fatalf("first checkpoint under the new origin: %q, same tree %v", cp.Origin, cp.Hash == old.Hash)
	}
	e.src.accept("r-new")
	cp = e.waitSize(21)
	if cp.Origin != newOrigin {
		t.Fatalf("checkpoint origin %q", cp.Origin)
	}
	e.checkAll(cp)
	p, err := e.log.Consistency(context.Background(), 20, 21)
	if err != nil || tlogproof.VerifyConsistency(p, old.Hash, cp.Hash) != nil {
		t.Fatalf("the new origin's tree does not extend the old one: %v", err)
	}

	e.close()
	e.open()
	if w := logs.warnings(t); len(w) != 1 {
		t.Fatalf("a restart under the same origin warned: %v", w[1:])
	}
	e.checkAll(e.waitSize(21))
}

// A published checkpoint file damaged on disk (hostile or torn bytes)
// does not stop the log: the start warns, withdraws it, and publishes the
// same tree again under the configured origin, which every proof verifies
// against.
func TestDamagedCheckpointRepublished(t *testing.T) {
	e := newEnv(t)
	for i := range 10 {
		e.src.accept(fmt.Sprintf("r%d", i%2))
	}
	old := e.waitSize(10)
	e.close()
	path := filepath.Join(e.dir, hostlog.Dir, "checkpoint")
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("no published checkpoint where the log keeps it: %v", err)
	}
	if err := os.WriteFile(path, []byte("\x00not a note\n\n\xff"), 0o600); err != nil {
		t.Fatal(err)
	}
	var logs syncBuffer
	e.logs = slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	e.open()
	if w := logs.warnings(t); len(w) != 1 {
		t.Fatalf("warnings %v, want one about the damaged checkpoint", w)
	}
	cp := e.waitSize(10)
	if cp.Hash != old.Hash || cp.Origin != old.Origin {
		t.Fatalf("republished checkpoint: origin %q, same tree %v", cp.Origin, cp.Hash == old.Hash)
	}
	e.checkAll(cp)
}

// TestJournalKeysPerRound bounds what the journal costs the node's
// database: records of eight rooms arriving interleaved make one part per
// 256 leaves and one run per room and chunk, not a key per leaf.
func TestJournalKeysPerRound(t *testing.T) {
	defer hostlog.SetChunkForTest(1024)()
	e := newEnvRound(t, time.Hour) // one round takes everything queued
	e.src.accept("first")
	e.waitSize(1)
	const n = 4096
	for i := range n {
		e.src.accept(fmt.Sprint("room", i%8))
	}
	e.log.Close() // ends the pace wait; drains the queue in one round
	e.log = nil
	keys := map[string]int{}
	_ = e.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte("l/")})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			keys[string(it.Item().Key()[:4])]++
		}
		return nil
	})
	// 4,097 leaves: 17 parts; 4 chunks × 8 rooms + "first" = 33 runs.
	if keys["l/p/"] != 17 || keys["l/r/"] != 33 || keys["l/i/"]+keys["l/h/"] != 0 {
		t.Fatalf("journal keys %v, want 17 parts and 33 runs", keys)
	}
	e.close()
	e.open()
	e.checkAll(e.waitSize(n + 1))
}
