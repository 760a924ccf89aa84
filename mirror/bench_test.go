//go:build e2e

package mirror_test

// Mirror benchmarks, all on 127.0.0.1. They never run under plain
// `go test`; run them with
//
//	go test -run '^$' -bench . -benchtime 1x ./mirror/
//
// Each benchmark builds its own network (host A, mirror B, in one process
// on the machine's cores) and runs one experiment per b.N iteration; the
// figures are the b.ReportMetric units, and ns/op is only the experiment's
// wall time, set-up included.
//
// Load is adp:reactions/1.0 reaction.create signals anchored to seq 1 (the
// room.create record; the rooms override the pack's rate_hint of 30 a
// minute per agent), signed before the measurement: a signal may name
// any accepted record, so a writer needs no head and many agents can write
// one room at once, which message.create (head CAS) does not allow at
// 2000 writes/s. Each agent's envelopes are submitted in nonce order by
// one goroutine, straight to A's node.Submit (no HTTP).
//
// The peers' clock follows the wall clock (to the millisecond), so that a
// record's received_at is when A accepted it.
//
// BenchmarkMirrorCatchUp first writes its 100,000-record backlog (about
// 50 s: A takes ~2,000 writes/s into one room); CATCHUP_PROF=file writes a
// CPU profile of the catch-up alone.

import (
	"context"
	"flag"
	"fmt"
	"math"
	"os"
	"runtime/pprof"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/adpnode/adpnode/adp/record"
	"github.com/adpnode/adpnode/adp/room"
	"github.com/adpnode/adpnode/hostport"
	"github.com/adpnode/adpnode/internal/adptest"
	"github.com/adpnode/adpnode/internal/fedtest"
	"github.com/adpnode/adpnode/internal/testwait"
	"github.com/adpnode/adpnode/mirror"
)

// wallClock returns a clock kept at the wall time (advanced every
// millisecond) until the benchmark ends.
func wallClock(b *testing.B) *adptest.Clock {
	c := adptest.NewClock()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if d := time.Now().UnixMilli() - c.Ms(); d > 0 {
					c.Advance(time.Duration(d) * time.Millisecond)
				}
			}
		}
	}()
	b.Cleanup(func() { cancel(); <-done })
	return c
}

// lagProbe timestamps every record twice: when A's node accepted it (a
// follower of A's change feed, after the record is durable) and when B's mirror stored
// it verified (Config.OnVerified, after B's write is durable).
type lagProbe struct {
	mu       sync.Mutex
	accepted map[string][]int64 // room → wall ns by seq
	rooms    map[string]bool    // rooms whose records count
	samples  []lagSample
}

type lagSample struct {
	roomID     string
	seq        int64
	receivedAt int64 // record received_at (ms, A's clock = wall)
	verified   int64 // wall ns at B
	accepted   int64 // wall ns at A's feed follower (0 if not seen yet)
}

func newLagProbe() *lagProbe {
	return &lagProbe{accepted: map[string][]int64{}, rooms: map[string]bool{}}
}

func (p *lagProbe) watch(roomID string) {
	p.mu.Lock()
	p.rooms[roomID] = true
	p.mu.Unlock()
}

func (p *lagProbe) onAccepted(batch []hostport.FeedEntry) error {
	now := time.Now().UnixNano()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, e := range batch {
		if !p.rooms[e.RoomID] {
			continue
		}
		s := p.accepted[e.RoomID]
		for int64(len(s)) <= e.RecordSeq {
			s = append(s, 0)
		}
		s[e.RecordSeq] = now
		p.accepted[e.RoomID] = s
	}
	return nil
}

func (p *lagProbe) onVerified(roomID string, rec *record.Record, _ bool) {
	now := time.Now().UnixNano()
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.rooms[roomID] {
		return
	}
	s := lagSample{roomID: roomID, seq: rec.Seq, receivedAt: rec.ReceivedAt, verified: now}
	if acc := p.accepted[roomID]; int64(len(acc)) > rec.Seq {
		s.accepted = acc[rec.Seq]
	}
	p.samples = append(p.samples, s)
}

