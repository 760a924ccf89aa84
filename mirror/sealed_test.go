//go:build e2e

package mirror_test

import (
	"context"
	"testing"
	"time"

	"github.com/adpnode/adpnode/adp/record"
	"github.com/adpnode/adpnode/client"
	"github.com/adpnode/adpnode/internal/adptest"
	"github.com/adpnode/adpnode/internal/fedtest"
	"github.com/adpnode/adpnode/internal/testwait"
	"github.com/adpnode/adpnode/mirror"
)

// A public member-only room mirrors unchanged: the mirror verifies and
// replays the ciphertext, the key and epoch records with the kernel alone
// and holds the same chain, without being able to read it.
func TestMirrorSealedRoom(t *testing.T) {
	peers := fedtest.Network(t, 2, nil, fedtest.Options{Rates: noRates, Mirror: true})
	a, b := peers[0], peers[1]
	if _, err := b.Mir.AddTarget(mirror.TargetAll, ""); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	mk := func(name string) *client.Client {
		return adptest.SeededClient(t, a.URL, a.Clock, "mirror sealed "+name)
	}
	alice, bob := mk("alice"), mk("bob")
	now := a.Clock.Ms()
	cr, err := alice.CreateSealedRoom(ctx, map[string]any{"topic": "sealed mirror", "visibility": "public",
		"start_time": now, "end_time": now + 3_600_000, "tags": []string{}})
	if err != nil {
		t.Fatal(err)
	}
	id := cr.ID
	if _, err := bob.Join(ctx, id, "speaker", "", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := bob.PublishSealKey(ctx, id); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"first", "second"} {
		if _, err := alice.Message(ctx, id, "text/plain", s); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := alice.Post(ctx, id, 3, func(*client.Room, []*record.Record) (string, any, error) {
		return "room.member.remove", map[string]any{"member": bob.Key.ID}, nil
	}); err != nil {
		t.Fatal(err)
	}
	last, err := alice.Message(ctx, id, "text/plain", "after bob") // epoch 2
	if err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, 10*time.Second, "B verified the sealed room", func() bool {
		r, ok := b.Mir.Room(id, "")
		return ok && r.Tip() == last.Seq
	})
	if n := sameChain(t, a, b, id); int64(n) != last.Seq {
		t.Fatalf("compared %d records", n)
	}
	if info := func() mirror.Info { r, _ := b.Mir.Room(id, ""); return r.Info() }(); info.Faulty || info.VerifiedSeq != last.Seq {
		t.Fatalf("mirror info %+v", info)
	}
}
