package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"
	"github.com/dgraph-io/badger/v4/table"
	"github.com/dgraph-io/ristretto/v2/z"

	"github.com/adpnode/adpnode/adp"
	"github.com/adpnode/adpnode/internal/periodic"
	"github.com/adpnode/adpnode/internal/reclaim"
)

// Badger sizing. An idle node should stay small, and the disk reserve
// must cover what Badger can write after the node stops accepting writes
// (MinDiskReserve), because Badger writes its memtable WAL (.mem), value
// log (.vlog) and tables through mmap: on a full file system a store into
// an mmapped page is a SIGBUS (the process dies), not an ENOSPC error.
const (
	badgerMemTableSize     = 16 << 20 // each .mem WAL is a sparse 2×16 MiB mmap
	badgerNumMemtables     = 3        // one mutable + up to two waiting for flush
	badgerValueLogFileSize = 64 << 20 // each .vlog is a sparse 2×64 MiB mmap
	badgerBaseTableSize    = 2 << 20
	badgerBlockCacheSize   = 8 << 20
	badgerIndexCacheSize   = 4 << 20
	badgerBlockSize        = 16 << 10
)

// DefaultDiskReserve is the free space below which the node refuses
// writes. It covers MinDiskReserve of the node's Badger options (240 MiB)
// with room to spare for the compaction output written before its inputs
// are deleted (a few BaseTableSize files) and for the writes that land
// within the 1 s sampling lag, at the write rates a node sustains.
const DefaultDiskReserve = 256 << 20

// MinDiskReserve is what the store may grow by at once, after the disk
// guard has stopped the node's writes, for the Badger options opts. Badger
// writes its memtable WALs (.mem), value log (.vlog) and tables (.sst)
// through mmap, and on a full file system a store into an mmapped page is
// a SIGBUS (the process dies), not an ENOSPC error, so the reserve must
// hold all of it:
//
//	NumMemtables × 2 × MemTableSize   every memtable WAL, each a sparse
//	                                  mmap of twice the memtable, filled
//	+ 2 × ValueLogFileSize            the open value log, a sparse mmap of
//	                                  twice the file size, filled (value-
//	                                  log GC rewrites into such a file too)
//	+ MemTableSize                    the L0 table a flush of a full
//	                                  memtable writes before its WAL goes
//
// For the node's options: 3 × 2 × 16 + 2 × 64 + 16 = 240 MiB.
func MinDiskReserve(opts badger.Options) int64 {
	return int64(opts.NumMemtables)*2*opts.MemTableSize + 2*opts.ValueLogFileSize + opts.MemTableSize
}

// DiskReserveError refuses a disk reserve too small for the store: a disk
// that fills would crash the node before the reserve stopped its writes.
type DiskReserveError struct {
	Reserve, Min int64
	opts         badger.Options
}

func (e *DiskReserveError) Error() string {
	mib := func(n int64) string {
		if n%(1<<20) != 0 {
			return fmt.Sprintf("%d bytes", n)
		}
		return fmt.Sprintf("%d MiB", n>>20)
	}
	o := e.opts
	return fmt.Sprintf("disk reserve %s is below %s, what the store may grow by at once "+
		"(NumMemtables × 2 × MemTableSize + 2 × ValueLogFileSize + MemTableSize = %d × 2 × %s + 2 × %s + %s, "+
		"all written through mmap, where a full disk kills the node with SIGBUS); "+
		"set disk_reserve (--disk-reserve) to at least %dMiB, or 0 to disable the check",
		mib(e.Reserve), mib(e.Min), o.NumMemtables, mib(o.MemTableSize), mib(o.ValueLogFileSize), mib(o.MemTableSize),
		(e.Min+(1<<20)-1)>>20)
}

// CheckDiskReserve refuses a reserve (bytes; 0 disables the check) below
// MinDiskReserve of the node's Badger options.
func CheckDiskReserve(reserve int64) error {
	opts := BadgerOptions("")
	if least := MinDiskReserve(opts); reserve > 0 && reserve < least {
		return &DiskReserveError{Reserve: reserve, Min: least, opts: opts}
	}
	return nil
}

