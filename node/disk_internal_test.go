package node

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/adpnode/adpnode/adp"
	"github.com/adpnode/adpnode/internal/testwait"
)

func TestDiskGuard(t *testing.T) {
	free := uint64(100)
	g := newDiskGuard("/nowhere", 50, slog.New(slog.NewTextHandler(io.Discard, nil)))
	g.statfs = func(string) (uint64, error) { return free, nil }
	g.sample()
	if g.check() != nil {
		t.Fatal("refused with space above the reserve")
	}
	free = 49
	g.sample()
	e := adp.AsError(g.check())
	if e == nil || e.Code != adp.CodeUnavailable || e.Data["reason"] != "disk_full" || e.Data["retry_after_ms"] != int64(diskFullRetryMs) {
		t.Fatalf("below the reserve: %v", e)
	}
	free = 1000
	g.sample()
	if g.check() != nil {
		t.Fatal("still refusing after space came back")
	}
	// A write failing with ENOSPC flips the flag until the next sample.
	if g.noteWriteError(errors.New("some other failure")) || g.check() != nil {
		t.Fatal("a non-space error flipped the flag")
	}
	if !g.noteWriteError(fmt.Errorf("write vlog: %w", syscall.ENOSPC)) || g.check() == nil {
		t.Fatal("ENOSPC did not flip the flag")
	}
	g.sample()
	if g.check() != nil {
		t.Fatal("the sampler did not clear the flag")
	}
	// A statfs failure changes nothing; reserve 0 disables the check.
	g.statfs = func(string) (uint64, error) { return 0, errors.New("statfs failed") }
	g.sample()
	if g.check() != nil {
		t.Fatal("a statfs failure refused writes")
	}
	off := newDiskGuard("/nowhere", 0, g.log)
	off.statfs = func(string) (uint64, error) { return 0, nil }
	off.sample()
	if off.check() != nil {
		t.Fatal("reserve 0 refused writes")
	}
	var nilGuard *diskGuard
	if nilGuard.check() != nil || nilGuard.noteWriteError(syscall.ENOSPC) {
		t.Fatal("nil guard")
	}
}

// The node's storage goroutines (sampler, value-log GC) stop with Close.
func TestStorageGoroutinesStop(t *testing.T) {
	dir := t.TempDir()
	reserve := MinDiskReserve(BadgerOptions(dir))
	n, err := Open(Config{PublicURL: "http://127.0.0.1:1", DataDir: dir, DiskReserveBytes: reserve})
	if err != nil {
		t.Fatal(err)
	}
	if free, err := freeBytes(dir); err == nil && free > uint64(2*reserve) && n.DiskFull() {
		t.Fatalf("%d bytes free, reserve %d: refused", free, reserve)
	}
	if got := n.reclaim(n.ctx); got != 0 {
		t.Fatalf("value-log GC rewrote %d files of an empty store", got)
	}
	n.Close()
	n.bg.Wait() // returns: every goroutine the node started has ended
}

// TestTablesVerifiedOnce: a start verifies only the tables written since
// the last verification (tables are immutable), so start-up does not read
// the whole history; adpnode check still verifies every table.
func TestTablesVerifiedOnce(t *testing.T) {
	dir := t.TempDir()
	old := filepath.Join(dir, "000001.sst")
	if err := os.WriteFile(old, []byte("not a table"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := precheckTables(dir, time.Time{}); err == nil {
		t.Fatal("a garbage table passed the full check")
	}
	past := time.Now().Add(-time.Hour)
	os.Chtimes(old, past, past)
	if err := precheckTables(dir, time.Now().Add(-time.Minute)); err != nil {
		t.Fatalf("a table older than the last verification was read again: %v", err)
	}
	fresh := filepath.Join(dir, "000002.sst")
	os.WriteFile(fresh, []byte("also not a table"), 0o644)
	if err := precheckTables(dir, time.Now().Add(-time.Minute)); err == nil || !strings.Contains(err.Error(), "000002.sst") {
		t.Fatalf("a table written since the last verification was not checked: %v", err)
	}
}

// TestUnfinishedTableIgnored: a table the manifest does not list (a
// flush or compaction killed mid-write leaves one, truncated) does not
// stop the start: Badger deletes it, and the data it held is elsewhere.
// A listed table that is damaged still does (TestTablesVerifiedOnce and
// the corruption tests).
func TestUnfinishedTableIgnored(t *testing.T) {
	dir := t.TempDir()
	db, err := openBadger(BadgerOptions(dir), slog.Default())
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2000; i++ {
		db.Update(func(txn *badger.Txn) error { return txn.Set([]byte(fmt.Sprintf("k%05d", i)), make([]byte, 512)) })
	}
	if err := db.Close(); err != nil { // flushes the memtable: a listed table
		t.Fatal(err)
	}
	listed, ok := manifestTables(dir)
	if !ok || len(listed) == 0 {
		t.Fatalf("manifest lists %d tables (%v)", len(listed), ok)
	}
	orphan := filepath.Join(dir, "009999.sst")
	if err := os.WriteFile(orphan, []byte("half a table"), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(dir, tablesVerifiedFile)) // verify everything
	db, err = openBadger(BadgerOptions(dir), slog.Default())
	if err != nil {
		t.Fatalf("an unlisted, truncated table stopped the start: %v", err)
	}
	defer db.Close()
	if _, err := os.Stat(orphan); !os.IsNotExist(err) {
		t.Fatalf("the unfinished table is still there: %v", err)
	}
	if err := db.View(func(txn *badger.Txn) error { _, err := txn.Get([]byte("k01999")); return err }); err != nil {
		t.Fatalf("data after the restart: %v", err)
	}
}

// Property: an idle node does not sample its disk: over fifty sampling
// intervals without a write, free space is read at most once (a sampler
// on a ticker reads it fifty times); a write after that samples first,
// so it never acts on a sample older than the interval, and a refusal
// follows the disk at once.
func TestDiskGuardSamplesOnlyForWrites(t *testing.T) {
	const interval = 2 * time.Millisecond
	dir := t.TempDir()
	n, err := Open(Config{PublicURL: "http://127.0.0.1:1", DataDir: dir, DiskReserveBytes: MinDiskReserve(BadgerOptions(dir)), DiskCheckInterval: interval})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	var mu sync.Mutex
	calls, free := 0, uint64(1<<40)
	stub := func(string) (uint64, error) { mu.Lock(); defer mu.Unlock(); calls++; return free, nil }
	read := func() int { mu.Lock(); defer mu.Unlock(); return calls }
	n.disk.setStatfs(stub)

	tick := time.NewTicker(interval)
	for range 50 {
		<-tick.C
	}
	tick.Stop()
	if c := read(); c > 1 {
		t.Fatalf("an idle node read its free space %d times in fifty sampling intervals", c)
	}
	mu.Lock()
	free = 1 << 10 // below the reserve
	mu.Unlock()
	testwait.Until(t, 10*time.Second, "a write refused once the disk is below the reserve", func() bool {
		return n.writable() != nil
	})
	mu.Lock()
	free = 1 << 40
	mu.Unlock()
	testwait.Until(t, 10*time.Second, "writes accepted once space is back", func() bool { return n.writable() == nil })
}
