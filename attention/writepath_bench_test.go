package attention_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/adpnode/adpnode/attention"
	"github.com/adpnode/adpnode/internal/adptest"
	"github.com/adpnode/adpnode/node"
)

// BenchmarkWritePathMentions: durable message.create writes that each
// mention one agent, on a node without and with the attention service
// attached. The difference is the inbox's cost on the write path (the
// listener: two substring scans and a queue append; parsing and storing
// happen on the owner goroutine). The "with" run also reports how long the
// owner took to store every inbox item after the last write.
//
//	go test ./attention -run '^$' -bench WritePathMentions -benchtime 2000x -count 3
func BenchmarkWritePathMentions(b *testing.B) {
	for _, with := range []bool{false, true} {
		name := "without"
		if with {
			name = "with"
		}
		b.Run(name, func(b *testing.B) { benchWritePath(b, with) })
	}
}

func benchWritePath(b *testing.B, with bool) {
	n, err := node.Open(node.Config{DataDir: b.TempDir(), PublicURL: "http://127.0.0.1:1", Rates: node.Rates{AgentStatus: 60},
		Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	defer n.Close()
	var att *attention.Attention
	if with {
		if att, err = attention.Open(attention.ForNode(n, nil, nil)); err != nil {
			b.Fatal(err)
		}
		defer att.Close()
		att.Attach(n, nil)
	}
	alice, bob := adptest.NewAgent("alice"), adptest.NewAgent("bob")
	now := time.Now().UnixMilli()
	res, err := n.Submit(context.Background(), alice.Envelope(now, "room.create", "", 0, "", map[string]any{"topic": "bench", "visibility": "public",
		"start_time": now, "end_time": now + 3_600_000}), "")
	if err != nil {
		b.Fatal(err)
	}
	id := res.Record.RoomID
	head, hash := res.Record.Seq, res.Record.Hash
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		ev := alice.Event(time.Now().UnixMilli(), "message.create", id, head, hash, map[string]any{"content_type": "text/plain", "content": "hi"})
		ev.Mentions = []string{string(bob.ID)}
		r, err := n.Submit(context.Background(), alice.Sign(ev), id)
		if err != nil {
			b.Fatal(err)
		}
		head, hash = r.Record.Seq, r.Record.Hash
	}
	b.StopTimer()
	if with {
		start := time.Now()
		for {
			if p2, err := att.Mentions(bob.ID, attention.Cursor{After: max(int64(b.N)-1, 0)}, 1); err == nil && len(p2.Items.([]attention.MentionItem)) == 1 {
				break
			}
			if time.Since(start) > time.Minute {
				b.Fatal("inbox did not catch up")
			}
			time.Sleep(time.Millisecond)
		}
		b.ReportMetric(float64(time.Since(start).Microseconds())/1000, "inbox_lag_ms")
	}
}