// BadgerOptions returns the Badger options of a node database in dir:
// checksums verified on every block read (and every table at open, see
// openBadger),
// synced writes, one version per key, and bounded memory (16 MiB
// memtables, three of them, an 8 MiB block cache and a 4 MiB index cache).
func BadgerOptions(dir string) badger.Options {
	return badger.DefaultOptions(dir).
		WithSyncWrites(true).
		WithLogger(nil).
		WithNumVersionsToKeep(1).
		WithCompactL0OnClose(true).
		// Every block read is verified. Whole tables are verified at open
		// by openBadger (precheckTables) rather than by Badger's
		// OnTableRead, whose failure path dereferences nil on a goroutine
		// of Badger's own (v4.9.6) and so would crash the process.
		WithChecksumVerificationMode(options.OnBlockRead).
		WithVerifyValueChecksum(true).
		WithMemTableSize(badgerMemTableSize).
		WithNumMemtables(badgerNumMemtables).
		WithValueLogFileSize(badgerValueLogFileSize).
		WithBaseTableSize(badgerBaseTableSize).
		WithBlockSize(badgerBlockSize).
		WithBlockCacheSize(badgerBlockCacheSize).
		WithIndexCacheSize(badgerIndexCacheSize).
		WithNumCompactors(2).
		WithNumGoroutines(2)
}

// StorageError says the database in Dir cannot be opened as it is: File
// (when known) is the damaged file.
type StorageError struct {
	Dir  string
	File string
	Err  error
}

func (e *StorageError) Error() string {
	where := e.Dir
	if e.File != "" {
		where = filepath.Join(e.Dir, e.File)
	}
	return fmt.Sprintf("storage damaged at %s: %v; run `adpnode check --data %s` to see which rooms are affected, "+
		"or restore the data dir from a backup (`adpnode restore`)", where, e.Err, e.Dir)
}

func (e *StorageError) Unwrap() error { return e.Err }

// ErrLocked is returned when another process (a running node) holds the
// data dir.
var ErrLocked = errors.New("data dir is in use by another process (is a node running on it?)")

// badgerFileName finds a Badger file name in an error text.
var badgerFileName = regexp.MustCompile(`[0-9]{6}\.(?:sst|vlog|mem)|MANIFEST|KEYREGISTRY|DISCARD`)

// openBadger opens a node database. A damaged file is an error naming the
// file and what to do, never a panic: tables are pre-checked one by one on
// this goroutine (Badger opens them on goroutines of its own, where a
// panic on a truncated table could not be recovered), Badger's open is
// guarded by recover, and a table Badger would silently skip is refused.
func openBadger(opts badger.Options, log *slog.Logger) (db *badger.DB, err error) {
	return openBadgerChecked(opts, log, false)
}

// tablesVerifiedFile marks, by its modification time, when every table of
// the dir last verified. Tables are immutable once written, so a start
// verifies only the tables written since (by the last run's flushes and
// compactions), and start-up costs what was written lately, not the whole
// history; every block is verified again whenever it is read.
const tablesVerifiedFile = "TABLES-VERIFIED"

// openBadgerChecked opens Badger after verifying its tables: all of them
// when all is set (adpnode check), else those written since the last
// verification.
func openBadgerChecked(opts badger.Options, log *slog.Logger, all bool) (db *badger.DB, err error) {
	dir := opts.Dir
	if !opts.InMemory {
		var since time.Time
		marker := filepath.Join(dir, tablesVerifiedFile)
		if fi, err := os.Stat(marker); err == nil && !all {
			since = fi.ModTime()
		}
		began := time.Now()
		if err := precheckTables(dir, since); err != nil {
			return nil, err
		}
		if !opts.ReadOnly {
			defer func() {
				if err == nil {
					writeMarker(marker, began)
				}
			}()
		}
	}
	bl := &badgerLog{log: log}
	opts = opts.WithLogger(bl)
	defer func() {
		if r := recover(); r != nil {
			db, err = nil, storageErr(dir, fmt.Errorf("badger: %v", r))
		}
	}()
	db, err = badger.Open(opts)
	if err != nil {
		if strings.Contains(err.Error(), "Cannot acquire directory lock") {
			return nil, fmt.Errorf("open %s: %w", dir, ErrLocked)
		}
		return nil, storageErr(dir, err)
	}
	if f := bl.skipped(); f != "" {
		db.Close()
		return nil, &StorageError{Dir: dir, File: f, Err: errors.New("table checksum mismatch")}
	}
	return db, nil
}

func storageErr(dir string, err error) *StorageError {
	e := &StorageError{Dir: dir, Err: err}
	if m := badgerFileName.FindString(err.Error()); m != "" {
		e.File = m
	} else if strings.Contains(strings.ToLower(err.Error()), "manifest") {
		e.File = "MANIFEST"
	}
	return e
}

