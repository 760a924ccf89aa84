//go:build e2e

package node_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/dgraph-io/badger/v4"

	"github.com/adpnode/adpnode/internal/adptest"
	"github.com/adpnode/adpnode/node"
)

func hostedKey(roomID string, seq int64) []byte {
	return binary.BigEndian.AppendUint64([]byte("r/"+roomID+"/"), uint64(seq))
}

// editDB opens a stopped node's data dir with Badger directly.
func editDB(t *testing.T, dir string, fn func(txn *badger.Txn) error) {
	t.Helper()
	db, err := badger.Open(node.BadgerOptions(dir))
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(fn); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestCheck(t *testing.T) {
	dir, ids, _ := buildDataDir(t, 3, 3) // each room: create + 3 messages
	// Mirror two rooms' chains under a (made-up) host key, as the mirror
	// store keeps them.
	const hostKey = "did:agent:z6MkTestHostKey"
	mirrorKey := func(roomID string, seq int64) []byte {
		return binary.BigEndian.AppendUint64([]byte("m/r/"+hostKey+"/"+roomID+"/"), uint64(seq))
	}
	editDB(t, dir, func(txn *badger.Txn) error {
		for _, id := range ids[:2] {
			for seq := int64(1); seq <= 4; seq++ {
				item, err := txn.Get(hostedKey(id, seq))
				if err != nil {
					return err
				}
				v, _ := item.ValueCopy(nil)
				if err := txn.Set(mirrorKey(id, seq), v); err != nil {
					return err
				}
			}
		}
		return nil
	})

	rep, err := node.Check(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() || len(rep.Rooms) != 3 || len(rep.Mirrors) != 2 {
		t.Fatalf("clean dir: %+v", rep)
	}
	for _, r := range rep.Rooms {
		if r.Seq != 4 || r.Hash == "" {
			t.Fatalf("room %s: %+v", r.Room, r)
		}
	}

	// Damage ids[1] at seq 2: flip one byte of its stored JSON.
	editDB(t, dir, func(txn *badger.Txn) error {
		item, err := txn.Get(hostedKey(ids[1], 2))
		if err != nil {
			return err
		}
		v, _ := item.ValueCopy(nil)
		i := bytes.Index(v, []byte("message 0"))
		if i < 0 {
			t.Fatalf("record 2 of %s has no message text: %s", ids[1], v)
		}
		v[i] ^= 0x01 // 'm' → 'l'
		if err := txn.Set(hostedKey(ids[1], 2), v); err != nil {
			return err
		}
		// And the mirror copy of the same room at seq 3.
		item, err = txn.Get(mirrorKey(ids[1], 3))
		if err != nil {
			return err
		}
		v, _ = item.ValueCopy(nil)
		return txn.Set(mirrorKey(ids[1], 3), bytes.Replace(v, []byte("message 1"), []byte("massage 1"), 1))
	})
	rep, err = node.Check(dir)
	if err != nil {
		t.Fatal(err)
	}
	if rep.OK() {
		t.Fatal("damaged record not found")
	}
	for _, r := range rep.Rooms {
		switch {
		case r.Room == ids[1]:
			if r.OK || r.BrokenAt != 2 || r.Seq != 1 || r.Reason == "" {
				t.Fatalf("damaged room: %+v", r)
			}
		case !r.OK || r.Seq != 4:
			t.Fatalf("intact room %s reported: %+v", r.Room, r)
		}
	}
	for _, r := range rep.Mirrors {
		if r.Host != hostKey {
			t.Fatalf("mirror host: %+v", r)
		}
		switch r.Room {
		case ids[0]:
			if !r.OK || r.Seq != 4 {
				t.Fatalf("intact mirror: %+v", r)
			}
		case ids[1]:
			if r.OK || r.BrokenAt != 3 || r.Seq != 2 {
				t.Fatalf("damaged mirror: %+v", r)
			}
		default:
			t.Fatalf("unexpected mirror room %+v", r)
		}
	}
	if len(rep.Storage) != 0 {
		t.Fatalf("storage faults on a record-level damage: %+v", rep.Storage)
	}
}

// Check refuses a dir a node is running on, and a dir with no database;
// a damaged table is a storage fault naming the file.
func TestCheckRefusals(t *testing.T) {
	if _, err := node.Check(t.TempDir()); err == nil {
		t.Fatal("check of an empty dir succeeded")
	}
	dir := t.TempDir()
	h := adptest.StartHost(t, node.Config{DataDir: dir})
	if _, err := node.Check(dir); !errors.Is(err, node.ErrLocked) {
		t.Fatalf("check of a running node's dir: %v", err)
	}
	h.Close()

	dir, _, _ = buildDataDir(t, 1, 1)
	sst := ssts(t, dir)[0]
	truncate(t, sst)
	rep, err := node.Check(dir)
	if err != nil {
		t.Fatal(err)
	}
	if rep.OK() || len(rep.Storage) != 1 || rep.Storage[0].File == "" {
		t.Fatalf("damaged table: %+v", rep)
	}
}
