package attention_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/adpnode/adpnode/adp/identity"
	"github.com/adpnode/adpnode/attention"
	"github.com/adpnode/adpnode/internal/adptest"
	"github.com/adpnode/adpnode/node"
)

// BenchmarkWritePathMentions: durable message.create writes that each
// mention one agent, on a node without and with the attention service
// attached. The difference is the inbox's cost on the write path (the
// listener: a look at the parsed envelope and a queue append; encoding
// and storing happen on the owner goroutine, whose batches ride the
// node's group commit). The "with" run also reports how long the
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
//
// Each iteration is one pair of timed phases (writePhase long each), one
// per node, the order alternating (off-on, on-off, ...) so the shared
// machine's drift falls on both sides. After an "on" phase, the untimed
// drain waits until the inbox holds every mention, so the owner's last
// batch does not run into the next phase. Each pair gives a ratio
// (throughput with ÷ without); the benchmark reports the median ratio and
// cost_% = 100·(1 − median), and logs every pair's ratio and the load
// average before and after. It also reports the process's CPU time per
// write in each phase, less what the writers' signing costs (measured
// after each pair): cpu_cost_% is the median of the pairs' ratios of it,
// a figure the machine's load moves less than throughput.
//
//	go test ./attention -run '^$' -bench WritePathCost -benchtime 6x -count 5
func BenchmarkWritePathCost(b *testing.B) {
	const rooms = 64
	type side struct {
		n     *node.Node
		att   *attention.Attention
		heads []struct {
			seq  int64
			hash string
		}
		ids    []string
		writes int64
	}
	writers := make([]*adptest.Agent, rooms)
	for i := range writers {
		writers[i] = adptest.NewAgent(fmt.Sprintf("w%d", i))
	}
	bob := adptest.NewAgent("bob")
	var passes atomic.Int64
	open := func(with bool) *side {
		n, err := node.Open(node.Config{DataDir: b.TempDir(), PublicURL: "http://127.0.0.1:1", Rates: node.Rates{AgentStatus: 60},
			Log: slog.New(slog.DiscardHandler)})
		if err != nil {
			b.Fatal(err)
		}
		s := &side{n: n}
		if with {
			cfg := attention.ForNode(n, nil, nil)
			attention.SetOnPass(&cfg, func() { passes.Add(1) })
			if s.att, err = attention.Open(cfg); err != nil {
				b.Fatal(err)
			}
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
	// Profile labels (side=off, side=on) reach every goroutine a node
	// starts (Badger's, the committer, the owner) and the writers, so a
	// -cpuprofile splits by side: go tool pprof -tagfocus side=on.
	var off, on *side
	pprof.Do(context.Background(), pprof.Labels("side", "off"), func(context.Context) { off = open(false) })
	pprof.Do(context.Background(), pprof.Labels("side", "on"), func(context.Context) { on = open(true) })
	defer func() {
		on.att.Close()
		on.n.Close()
		off.n.Close()
	}()
	// phase writes on s for writePhase and returns the writes per second
	// and the process's CPU time per write (µs), client signing included.
	phase := func(s *side) (float64, float64) {
		var wg sync.WaitGroup
		var stop atomic.Bool
		var done atomic.Int64
		start, cpu0 := time.Now(), procCPU()
		t := time.AfterFunc(writePhase, func() { stop.Store(true) })
		defer t.Stop()
		label := pprof.Labels("side", "off")
		if s.att != nil {
			label = pprof.Labels("side", "on")
		}
		for i, w := range writers {
			wg.Add(1)
			go pprof.Do(context.Background(), label, func(context.Context) {
				defer wg.Done()
				h := &s.heads[i]
				for !stop.Load() {
					ev := w.Event(time.Now().UnixMilli(), "message.create", s.ids[i], h.seq, h.hash, map[string]any{"content_type": "text/plain", "content": "hi"})
					ev.Mentions = []string{string(bob.ID)}
					r, err := s.n.Submit(context.Background(), w.Sign(ev), s.ids[i])
					if err != nil {
						b.Error(err)
						return
					}
					h.seq, h.hash = r.Record.Seq, r.Record.Hash
					done.Add(1)
				}
			})
		}
		wg.Wait()
		el, cpu := time.Since(start), procCPU()-cpu0
		s.writes += done.Load()
		return float64(done.Load()) / el.Seconds(), float64(cpu.Microseconds()) / float64(done.Load())
	}
	// drain waits until bob's inbox holds every mention written on "on".
	drain := func() {
		deadline := time.Now().Add(time.Minute)
		for !inboxHolds(on.att, bob.ID, on.writes) {
			if time.Now().After(deadline) {
				b.Fatalf("the inbox did not receive every mention (%d written)", on.writes)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	// What the writers' own signing costs (µs of CPU per event), to take
	// it out of the CPU figure: a node's clients sign on their machines.
	signCPU := func() float64 {
		const n = 500
		w, h := writers[0], off.heads[0]
		cpu0 := procCPU()
		for k := 0; k < n; k++ {
			ev := w.Event(time.Now().UnixMilli(), "message.create", off.ids[0], h.seq, h.hash, map[string]any{"content_type": "text/plain", "content": "hi"})
			ev.Mentions = []string{string(bob.ID)}
			w.Sign(ev)
		}
		return float64((procCPU() - cpu0).Microseconds()) / n
	}
	load0 := loadAverage()
	var ratios, cpuRatios, offRates, onRates, offCPU, onCPU []float64
	var onTime time.Duration
	passes.Store(0)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		var r0, r1, c0, c1 float64
		if i%2 == 0 {
			r0, c0 = phase(off)
			t0 := time.Now()
			r1, c1 = phase(on)
			onTime += time.Since(t0)
			b.StopTimer()
			drain()
			b.StartTimer()
		} else {
			t0 := time.Now()
			r1, c1 = phase(on)
			onTime += time.Since(t0)
			b.StopTimer()
			drain()
			b.StartTimer()
			r0, c0 = phase(off)
		}
		b.StopTimer()
		sign := signCPU()
		b.StartTimer()
		offRates, onRates = append(offRates, r0), append(onRates, r1)
		ratios = append(ratios, r1/r0)
		if c0 > sign {
			cpuRatios = append(cpuRatios, (c1-sign)/(c0-sign))
			offCPU, onCPU = append(offCPU, c0-sign), append(onCPU, c1-sign)
		}
	}
	b.StopTimer()
	ratio := median(ratios)
	b.ReportMetric(median(offRates), "writes/s_without")
	b.ReportMetric(median(onRates), "writes/s_with")
	b.ReportMetric(ratio, "ratio")
	b.ReportMetric(100*(1-ratio), "cost_%")
	b.ReportMetric(float64(passes.Load())/onTime.Seconds(), "passes/s")
	if len(cpuRatios) > 0 {
		b.ReportMetric(100*(median(cpuRatios)-1), "cpu_cost_%")
		b.ReportMetric(median(offCPU), "cpu_µs/write_without")
		b.ReportMetric(median(onCPU), "cpu_µs/write_with")
	}
	b.Logf("N=%d pairs (%d and %d writes); throughput ratios %s, median %.3f; node CPU per write ratios %s; load average before %s, after %s",
		b.N, off.writes, on.writes, fmts(ratios), ratio, fmts(cpuRatios), load0, loadAverage())
}

func fmts(v []float64) string {
	s := make([]string, len(v))
	for i, r := range v {
		s[i] = fmt.Sprintf("%.3f", r)
	}
	return strings.Join(s, " ")
}

// writePhase is how long one timed phase of BenchmarkWritePathCost writes.
const writePhase = 1500 * time.Millisecond

// inboxHolds reports whether agent's inbox holds at least n items.
func inboxHolds(a *attention.Attention, agent identity.AgentID, n int64) bool {
	if n == 0 {
		return true
	}
	p, err := a.Mentions(agent, attention.Cursor{After: n - 1}, 1)
	return err == nil && len(p.Items.([]attention.MentionItem)) == 1
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// loadAverage is /proc/loadavg's first three fields ("?" where there is
// none).
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}
