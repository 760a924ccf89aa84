package attention_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/adpnode/adpnode/attention"
	"github.com/adpnode/adpnode/hostport"
	"github.com/adpnode/adpnode/internal/adptest"
	"github.com/adpnode/adpnode/internal/storelayout"
	"github.com/adpnode/adpnode/internal/testwait"
	"github.com/adpnode/adpnode/node"
)

// Property: after an upgrade, the node's feed entries written before
// entries carried flags (record seq | hash | room ID) are read as before:
// a mention acknowledged while attention was stopped, in a data dir whose
// entries have the old layout, is derived once when the new code starts
// on it, and a restart adds nothing.
func TestOldFeedEntriesDerivedAfterUpgrade(t *testing.T) {
	dir := t.TempDir()
	open := func() *node.Node {
		n, err := node.Open(node.Config{DataDir: dir, PublicURL: "http://127.0.0.1:1", Log: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	n := open()
	a, err := attention.Open(attention.ForNode(n, nil, nil))
	if err != nil {
		t.Fatal(err)
	}
	a.Close() // its position: the feed's head
	by, bob := adptest.NewAgent("upgrade-writer"), adptest.NewAgent("bob")
	now := time.Now().UnixMilli()
	res, err := n.Submit(context.Background(), by.Envelope(now, "room.create", "", 0, "", map[string]any{"topic": "upgrade", "visibility": "public",
		"start_time": now, "end_time": now + 3_600_000}), "")
	if err != nil {
		t.Fatal(err)
	}
	id, seq, hash := res.Record.RoomID, res.Record.Seq, res.Record.Hash
	for _, mention := range []bool{false, true, false} {
		ev := by.Event(time.Now().UnixMilli(), "message.create", id, seq, hash, map[string]any{"content_type": "text/plain", "content": "hi"})
		if mention {
			ev.Mentions = []string{string(bob.ID)}
		}
		r, err := n.Submit(context.Background(), by.Sign(ev), id)
		if err != nil {
			t.Fatal(err)
		}
		seq, hash = r.Record.Seq, r.Record.Hash
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}

	// The entries as a node stored them before flags existed.
	db, err := badger.Open(node.BadgerOptions(dir))
	if err != nil {
		t.Fatal(err)
	}
	rewrote := 0
	err = db.Update(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{PrefetchValues: true, Prefix: []byte(storelayout.Feed)})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			v, err := it.Item().ValueCopy(nil)
			if err != nil {
				return err
			}
			if len(v) <= 40 || hostport.FeedFlags(v[40])&hostport.FeedFlagsSet == 0 {
				t.Fatalf("entry %x has no flags", it.Item().Key())
			}
			if err := txn.Set(it.Item().KeyCopy(nil), append(v[:40:40], v[41:]...)); err != nil {
				return err
			}
			rewrote++
		}
		return nil
	})
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil || rewrote != 4 {
		t.Fatalf("rewrote %d entries: %v", rewrote, err)
	}

	for round := 0; round < 2; round++ {
		n = open()
		a, err = attention.Open(attention.ForNode(n, nil, nil))
		if err != nil {
			t.Fatal(err)
		}
		var items []attention.MentionItem
		testwait.Until(t, 20*time.Second, "the mention of an old entry derived", func() bool {
			p, err := a.Mentions(bob.ID, attention.Cursor{}, 0)
			if err != nil {
				t.Fatal(err)
			}
			items = p.Items.([]attention.MentionItem)
			return len(items) > 0
		})
		a.Close()
		if len(items) != 1 || items[0].RoomID != id || items[0].RoomSeq != 3 {
			t.Fatalf("round %d: bob's inbox %+v, want %s/3 once", round, items, id)
		}
		if err := n.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
