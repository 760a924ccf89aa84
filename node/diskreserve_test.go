package node_test

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/adpnode/adpnode/node"
)

// Property: a disk reserve smaller than what the store may grow by at once
// (computed from the Badger options in use) is refused at start with a
// message that states the formula and the least reserve, before anything
// is opened, on a fresh data dir and on a restart of a used one; the least
// reserve, the default and 0 (the check off) start.
func TestDiskReserveBelowStoreGrowthRefused(t *testing.T) {
	opts := node.BadgerOptions("")
	least := node.MinDiskReserve(opts)
	if want := int64(opts.NumMemtables)*2*opts.MemTableSize + 2*opts.ValueLogFileSize + opts.MemTableSize; least != want || least != 240<<20 {
		t.Fatalf("MinDiskReserve = %d, want %d = 240 MiB for the node's options", least, want)
	}
	if node.DefaultDiskReserve < least {
		t.Fatalf("the default reserve %d is below the least %d", node.DefaultDiskReserve, least)
	}
	dir := t.TempDir()
	open := func(reserve int64) (*node.Node, error) {
		return node.Open(node.Config{PublicURL: "http://127.0.0.1:1", DataDir: dir, DiskReserveBytes: reserve})
	}
	refused := func(reserve int64) {
		t.Helper()
		n, err := open(reserve)
		if err == nil {
			n.Close()
			t.Fatalf("reserve %d (below %d) accepted", reserve, least)
		}
		var de *node.DiskReserveError
		if !errors.As(err, &de) || de.Reserve != reserve || de.Min != least {
			t.Fatalf("reserve %d: %v", reserve, err)
		}
		for _, want := range []string{"NumMemtables × 2 × MemTableSize + 2 × ValueLogFileSize + MemTableSize",
			"3 × 2 × 16 MiB + 2 × 64 MiB + 16 MiB", "at least 240MiB", "SIGBUS", "disk_reserve"} {
			if !strings.Contains(err.Error(), want) {
				t.Fatalf("reserve %d: the message %q does not say %q", reserve, err, want)
			}
		}
	}
	for _, r := range []int64{1, 4 << 20, least - 1} {
		refused(r)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Fatalf("a refused start left %d files in the data dir", len(ents))
	}
	for _, r := range []int64{least, node.DefaultDiskReserve, 0} {
		n, err := open(r)
		if err != nil {
			t.Fatalf("reserve %d: %v", r, err)
		}
		if err := n.Close(); err != nil {
			t.Fatal(err)
		}
	}
	// A restart on the used dir is refused the same way, and the dir
	// opens again afterwards.
	refused(4 << 20)
	n, err := open(least)
	if err != nil {
		t.Fatal(err)
	}
	n.Close()
}