// between returns the samples of records received in [t0, t1] (ms) of
// rooms (nil: all).
func (p *lagProbe) between(t0, t1 int64, rooms map[string]bool) []lagSample {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []lagSample
	for _, s := range p.samples {
		if s.receivedAt >= t0 && s.receivedAt <= t1 && (rooms == nil || rooms[s.roomID]) {
			out = append(out, s)
		}
	}
	return out
}

// lags returns received_at → verified (ms, received_at has ms
// resolution) and accepted → verified (µs precision) lags, sorted.
func lags(samples []lagSample) (fromReceived, fromAccepted []float64) {
	for _, s := range samples {
		fromReceived = append(fromReceived, float64(s.verified)/1e6-float64(s.receivedAt))
		if s.accepted != 0 {
			fromAccepted = append(fromAccepted, float64(s.verified-s.accepted)/1e6)
		}
	}
	slices.Sort(fromReceived)
	slices.Sort(fromAccepted)
	return fromReceived, fromAccepted
}

func pct(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(p * float64(len(sorted)-1))
	return sorted[i]
}

// startBenchPair starts host A (no mirror) and mirror B on a wall clock,
// connected, with probe's hooks installed.
func startBenchPair(b *testing.B, probe *lagProbe) (a, m *fedtest.Peer) {
	clock := wallClock(b)
	a = fedtest.Start(b, "A", b.TempDir(), clock, 0, fedtest.Options{Rates: noRates, Log: quietLog})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = a.Node.Follow(ctx, a.Node.FeedHead(), probe.onAccepted) }()
	b.Cleanup(func() { cancel(); <-done })
	m = fedtest.Start(b, "B", b.TempDir(), clock, 0, fedtest.Options{Rates: noRates, Log: quietLog, Mirror: true,
		MirrorConfig: mirror.Config{OnVerified: probe.onVerified}})
	fedtest.Connect(b, m, a)
	testwait.Until(b, 10*time.Second, "index topic subscriptions known", func() bool {
		return a.Fed.IndexPeers() >= 1 && m.Fed.IndexPeers() >= 1
	})
	time.Sleep(1100 * time.Millisecond) // one gossipsub heartbeat grafts the meshes
	return a, m
}

// loadRoom is a public room importing adp:reactions/1.0 and the agents
// that write reaction signals into it.
type loadRoom struct {
	id      string
	anchor  string // hash of record 1
	eventID string // event ID of record 1
	agents  []*adptest.Agent
}

// reactionRooms creates n rooms on host, each with `agents` writers (the
// creator and joined speakers).
func reactionRooms(b *testing.B, host *fedtest.Peer, prefix string, n, agents int) []loadRoom {
	out := make([]loadRoom, n)
	for i := range out {
		owner := adptest.NewAgent(fmt.Sprintf("%s-owner-%d", prefix, i))
		now := host.Clock.Ms()
		res := fedtest.MustSubmit(b, host, owner, "room.create", "", map[string]any{"topic": fmt.Sprintf("%s %d", prefix, i),
			"visibility": room.Public, "start_time": now, "end_time": now + 3*3_600_000, "tags": []string{},
			"types": []any{map[string]any{"use": "adp:reactions/1.0",
				// The pack hints 30 reactions a minute per agent; load
				// needs far more.
				"overrides": map[string]any{"reaction.create": map[string]any{"rate_hint": 1_000_000}}}}})
		raw, _ := res.Record.MarshalJSON()
		_, env, err := record.Parse(raw)
		if err != nil {
			b.Fatal(err)
		}
		lr := loadRoom{id: res.Record.RoomID, anchor: res.Record.Hash, eventID: env.Hash, agents: []*adptest.Agent{owner}}
		for j := 1; j < agents; j++ {
			ag := adptest.NewAgent(fmt.Sprintf("%s-member-%d-%d", prefix, i, j))
			fedtest.MustSubmit(b, host, ag, "room.join", lr.id, map[string]any{"role": "speaker"})
			lr.agents = append(lr.agents, ag)
		}
		out[i] = lr
	}
	return out
}

// lane is one agent's pre-signed reaction envelopes for one room.
type lane struct {
	roomID string
	envs   [][]byte
}

