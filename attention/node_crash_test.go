package attention_test

import (
	"context"
	"fmt"
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
// Here the node's clock runs ten minutes ahead while attention derives a
// mention in one room, then is set back while attention is stopped and a
// mention lands in another room; a restart after the derivation adds
// nothing.
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
	bob := adptest.NewAgent("bob")
	type room struct {
		by       *adptest.Agent
		id, hash string
		head     int64
	}
	start := clock().UnixMilli() - 600_000
	create := func(name string) *room {
		by := adptest.NewAgent(name)
		res, err := n.Submit(context.Background(), by.Envelope(clock().UnixMilli(), "room.create", "", 0, "", map[string]any{"topic": "stopped", "visibility": "public",
			"start_time": start, "end_time": start + 7_200_000}), "")
		if err != nil {
			t.Fatal(err)
		}
		return &room{by, res.Record.RoomID, res.Record.Hash, res.Record.Seq}
	}
	say := func(r *room) int64 {
		ev := r.by.Event(clock().UnixMilli(), "message.create", r.id, r.head, r.hash, map[string]any{"content_type": "text/plain", "content": "bob?"})
		ev.Mentions = []string{string(bob.ID)}
		res, err := n.Submit(context.Background(), r.by.Sign(ev), r.id)
		if err != nil {
			t.Fatal(err)
		}
		r.head, r.hash = res.Record.Seq, res.Record.Hash
		return res.Record.Seq
	}
	inbox := func(a *attention.Attention) map[string]int {
		p, err := a.Mentions(bob.ID, attention.Cursor{}, 0)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]int{}
		for _, it := range p.Items.([]attention.MentionItem) {
			out[fmt.Sprintf("%s/%d", it.RoomID, it.RoomSeq)]++
		}
		return out
	}
	ra, rb := create("alice"), create("carol")
	offset.Store(600_000)
	first := fmt.Sprintf("%s/%d", rb.id, say(rb))
	testwait.Until(t, 20*time.Second, "the first mention derived", func() bool { return inbox(a)[first] == 1 })
	a.Close()
	offset.Store(0)
	lost := fmt.Sprintf("%s/%d", ra.id, say(ra)) // acknowledged while attention is stopped
	for round := 0; round < 2; round++ {
		a = openAtt()
		testwait.Until(t, 20*time.Second, "the mention stored while attention was stopped derived", func() bool { return inbox(a)[lost] >= 1 })
		a.Close()
		if got := inbox(a); len(got) != 2 || got[first] != 1 || got[lost] != 1 {
			t.Fatalf("round %d: inbox %v, want %s and %s once each", round, got, first, lost)
		}
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
}