// precheckTables opens every .sst in dir read-only and verifies it as
// Badger's OnTableRead would (footer, index, key range, every block's
// checksum), on this goroutine, recovering a panic into an error naming
// the table. It reads every table once: start-up costs one sequential
// read of the LSM tree.
func precheckTables(dir string, since time.Time) error {
	names, err := filepath.Glob(filepath.Join(dir, "*.sst"))
	if err != nil {
		return err
	}
	listed, haveManifest := manifestTables(dir)
	for _, name := range names {
		if fi, err := os.Stat(name); err == nil && !since.IsZero() && fi.ModTime().Before(since) {
			continue
		}
		if haveManifest {
			// A table the manifest does not list was being written when
			// the process died (a flush or compaction's output is added
			// to the manifest only once complete): Badger deletes it at
			// open, and it holds nothing that was not elsewhere.
			if id, ok := table.ParseFileID(filepath.Base(name)); ok {
				if _, in := listed[id]; !in {
					continue
				}
			}
		}
		if err := precheckTable(name); err != nil {
			return &StorageError{Dir: dir, File: filepath.Base(name), Err: err}
		}
	}
	return nil
}

// manifestTables reads which tables the dir's MANIFEST lists; false when
// there is no readable manifest (Badger's open then reports what is wrong).
func manifestTables(dir string) (map[uint64]badger.TableManifest, bool) {
	f, err := os.Open(filepath.Join(dir, badger.ManifestFilename))
	if err != nil {
		return nil, false
	}
	defer f.Close()
	m, _, err := badger.ReplayManifestFile(f, 0, badger.DefaultOptions(dir).WithLogger(nil))
	if err != nil {
		return nil, false
	}
	return m.Tables, true
}

func precheckTable(name string) (err error) {
	fi, err := os.Stat(name)
	if err != nil {
		return err
	}
	if fi.Size() == 0 {
		return errors.New("table file is empty")
	}
	mf, err := z.OpenMmapFile(name, os.O_RDONLY, 0)
	if err != nil {
		return err
	}
	stage := "table unreadable (truncated or overwritten)"
	defer func() {
		if r := recover(); r != nil {
			err = errors.New(stage)
		}
		mf.Close(-1)
	}()
	t, err := table.OpenTable(mf, table.Options{BlockSize: 4 << 10, Compression: options.Snappy,
		ChkMode: options.NoVerification})
	if err != nil {
		return err
	}
	stage = "table checksum mismatch (a block was overwritten)"
	if err := t.VerifyChecksum(); err != nil {
		return fmt.Errorf("table checksum mismatch: %w", err)
	}
	return nil
}

// writeMarker records that every table older than at verified.
func writeMarker(path string, at time.Time) {
	if f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY, 0o600); err == nil {
		f.Close()
		_ = os.Chtimes(path, at, at) // best effort, as the create above
	}
}

// badgerLog routes Badger's log to slog (errors and warnings only) and
// remembers a table Badger says it ignores.
type badgerLog struct {
	log  *slog.Logger
	mu   sync.Mutex
	skip string
}

func (l *badgerLog) Errorf(f string, a ...any) {
	msg := strings.TrimSpace(fmt.Sprintf(f, a...))
	if strings.HasPrefix(msg, "Ignoring table") || strings.HasPrefix(msg, "CHECKSUM_MISMATCH") {
		l.mu.Lock()
		if m := badgerFileName.FindString(msg); m != "" && l.skip == "" {
			l.skip = m
		}
		l.mu.Unlock()
	}
	if l.log != nil {
		l.log.Error("badger", "msg", msg)
	}
}

func (l *badgerLog) Warningf(f string, a ...any) {
	if l.log != nil {
		l.log.Warn("badger", "msg", strings.TrimSpace(fmt.Sprintf(f, a...)))
	}
}
func (l *badgerLog) Infof(string, ...any)  {}
func (l *badgerLog) Debugf(string, ...any) {}

func (l *badgerLog) skipped() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.skip
}

// diskGuard knows whether the data dir's file system has more free space
// than the reserve. The write path samples it (one statfs) when the last
// sample is older than the interval, so an idle node does not wake to
// look at a disk nothing writes to, and a write never acts on a sample
// older than the interval; at most one caller samples at a time, the
// others read the flag. A write that fails for lack of space flips the
// flag too, until the next sample sees space again.
type diskGuard struct {
	dir      string
	reserve  uint64
	interval time.Duration // 0: only explicit samples (tests)
	full     atomic.Bool
	free     atomic.Uint64
	sampled  atomic.Int64 // unix nanoseconds of the last sample
	sampling atomic.Bool
	statfs   func(dir string) (uint64, error)
	log      *slog.Logger
}