// presign signs `total` reactions spread evenly over every agent of rooms.
func presign(clock *adptest.Clock, rooms []loadRoom, total int) []lane {
	var lanes []lane
	for _, r := range rooms {
		for range r.agents {
			lanes = append(lanes, lane{roomID: r.id})
		}
	}
	per := (total + len(lanes) - 1) / len(lanes)
	var wg sync.WaitGroup
	i := 0
	for _, r := range rooms {
		for _, ag := range r.agents {
			l := &lanes[i]
			i++
			wg.Add(1)
			go func() {
				defer wg.Done()
				for k := 0; k < per; k++ {
					l.envs = append(l.envs, ag.Envelope(clock.Ms(), "reaction.create", r.id, 1, r.anchor,
						map[string]any{"event_id": r.eventID, "reaction": "agree"}))
				}
			}()
		}
	}
	wg.Wait()
	return lanes
}

// drive submits every lane's envelopes to host, the lanes together at
// rate writes/s (0: as fast as the host takes them), and returns how many
// were accepted and refused.
func drive(host *fedtest.Peer, lanes []lane, rate float64) (accepted, refused int64, firstErr error) {
	var ok, bad atomic.Int64
	var errOnce sync.Once
	var wg sync.WaitGroup
	start := time.Now()
	for i, l := range lanes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var step, offset time.Duration
			if rate > 0 {
				step = time.Duration(float64(len(lanes)) / rate * float64(time.Second))
				offset = step * time.Duration(i) / time.Duration(len(lanes))
			}
			for k, env := range l.envs {
				if rate > 0 {
					time.Sleep(time.Until(start.Add(offset + time.Duration(k)*step)))
				}
				if _, err := host.Node.Submit(context.Background(), env, l.roomID); err != nil {
					bad.Add(1)
					errOnce.Do(func() { firstErr = err })
					continue
				}
				ok.Add(1)
			}
		}()
	}
	wg.Wait()
	return ok.Load(), bad.Load(), firstErr
}

// BenchmarkMirrorLag measures replication lag — A's acceptance (the
// record's received_at) to B's verified, durable storage (OnVerified) —
// at a paced write rate over ~10 s into 20 rooms, and the mirror's ingest
// rate against A's accept rate over the same steady window.
func BenchmarkMirrorLag(b *testing.B) {
	for _, rate := range []int{500, 2000} {
		b.Run(fmt.Sprintf("rate=%d", rate), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				benchLag(b, float64(rate), 10*time.Second, 20, 4)
			}
		})
	}
}

