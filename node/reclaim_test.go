//go:build e2e

package node_test

import (
	"encoding/binary"
	"os"
	"testing"

	"github.com/dgraph-io/badger/v4"

	"github.com/adpnode/adpnode/internal/reclaim"
	"github.com/adpnode/adpnode/node"
)

// dirBytes is the sum of the file sizes in dir (measured with the
// database closed, when Badger has truncated its preallocated files).
func dirBytes(t *testing.T, dir string) int64 {
	t.Helper()
	var n int64
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		fi, err := e.Info()
		if err == nil && !fi.IsDir() {
			n += fi.Size()
		}
	}
	return n
}

// Purging a 100k-record mirror room gives its bytes back: the data dir
// shrinks to well under half, and the hosted rooms are intact.
func TestDropAndReclaim(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 100k records")
	}
	dir, ids, _ := buildDataDir(t, 1, 2)
	// The stored form of a record, repeated as a mirror chain of 100k.
	db, err := badger.Open(node.BadgerOptions(dir))
	if err != nil {
		t.Fatal(err)
	}
	var rec []byte
	db.View(func(txn *badger.Txn) error {
		item, err := txn.Get(hostedKey(ids[0], 2))
		if err == nil {
			rec, err = item.ValueCopy(nil)
		}
		return err
	})
	if len(rec) == 0 {
		t.Fatal("no record to copy")
	}
	const records = 100_000
	prefix := []byte("m/r/did:agent:z6MkPurgeHost/" + ids[0] + "/")
	wb := db.NewWriteBatch()
	for seq := uint64(1); seq <= records; seq++ {
		v := append(append([]byte(nil), rec...), byte(seq), byte(seq>>8), byte(seq>>16)) // no two alike
		if err := wb.Set(binary.BigEndian.AppendUint64(append([]byte(nil), prefix...), seq), v); err != nil {
			t.Fatal(err)
		}
	}
	if err := wb.Flush(); err != nil {
		t.Fatal(err)
	}
	db.Close()
	before := dirBytes(t, dir)

	db, err = badger.Open(node.BadgerOptions(dir))
	if err != nil {
		t.Fatal(err)
	}
	if err := reclaim.DropPrefixes(db, nil, prefix); err != nil {
		t.Fatal(err)
	}
	db.Close()
	after := dirBytes(t, dir)
	t.Logf("data dir: %d bytes with a %d-record mirror room (%d-byte records), %d bytes after purge (%.1f%%)",
		before, records, len(rec), after, 100*float64(after)/float64(before))
	if after*2 > before {
		t.Fatalf("purge left %d of %d bytes", after, before)
	}
	rep, err := node.Check(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() || len(rep.Rooms) != 1 || len(rep.Mirrors) != 0 {
		t.Fatalf("after purge: %+v", rep)
	}
}
