package attention_test

import (
	"context"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/adpnode/adpnode/attention"
	"github.com/adpnode/adpnode/internal/adptest"
	"github.com/adpnode/adpnode/internal/testwait"
	"github.com/adpnode/adpnode/node"
)

// Property: a mention in a record the node stores while attention is
// stopped (or behind) is derived once attention runs again, exactly once,
// whatever the record's received_at says: attention follows the node's
// change feed from its stored position, and guesses nothing from times.
// Here the node's clock steps back five minutes while attention is
// stopped; a restart after the derivation adds nothing.
func TestMentionWhileStoppedDerivedAfterRestart(t *testing.T) {
	dir := t.TempDir()
	var offset atomic.Int64 // ms added to the node's clock
	clock := func() time.Time { return time.Now().Add(time.Duration(offset.Load()) * time.Millisecond) }
	n, err := node.Open(node.Config{DataDir: dir, PublicURL: "http://127.0.0.1:1", Now: clock, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	openAtt := func() *attention.Attention {
		a, err := attention.Open(attention.ForNode(n, nil, nil))
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	a := openAtt()
	alice, bob := adptest.NewAgent("alice"), adptest.NewAgent("bob")
	start := clock().UnixMilli() - 600_000
	res, err := n.Submit(context.Background(), alice.Envelope(clock().UnixMilli(), "room.create", "", 0, "", map[string]any{"topic": "crash", "visibility": "public",
		"start_time": start, "end_time": start + 7_200_000}), "")
	if err != nil {
		t.Fatal(err)
	}
	id, head, hash := res.Record.RoomID, res.Record.Seq, res.Record.Hash
	say := func() int64 {
		ev := alice.Event(clock().UnixMilli(), "message.create", id, head, hash, map[string]any{"content_type": "text/plain", "content": "bob?"})
		ev.Mentions = []string{string(bob.ID)}
		r, err := n.Submit(context.Background(), alice.Sign(ev), id)
		if err != nil {
			t.Fatal(err)
		}
		head, hash = r.Record.Seq, r.Record.Hash
		return r.Record.Seq
	}
	inbox := func(a *attention.Attention) map[int64]int {
		p, err := a.Mentions(bob.ID, attention.Cursor{}, 0)
		if err != nil {
			t.Fatal(err)
		}
		out := map[int64]int{}
		for _, it := range p.Items.([]attention.MentionItem) {
			out[it.RoomSeq]++
		}
		return out
	}
	first := say()
	testwait.Until(t, 20*time.Second, "the first mention derived", func() bool { return inbox(a)[first] == 1 })
	a.Close()
	offset.Store(-300_000)
	lost := say() // acknowledged while attention is stopped
	for round := 0; round < 2; round++ {
		a = openAtt()
		testwait.Until(t, 20*time.Second, "the mention stored while attention was stopped derived", func() bool { return inbox(a)[lost] >= 1 })
		a.Close()
		if got := inbox(a); len(got) != 2 || got[first] != 1 || got[lost] != 1 {
			t.Fatalf("round %d: inbox %v, want seqs %d and %d once each", round, got, first, lost)
		}
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
}