func benchLag(b *testing.B, rate float64, over time.Duration, nRooms, agents int) {
	probe := newLagProbe()
	a, m := startBenchPair(b, probe)
	defer a.Stop()
	defer m.Stop()
	if _, err := m.Mir.AddTarget(mirror.TargetAll, ""); err != nil {
		b.Fatal(err)
	}
	rooms := reactionRooms(b, a, "lag", nRooms, agents)
	want := map[string]int64{}
	for _, r := range rooms {
		probe.watch(r.id)
	}
	total := int(rate * over.Seconds())
	lanes := presign(a.Clock, rooms, total)
	for _, r := range rooms {
		res, _ := a.Node.Room(r.id, "")
		want[r.id] = res.Seq
	}
	testwait.Until(b, 20*time.Second, "B mirrors every room", func() bool { return caughtUp(m, want) })

	t0 := a.Clock.Ms()
	start := time.Now()
	acc, bad, err := drive(a, lanes, rate)
	wrote := time.Since(start)
	if bad > 0 {
		b.Fatalf("%d writes refused: %v", bad, err)
	}
	ids := make([]string, len(rooms))
	for i, r := range rooms {
		ids[i] = r.id
	}
	final := heads(b, a, ids)
	drained := testwait.Until(b, 60*time.Second, "B verified every record", func() bool { return caughtUp(m, final) })

	testwait.Until(b, 10*time.Second, "B reported every record", func() bool { return int64(len(probe.between(t0, math.MaxInt64, nil))) >= acc })
	samples := probe.between(t0, math.MaxInt64, nil)
	if int64(len(samples)) < acc {
		b.Fatalf("B verified %d of %d records", len(samples), acc)
	}
	fromRecv, fromAcc := lags(samples)
	// Rates over the steady part of the run (its first and last second
	// left out), counted by the same wall clock on both sides: A's accepts
	// in [w0, w1), B's verifications in the same window shifted by the
	// median lag, so that a mirror that keeps up scores 1.0.
	w0, w1 := start.Add(time.Second).UnixNano(), start.Add(wrote-time.Second).UnixNano()
	shift := int64(pct(fromAcc, 0.5) * 1e6)
	var inA, inB int
	for _, s := range samples {
		if s.accepted >= w0 && s.accepted < w1 {
			inA++
		}
		if s.verified >= w0+shift && s.verified < w1+shift {
			inB++
		}
	}
	secs := float64(w1-w0) / 1e9
	// Lag growth: median lag of the last steady second minus that of the
	// first. A mirror that does not keep up falls further behind.
	var first, last []float64
	for _, s := range samples {
		l := float64(s.verified-s.accepted) / 1e6
		switch {
		case s.accepted == 0:
		case s.accepted >= w0 && s.accepted < w0+1e9:
			first = append(first, l)
		case s.accepted >= w1-1e9 && s.accepted < w1:
			last = append(last, l)
		}
	}
	slices.Sort(first)
	slices.Sort(last)
	growth := pct(last, 0.5) - pct(first, 0.5)
	b.ReportMetric(pct(fromRecv, 0.50), "p50_ms")
	b.ReportMetric(pct(fromRecv, 0.99), "p99_ms")
	b.ReportMetric(fromRecv[len(fromRecv)-1], "max_ms")
	b.ReportMetric(pct(fromAcc, 0.50), "p50_accept_ms")
	b.ReportMetric(pct(fromAcc, 0.99), "p99_accept_ms")
	b.ReportMetric(float64(acc)/wrote.Seconds(), "accept/s")
	b.ReportMetric(float64(inA)/secs, "steady_accept/s")
	b.ReportMetric(float64(inB)/secs, "steady_ingest/s")
	b.ReportMetric(float64(inB)/float64(inA), "ingest/accept")
	b.ReportMetric(growth, "lag_growth_ms")
	b.ReportMetric(float64(m.Mir.Stats().Backfilled.Load()), "backfilled")
	b.Logf("rate %.0f/s: %d records in %v (%d rooms, %d agents), B drained %v after; lag p50 %.2f p99 %.2f max %.2f ms (received_at); "+
		"accept→verified p50 %.2f p99 %.2f ms; steady accept %.0f/s ingest %.0f/s ratio %.3f, lag growth %+.2f ms; backfilled %d",
		rate, acc, wrote.Round(time.Millisecond), len(rooms), len(lanes), drained.Round(time.Millisecond),
		pct(fromRecv, 0.5), pct(fromRecv, 0.99), fromRecv[len(fromRecv)-1], pct(fromAcc, 0.5), pct(fromAcc, 0.99),
		float64(inA)/secs, float64(inB)/secs, float64(inB)/float64(inA), growth, m.Mir.Stats().Backfilled.Load())
}

// BenchmarkMirrorCatchUp measures how fast a mirror 100,000 records behind
// catches up while live traffic continues: A holds a room of 100,000
// reactions before B targets it; B already mirrors another room of A that
// takes ~200 writes/s throughout. Catch-up is timed from AddTarget to the
// verified tip reaching A's seq.
func BenchmarkMirrorCatchUp(b *testing.B) {
	for i := 0; i < b.N; i++ {
		benchCatchUp(b, *catchUpBehind, 200)
	}
}

var catchUpBehind = flag.Int("catchup.behind", 100_000, "BenchmarkMirrorCatchUp: records the mirror starts behind")

