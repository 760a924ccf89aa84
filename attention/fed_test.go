//go:build e2e

package attention_test

import (
	"context"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/adpnode/adpnode/adp/room"
	"github.com/adpnode/adpnode/attention"
	"github.com/adpnode/adpnode/internal/adptest"
	"github.com/adpnode/adpnode/internal/fedtest"
	"github.com/adpnode/adpnode/internal/storelayout"
	"github.com/adpnode/adpnode/internal/testwait"
	"github.com/adpnode/adpnode/mirror"
)

// A mention in a public room of node A reaches the inbox of an agent on
// node B, which mirrors the room; the directory subscription on B sees
// A's room through the gossiped index; nothing of A's private room does.
func TestRemoteMentionReachesMirrorInbox(t *testing.T) {
	peers := fedtest.Network(t, 2, nil, fedtest.Options{Mirror: true, AnnounceInterval: 500 * time.Millisecond})
	a, b := peers[0], peers[1]
	alice, bob := adptest.NewAgent("alice"), adptest.NewAgent("bob")

	sub, err := b.Att.Create(bob.ID, &attention.CreateRequest{Filter: attention.Filter{Tags: []string{"research"}}})
	if err != nil {
		t.Fatal(err)
	}
	pub := fedtest.CreateRoom(t, a, alice, room.Public, "open research", "research")
	priv := fedtest.CreateRoom(t, a, alice, room.Private, "secret research", "research")
	testwait.Until(t, 20*time.Second, "B's subscription sees A's public room", func() bool {
		p, err := b.Att.Feed(bob.ID, sub.ID, attention.Cursor{After: 0}, 0)
		return err == nil && len(p.Items.([]attention.FeedItem)) == 1 && p.Items.([]attention.FeedItem)[0].RoomID == pub
	})
	if _, err := b.Mir.AddTarget(mirror.TargetRoom, a.Node.RoomURL(pub)); err != nil {
		t.Fatal(err)
	}
	ev := func(roomID string) []byte {
		r, err := a.Node.Room(roomID, alice.ID)
		if err != nil {
			t.Fatal(err)
		}
		e := alice.Event(a.Clock.Ms(), "message.create", roomID, r.Head.Seq, r.Head.Hash, map[string]any{"content_type": "text/plain", "content": "bob?"})
		e.Mentions = []string{string(bob.ID)}
		return alice.Sign(e)
	}
	res, err := a.Node.Submit(context.Background(), ev(pub), pub)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Node.Submit(context.Background(), ev(priv), priv); err != nil {
		t.Fatal(err)
	}
	var got []attention.MentionItem
	testwait.Until(t, 30*time.Second, "the mention reaches B's inbox", func() bool {
		p, err := b.Att.Mentions(bob.ID, attention.Cursor{}, 0)
		if err != nil {
			t.Fatal(err)
		}
		got = p.Items.([]attention.MentionItem)
		return len(got) > 0
	})
	m := got[0]
	if len(got) != 1 || m.RoomID != pub || m.RoomSeq != res.Record.Seq || m.RecordHash != res.Record.Hash ||
		m.RoomURL != a.Node.RoomURL(pub) || m.Source != "mirror" || m.Host != a.Node.Host() {
		t.Fatalf("inbox item %+v (want room %s seq %d)", got, pub, res.Record.Seq)
	}
	// A's own inbox for bob has both, but the private one only for who
	// may read it: bob may not.
	p, err := a.Att.Mentions(bob.ID, attention.Cursor{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range p.Items.([]attention.MentionItem) {
		if it.RoomID == priv {
			t.Fatal("a private room's mention leaked to a non-member")
		}
	}
	p2, _ := b.Att.Feed(bob.ID, sub.ID, attention.Cursor{After: 0}, 0)
	for _, it := range p2.Items.([]attention.FeedItem) {
		if it.RoomID == priv {
			t.Fatal("a private room appeared in a directory feed")
		}
	}
	// Every key this run stored, on both nodes (host, mirror, index,
	// federation, attention), belongs to a space of the storage layout
	// table.
	for _, p := range peers {
		if err := p.Index.Flush(); err != nil {
			t.Fatal(err)
		}
		seen := map[string]int{}
		err := p.Node.DB().View(func(txn *badger.Txn) error {
			it := txn.NewIterator(badger.IteratorOptions{})
			defer it.Close()
			for it.Rewind(); it.Valid(); it.Next() {
				s, ok := storelayout.Lookup(it.Item().Key())
				if !ok {
					t.Errorf("%s: key %q is in no space of internal/storelayout", p.Name, it.Item().Key())
				}
				seen[s.Owner]++
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		for _, owner := range []string{"node", "index", "attention"} {
			if seen[owner] == 0 {
				t.Errorf("%s: no %s keys stored (seen %v)", p.Name, owner, seen)
			}
		}
	}
	if seen := mirrorKeys(t, b); seen == 0 {
		t.Error("B mirrors A's room but stored no mirror keys")
	}

	// Property: a mirror-delivered record's mention is derived exactly
	// once across a restart of B (attention follows the mirror's change
	// feed from its stored position); one stored after it, once too.
	b = b.Restart(t)
	fedtest.Connect(t, b, a)
	res2, err := a.Node.Submit(context.Background(), ev(pub), pub)
	if err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, 30*time.Second, "the mention after B's restart reaches B's inbox", func() bool {
		p, err := b.Att.Mentions(bob.ID, attention.Cursor{}, 0)
		return err == nil && len(p.Items.([]attention.MentionItem)) >= 2
	})
	b = b.Restart(t)
	p, err = b.Att.Mentions(bob.ID, attention.Cursor{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := p.Items.([]attention.MentionItem); len(got) != 2 || got[0].RoomSeq != res.Record.Seq || got[1].RoomSeq != res2.Record.Seq {
		t.Fatalf("B's inbox after restarts %+v, want seqs %d and %d once each", got, res.Record.Seq, res2.Record.Seq)
	}
}

func mirrorKeys(t *testing.T, p *fedtest.Peer) (n int) {
	err := p.Node.DB().View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte(storelayout.MirrorRecord)})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			n++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}
