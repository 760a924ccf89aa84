package attention_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
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

// BenchmarkWritePathCost is the inbox's cost on the write path as a ratio
// measured in one run: two nodes, one without and one with the attention
// service attached, each with 64 rooms written by 64 concurrent agents
// (durable group commit, signing live); every message mentions one agent.
// Each iteration writes one phase on each node, alternating which goes
// first, so the shared machine's drift falls on both. It reports
// ratio = throughput with / throughput without, and cost_% = 100·(1−ratio).
//
//	go test ./attention -run '^$' -bench WritePathCost -benchtime 10x -count 5
func BenchmarkWritePathCost(b *testing.B) {
	const rooms, perWriter = 64, 30
	type side struct {
		n     *node.Node
		att   *attention.Attention
		heads []struct {
			seq  int64
			hash string
		}
		ids     []string
		elapsed time.Duration
		writes  int64
	}
	writers := make([]*adptest.Agent, rooms)
	for i := range writers {
		writers[i] = adptest.NewAgent(fmt.Sprintf("w%d", i))
	}
	bob := adptest.NewAgent("bob")
	open := func(with bool) *side {
		n, err := node.Open(node.Config{DataDir: b.TempDir(), PublicURL: "http://127.0.0.1:1", Rates: node.Rates{AgentStatus: 60},
			Log: slog.New(slog.DiscardHandler)})
		if err != nil {
			b.Fatal(err)
		}
		s := &side{n: n}
		if with {
			if s.att, err = attention.Open(attention.ForNode(n, nil, nil)); err != nil {
				b.Fatal(err)
			}
			s.att.Attach(n, nil)
		}
		now := time.Now().UnixMilli()
		for _, w := range writers {
			res, err := n.Submit(context.Background(), w.Envelope(now, "room.create", "", 0, "", map[string]any{"topic": "bench", "visibility": "public",
				"start_time": now, "end_time": now + 3_600_000}), "")
			if err != nil {
				b.Fatal(err)
			}
			s.ids = append(s.ids, res.Record.RoomID)
			s.heads = append(s.heads, struct {
				seq  int64
				hash string
			}{res.Record.Seq, res.Record.Hash})
		}
		return s
	}
	off, on := open(false), open(true)
	defer func() {
		on.att.Close()
		on.n.Close()
		off.n.Close()
	}()
	phase := func(s *side) {
		var wg sync.WaitGroup
		start := time.Now()
		for i, w := range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				h := &s.heads[i]
				for k := 0; k < perWriter; k++ {
					ev := w.Event(time.Now().UnixMilli(), "message.create", s.ids[i], h.seq, h.hash, map[string]any{"content_type": "text/plain", "content": "hi"})
					ev.Mentions = []string{string(bob.ID)}
					r, err := s.n.Submit(context.Background(), w.Sign(ev), s.ids[i])
					if err != nil {
						b.Error(err)
						return
					}
					h.seq, h.hash = r.Record.Seq, r.Record.Hash
				}
			}()
		}
		wg.Wait()
		s.elapsed += time.Since(start)
		s.writes += rooms * perWriter
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if i%2 == 0 {
			phase(off)
			phase(on)
		} else {
			phase(on)
			phase(off)
		}
	}
	b.StopTimer()
	// Every write on the attention node reached bob's inbox.
	deadline := time.Now().Add(time.Minute)
	for {
		p, err := on.att.Mentions(bob.ID, attention.Cursor{}, 1)
		if err == nil && p.Watermark+int64(len(p.Items.([]attention.MentionItem))) > 0 {
			var last *attention.Page
			if last, err = on.att.Mentions(bob.ID, attention.Cursor{After: on.writes - 1}, 1); err == nil && len(last.Items.([]attention.MentionItem)) == 1 {
				break
			}
		}
		if time.Now().After(deadline) {
			b.Fatal("the inbox did not receive every mention")
		}
		time.Sleep(5 * time.Millisecond)
	}
	offRate := float64(off.writes) / off.elapsed.Seconds()
	onRate := float64(on.writes) / on.elapsed.Seconds()
	b.ReportMetric(offRate, "writes/s_without")
	b.ReportMetric(onRate, "writes/s_with")
	b.ReportMetric(onRate/offRate, "ratio")
	b.ReportMetric(100*(1-onRate/offRate), "cost_%")
}