func newDiskGuard(dir string, reserve int64, log *slog.Logger) *diskGuard {
	g := &diskGuard{dir: dir, statfs: freeBytes, log: log}
	if reserve > 0 {
		g.reserve = uint64(reserve)
	}
	return g
}

// freeBytes is the space available to unprivileged writers on dir's file
// system.
func freeBytes(dir string) (uint64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return st.Bavail * uint64(st.Bsize), nil
}

// setStatfs replaces how free space is read (tests).
func (g *diskGuard) setStatfs(fn func(string) (uint64, error)) {
	for !g.sampling.CompareAndSwap(false, true) {
	}
	g.statfs = fn
	g.sampling.Store(false)
}

// refresh samples when the last sample is older than the interval,
// unless another caller is sampling.
func (g *diskGuard) refresh() {
	if g.reserve == 0 || g.interval <= 0 {
		return
	}
	if time.Now().UnixNano()-g.sampled.Load() < int64(g.interval) || !g.sampling.CompareAndSwap(false, true) {
		return
	}
	defer g.sampling.Store(false)
	g.sample()
}

// sample reads the free space once and sets the flag.
func (g *diskGuard) sample() {
	if g.reserve == 0 {
		return
	}
	g.sampled.Store(time.Now().UnixNano())
	free, err := g.statfs(g.dir)
	if err != nil {
		g.log.Warn("disk space check failed", "dir", g.dir, "err", err)
		return
	}
	g.free.Store(free)
	full := free < g.reserve
	if was := g.full.Swap(full); was != full {
		if full {
			g.log.Error("disk space below reserve: refusing writes", "dir", g.dir, "free", free, "reserve", g.reserve)
		} else {
			g.log.Info("disk space above reserve again: accepting writes", "dir", g.dir, "free", free, "reserve", g.reserve)
		}
	}
}

// diskFullRetryMs is what a refused write is told to wait.
const diskFullRetryMs = 5000

// check returns the error a write gets while space is below the reserve.
func (g *diskGuard) check() error {
	if g == nil {
		return nil
	}
	g.refresh()
	if !g.full.Load() {
		return nil
	}
	return diskFullError()
}

func diskFullError() *adp.Error {
	return &adp.Error{Code: adp.CodeUnavailable, Message: "the node's disk is full; nothing was accepted, retry later",
		Data: map[string]any{"reason": "disk_full", "retry_after_ms": int64(diskFullRetryMs)}}
}

// noteWriteError flips the flag when a storage write failed for lack of
// space, and reports whether it did.
func (g *diskGuard) noteWriteError(err error) bool {
	if g == nil || err == nil || !isNoSpace(err) {
		return false
	}
	if !g.full.Swap(true) {
		g.log.Error("storage write failed for lack of space: refusing writes", "dir", g.dir, "err", err)
	}
	return true
}

func isNoSpace(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) ||
		strings.Contains(err.Error(), "no space left on device")
}

// writable is the first check of every write path: nil, or 503
// unavailable with data.reason "disk_full" while the disk is below the
// reserve.
func (n *Node) writable() error { return n.disk.check() }

// storageWriteError is the answer to a failed Badger write outside the
// group committer: disk_full for lack of space, internal otherwise.
func (n *Node) storageWriteError(err error) error {
	if n.disk.noteWriteError(err) {
		return diskFullError()
	}
	return internal(err)
}

// DiskFull reports whether the node currently refuses writes for lack of
// disk space (for the other writers of the database: mirrors, index).
func (n *Node) DiskFull() bool { return n.disk.check() != nil }

// gcInterval is how often the value log is garbage collected.
const gcInterval = 5 * time.Minute

// startStorage takes the first disk sample (the writes take the next
// ones, see diskGuard) and starts the value-log GC, owned by the node and
// stopped by Close.
func (n *Node) startStorage() {
	if n.cfg.InMemory {
		return
	}
	if n.disk.reserve > 0 {
		n.disk.interval = n.cfg.DiskCheckInterval
		n.disk.sample()
	}
	n.bg.Add(1)
	go func() { defer n.bg.Done(); n.runValueLogGC(n.ctx, gcInterval) }()
}

// runValueLogGC rewrites value-log files that are at least half garbage,
// every interval, until Badger says there is nothing to do.
func (n *Node) runValueLogGC(ctx context.Context, interval time.Duration) {
	periodic.Run(ctx, interval, func() { n.reclaim(ctx) })
}

// reclaim runs value-log GC until it has nothing to rewrite.
func (n *Node) reclaim(ctx context.Context) int {
	return reclaim.ValueLogGC(ctx, n.db, n.log)
}
