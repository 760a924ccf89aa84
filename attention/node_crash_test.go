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

// On a real node: a record committed (and acknowledged) whose mentions
// were never derived, because the process died first, is in the inbox
// after the restart, exactly once; a restart after that adds nothing.
func TestNodeCrashBeforeDerivation(t *testing.T) {
	dir := t.TempDir()
	var dropping atomic.Bool
	open := func() (*node.Node, *attention.Attention) {
		n, err := node.Open(node.Config{DataDir: dir, PublicURL: "http://127.0.0.1:1", Log: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		cfg := attention.ForNode(n, nil, nil)
		attention.SetDrop(&cfg, func(string, int64) bool { return dropping.Load() })
		a, err := attention.Open(cfg)
		if err != nil {
			t.Fatal(err)
		}
		a.Attach(n, nil)
		return n, a
	}
	n, a := open()
	alice, bob := adptest.NewAgent("alice"), adptest.NewAgent("bob")
	now := time.Now().UnixMilli()
	res, err := n.Submit(context.Background(), alice.Envelope(now, "room.create", "", 0, "", map[string]any{"topic": "crash", "visibility": "public",
		"start_time": now, "end_time": now + 3_600_000}), "")
	if err != nil {
		t.Fatal(err)
	}
	id, head, hash := res.Record.RoomID, res.Record.Seq, res.Record.Hash
	say := func() int64 {
		ev := alice.Event(time.Now().UnixMilli(), "message.create", id, head, hash, map[string]any{"content_type": "text/plain", "content": "bob?"})
		ev.Mentions = []string{string(bob.ID)}
		r, err := n.Submit(context.Background(), alice.Sign(ev), id)
		if err != nil {
			t.Fatal(err)
		}
		head, hash = r.Record.Seq, r.Record.Hash
		return r.Record.Seq
	}
	inbox := func() map[int64]int {
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
	testwait.Until(t, 20*time.Second, "the condition", func() bool { return inbox()[first] == 1 })
	dropping.Store(true)
	lost := say() // acknowledged; its derivation dies with the process
	a.Close()
	n.Close()
	dropping.Store(false)

	for round := 0; round < 2; round++ {
		n, a = open()
		testwait.Until(t, 20*time.Second, "the condition", func() bool { return inbox()[lost] == 1 })
		a.Close() // the owner (and its catch-up) has finished
		if got := inbox(); len(got) != 2 || got[first] != 1 || got[lost] != 1 {
			t.Fatalf("round %d: inbox %v, want seqs %d and %d once each", round, got, first, lost)
		}
		n.Close()
	}
}
