//go:build e2e

package mirror_test

import (
	"strings"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/adpnode/adpnode/adp/room"
	"github.com/adpnode/adpnode/internal/adptest"
	"github.com/adpnode/adpnode/internal/fedtest"
	"github.com/adpnode/adpnode/internal/testwait"
	"github.com/adpnode/adpnode/mirror"
)

// Removing a target with purge deletes the rooms only it matched: no key
// of the room is left in the mirror's store, and the host is untouched.
func TestMirrorPurge(t *testing.T) {
	peers := fedtest.Network(t, 2, nil, fedtest.Options{Rates: noRates, Mirror: true})
	a, b := peers[0], peers[1]
	alice := adptest.NewAgent("alice")
	tg, err := b.Mir.AddTarget(mirror.TargetAll, "")
	if err != nil {
		t.Fatal(err)
	}
	id := fedtest.CreateRoom(t, a, alice, room.Public, "purged")
	for i := 0; i < 50; i++ {
		fedtest.MustSubmit(t, a, alice, "message.create", id, msg("hello"))
	}
	testwait.Until(t, 10*time.Second, "B verified all 51 records", func() bool {
		r, ok := b.Mir.Room(id, "")
		return ok && r.Tip() == 51
	})
	mirrorKeys := func() int {
		n := 0
		b.Node.DB().View(func(txn *badger.Txn) error {
			it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte("m/")})
			defer it.Close()
			for it.Rewind(); it.Valid(); it.Next() {
				// Targets stay; so does the change feed (m/f/, m/fp/), a
				// log of stored records pruned behind its followers.
				if k := string(it.Item().Key()); len(k) > 4 && k[:4] != "m/t/" && k[:4] != "m/f/" && !strings.HasPrefix(k, "m/fp/") {
					n++
				}
			}
			return nil
		})
		return n
	}
	// The verified tip can run ahead of the group committer's writes.
	testwait.Until(t, 10*time.Second, "B stored all 51 records", func() bool { return mirrorKeys() >= 51 })
	if err := b.Mir.RemoveTarget(tg.ID, true); err != nil {
		t.Fatal(err)
	}
	if _, ok := b.Mir.Room(id, ""); ok {
		t.Fatal("the purged room is still mirrored")
	}
	if n := mirrorKeys(); n != 0 {
		t.Fatalf("%d mirror keys left after the purge", n)
	}
	if got, _, err := a.Node.Events(id, "", 0, 1000); err != nil || len(got) != 51 {
		t.Fatalf("host after the mirror's purge: %d records, %v", len(got), err)
	}
}