// processCPU is this process's user+system CPU time.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func benchCatchUp(b *testing.B, behind int, liveRate float64) {
	probe := newLagProbe()
	a, m := startBenchPair(b, probe)
	defer a.Stop()
	defer m.Stop()
	big := reactionRooms(b, a, "backlog", 1, 16)[0]
	live := reactionRooms(b, a, "live", 1, 4)[0]
	probe.watch(big.id)
	probe.watch(live.id)

	start := time.Now()
	acc, bad, err := drive(a, presign(a.Clock, []loadRoom{big}, behind), 0)
	if bad > 0 {
		b.Fatalf("%d writes refused: %v", bad, err)
	}
	b.Logf("A accepted %d backlog records in %v (%.0f/s)", acc, time.Since(start).Round(time.Millisecond), float64(acc)/time.Since(start).Seconds())

	// Live traffic: B mirrors the live room while A keeps writing it.
	if _, err := m.Mir.AddTarget(mirror.TargetRoom, a.Node.RoomURL(live.id)); err != nil {
		b.Fatal(err)
	}
	liveLanes := presign(a.Clock, []loadRoom{live}, int(liveRate*120))
	stopLive := make(chan struct{})
	liveDone := make(chan struct{})
	var liveAcc atomic.Int64
	go func() {
		defer close(liveDone)
		// Paced like drive, and stopped when the catch-up is over.
		var wg sync.WaitGroup
		t0 := time.Now()
		for i, l := range liveLanes {
			wg.Add(1)
			go func() {
				defer wg.Done()
				step := time.Duration(float64(len(liveLanes)) / liveRate * float64(time.Second))
				offset := step * time.Duration(i) / time.Duration(len(liveLanes))
				for k, env := range l.envs {
					select {
					case <-stopLive:
						return
					case <-time.After(time.Until(t0.Add(offset + time.Duration(k)*step))):
					}
					if _, err := a.Node.Submit(context.Background(), env, l.roomID); err == nil {
						liveAcc.Add(1)
					}
				}
			}()
		}
		wg.Wait()
	}()
	time.Sleep(2 * time.Second) // the live room is mirrored and streaming

	res, _ := a.Node.Room(big.id, "")
	target := res.Seq
	t0ms := a.Clock.Ms()
	if f := os.Getenv("CATCHUP_PROF"); f != "" {
		pf, _ := os.Create(f)
		pprof.StartCPUProfile(pf)
		defer pprof.StopCPUProfile()
	}
	began, liveBefore, cpu0 := time.Now(), liveAcc.Load(), processCPU()
	if _, err := m.Mir.AddTarget(mirror.TargetRoom, a.Node.RoomURL(big.id)); err != nil {
		b.Fatal(err)
	}
	testwait.Until(b, 120*time.Second, "B caught up the backlog", func() bool {
		r, ok := m.Mir.Room(big.id, "")
		return ok && r.Tip() >= target
	})
	elapsed, t1ms, cpu := time.Since(began), a.Clock.Ms(), processCPU()-cpu0
	pprof.StopCPUProfile()
	liveDuring := liveAcc.Load() - liveBefore
	close(stopLive)
	<-liveDone
	liveFinal := heads(b, a, []string{live.id})
	testwait.Until(b, 30*time.Second, "B verified the live room", func() bool { return caughtUp(m, liveFinal) })

	liveLag, _ := lags(probe.between(t0ms, t1ms, map[string]bool{live.id: true}))
	rate := float64(target) / elapsed.Seconds()
	b.ReportMetric(rate, "catchup_records/s")
	b.ReportMetric(elapsed.Seconds(), "catchup_s")
	// Both nodes and the live writer share this process: its CPU per
	// record caught up is an upper bound of the mirror's.
	b.ReportMetric(float64(cpu.Microseconds())/float64(target), "process_cpu_µs/record")
	b.ReportMetric(float64(liveDuring)/elapsed.Seconds(), "live_accept/s")
	b.ReportMetric(pct(liveLag, 0.50), "live_p50_ms")
	b.ReportMetric(pct(liveLag, 0.99), "live_p99_ms")
	b.Logf("caught up %d records in %v (%.0f records/s) while A accepted %d live records (%.0f/s); "+
		"live lag during catch-up p50 %.1f p99 %.1f ms; backfilled %d",
		target, elapsed.Round(time.Millisecond), rate, liveDuring, float64(liveDuring)/elapsed.Seconds(),
		pct(liveLag, 0.5), pct(liveLag, 0.99), m.Mir.Stats().Backfilled.Load())
}
