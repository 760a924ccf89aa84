package hostlog_test

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"path/filepath"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/adpnode/adpnode/adp/tlogproof"
	"github.com/adpnode/adpnode/hostlog"
	"github.com/adpnode/adpnode/internal/adptest"
	"github.com/adpnode/adpnode/node"
)

// BenchmarkCoveredLatency: a record every 2 ms is appended; the time from
// Append until a published checkpoint covers it, p50 and p99, with the
// daemon's defaults (1 s checkpoint interval, 50 ms batches).
//
//	go test ./hostlog -run '^$' -bench CoveredLatency -benchtime 2000x
func BenchmarkCoveredLatency(b *testing.B) {
	e := newEnvWith(b, 0)
	appended := make([]time.Time, b.N)
	lat := make([]time.Duration, 0, b.N)
	var mu sync.Mutex
	done := make(chan struct{})
	go func() { // the poller: when the checkpoint grows, stamp what it covers
		defer close(done)
		covered := uint64(0)
		for covered < uint64(b.N) {
			_, cp, err := e.log.Checkpoint(context.Background())
			if err == nil && cp.Size > covered {
				now := time.Now()
				mu.Lock()
				for i := covered; i < cp.Size; i++ {
					lat = append(lat, now.Sub(appended[i]))
				}
				mu.Unlock()
				covered = cp.Size
			}
			time.Sleep(time.Millisecond)
		}
	}()
	b.ResetTimer()
	for i := range b.N {
		mu.Lock()
		appended[i] = time.Now()
		mu.Unlock()
		e.src.accept("r")
		time.Sleep(2 * time.Millisecond)
	}
	<-done
	b.StopTimer()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	b.ReportMetric(float64(lat[len(lat)/2].Milliseconds()), "p50_ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Milliseconds()), "p99_ms")
}

// newEnvWith is newEnv with a checkpoint interval (0: the default).
func newEnvWith(tb testing.TB, cpInt time.Duration) *env {
	_, key, _ := ed25519.GenerateKey(nil)
	e := &env{t: tb, dir: tb.TempDir(), key: key, src: newRooms(), cpInt: cpInt}
	e.open()
	tb.Cleanup(func() { e.close() })
	return e
}

// BenchmarkWritePathHostLog: durable message.create writes on a node
// without and with the host log attached, in the same run. The log's cost
// on the write path is its listener (a base64 decode and a queue append);
// the "with" run also reports how long after the last write the log
// published a checkpoint covering every record.
//
//	go test ./hostlog -run '^$' -bench WritePathHostLog -benchtime 3000x -count 3
func BenchmarkWritePathHostLog(b *testing.B) {
	for _, with := range []bool{false, true} {
		name := "off"
		if with {
			name = "on"
		}
		b.Run(name, func(b *testing.B) { benchWritePath(b, with) })
	}
}

func benchWritePath(b *testing.B, with bool) {
	dir := b.TempDir()
	n, err := node.Open(node.Config{DataDir: dir, PublicURL: "http://127.0.0.1:1", Log: slog.New(slog.DiscardHandler),
		Rates: node.Rates{Message: 1 << 20, Signal: 1 << 20, Control: 1 << 20, MessageCeiling: 1 << 20, SignalCeiling: 1 << 20, ControlCeiling: 1 << 20, AgentStatus: 60}})
	if err != nil {
		b.Fatal(err)
	}
	defer n.Close()
	var l *hostlog.Log
	if with {
		_, key, _ := ed25519.GenerateKey(nil)
		l, err = hostlog.Open(hostlog.Config{Dir: filepath.Join(dir, hostlog.Dir), DB: n.DB(), Key: key, Origin: "127.0.0.1:1/adp-log",
			Source: n, Feed: n, Log: slog.New(slog.DiscardHandler)})
		if err != nil {
			b.Fatal(err)
		}
		defer l.Close()
	}
	alice := adptest.NewAgent("alice")
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
			if _, cp, err := l.Checkpoint(context.Background()); err == nil && cp.Size == uint64(b.N)+1 {
				break
			}
			if time.Since(start) > time.Minute {
				b.Fatal("log did not catch up")
			}
			time.Sleep(time.Millisecond)
		}
		b.ReportMetric(float64(time.Since(start).Milliseconds()), "covered_after_ms")
	}
}

// BenchmarkIntegration: how fast tessera's POSIX driver integrates a
// backlog (the bound on a sustained accept rate the log keeps up with),
// with the daemon's settings and with the tessera options that could
// change it: the batch age, the checkpoint interval (the time measured
// ends at a published checkpoint, so a longer interval adds its wait),
// and fewer leaves per round (journal transaction and tessera batch). Each iteration opens a
// fresh log on a synced Badger, appends 32,768 leaves at once and waits
// until a published checkpoint covers them all; run with -count to
// interleave the variants.
//
//	go test ./hostlog -run '^$' -bench Integration -benchtime 1x -count 3
func BenchmarkIntegration(b *testing.B) {
	const leaves = 32768
	for _, v := range []struct {
		name  string
		age   time.Duration
		cpInt time.Duration
		chunk int
	}{
		{"default", 0, 0, 0},
		{"age=5ms", 5 * time.Millisecond, 0, 0},
		{"checkpoint=5s", 0, 5 * time.Second, 0},
		{"round=1024", 0, 0, 1024},
	} {
		b.Run(v.name, func(b *testing.B) {
			if v.chunk != 0 {
				defer hostlog.SetChunkForTest(v.chunk)()
			}
			var total time.Duration
			for range b.N {
				b.StopTimer()
				dir := b.TempDir()
				db, err := badger.Open(node.BadgerOptions(filepath.Join(dir, "db")))
				if err != nil {
					b.Fatal(err)
				}
				_, key, _ := ed25519.GenerateKey(nil)
				src := newRooms()
				l, err := hostlog.Open(hostlog.Config{Dir: filepath.Join(dir, hostlog.Dir), DB: db, Key: key, Origin: "127.0.0.1:1/adp-log",
					Source: src, Feed: src, BatchMaxAge: v.age, CheckpointInterval: v.cpInt, Log: slog.New(slog.DiscardHandler)})
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				start := time.Now()
				for i := range leaves {
					src.accept(fmt.Sprintf("r%d", i%64))
				}
				for {
					if _, cp, err := l.Checkpoint(context.Background()); err == nil && cp.Size == leaves {
						break
					}
					if time.Since(start) > 5*time.Minute {
						b.Fatal("log did not catch up")
					}
					time.Sleep(time.Millisecond)
				}
				total += time.Since(start)
				b.StopTimer()
				l.Close()
				db.Close()
			}
			b.ReportMetric(float64(leaves*b.N)/total.Seconds(), "leaves/s")
		})
	}
}

// BenchmarkBurstCoveredLatency: bursts of 1,100 records at once (50 rooms,
// 22 durable message.create writes each, by 50 concurrent writers) on a
// node with the host log at the daemon's defaults; the time from a
// write's acceptance (Submit returned) until a published checkpoint
// covers its record, p50, p99 and max over every record of every burst.
// Bursts are spaced by a random pause so that they fall at every phase of
// the log's round and checkpoint timers.
//
//	go test ./hostlog -run '^$' -bench BurstCoveredLatency -benchtime 20x
func BenchmarkBurstCoveredLatency(b *testing.B) {
	const rooms, perRoom = 50, 22
	dir := b.TempDir()
	n, err := node.Open(node.Config{DataDir: dir, PublicURL: "http://127.0.0.1:1", Log: slog.New(slog.DiscardHandler), Rates: node.NoRates()})
	if err != nil {
		b.Fatal(err)
	}
	defer n.Close()
	_, key, _ := ed25519.GenerateKey(nil)
	l, err := hostlog.Open(hostlog.Config{Dir: filepath.Join(dir, hostlog.Dir), DB: n.DB(), Key: key, Origin: "127.0.0.1:1/adp-log",
		Source: n, Feed: n, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	type chain struct {
		agent      *adptest.Agent
		id, hash   string
		head       int64
		accepted   []time.Time
		recordHash []string
	}
	chains := make([]*chain, rooms)
	for i := range chains {
		c := &chain{agent: adptest.NewAgent(fmt.Sprint("a", i))}
		now := time.Now().UnixMilli()
		res, err := n.Submit(context.Background(), c.agent.Envelope(now, "room.create", "", 0, "", map[string]any{"topic": "burst", "visibility": "public",
			"start_time": now, "end_time": now + 3_600_000}), "")
		if err != nil {
			b.Fatal(err)
		}
		c.id, c.head, c.hash = res.Record.RoomID, res.Record.Seq, res.Record.Hash
		chains[i] = c
	}
	var lat []time.Duration
	rnd := rand.New(rand.NewPCG(1, 2))
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		time.Sleep(time.Duration(rnd.Int64N(int64(1500 * time.Millisecond)))) // a random phase
		b.StartTimer()
		type seen struct {
			at   time.Time
			size uint64
		}
		var (
			sizes  []seen
			stop   = make(chan struct{})
			polled = make(chan struct{})
		)
		go func() { // the poller: every growth of the published checkpoint, stamped
			defer close(polled)
			for done := false; !done; {
				select {
				case <-stop:
					done = true // one more look: the waiter saw the last growth first
				case <-time.After(time.Millisecond):
				}
				if _, cp, err := l.Checkpoint(context.Background()); err == nil && (len(sizes) == 0 || cp.Size > sizes[len(sizes)-1].size) {
					sizes = append(sizes, seen{time.Now(), cp.Size})
				}
			}
		}()
		var wg sync.WaitGroup
		for _, c := range chains {
			c.accepted, c.recordHash = c.accepted[:0], c.recordHash[:0]
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range perRoom {
					ev := c.agent.Event(time.Now().UnixMilli(), "message.create", c.id, c.head, c.hash, map[string]any{"content_type": "text/plain", "content": "hi"})
					r, err := n.Submit(context.Background(), c.agent.Sign(ev), c.id)
					if err != nil {
						b.Error(err)
						return
					}
					c.accepted = append(c.accepted, time.Now())
					c.recordHash = append(c.recordHash, r.Record.Hash)
					c.head, c.hash = r.Record.Seq, r.Record.Hash
				}
			}()
		}
		wg.Wait()
		// Wait until every record of the burst is covered.
		var maxIdx uint64
		for _, c := range chains {
			for _, h := range c.recordHash {
				leaf, _ := tlogproof.RecordLeaf(h)
				for {
					idx, ok, err := l.IndexOf(leaf)
					if err != nil {
						b.Fatal(err)
					}
					if ok {
						maxIdx = max(maxIdx, idx)
						break
					}
					time.Sleep(time.Millisecond)
				}
			}
		}
		deadline := time.Now().Add(time.Minute)
		for {
			if _, cp, err := l.Checkpoint(context.Background()); err == nil && cp.Size > maxIdx {
				break
			}
			if time.Now().After(deadline) {
				b.Fatal("no checkpoint covers the burst")
			}
			time.Sleep(time.Millisecond)
		}
		close(stop)
		<-polled
		b.StopTimer()
		for _, c := range chains {
			for i, h := range c.recordHash {
				leaf, _ := tlogproof.RecordLeaf(h)
				idx, _, _ := l.IndexOf(leaf)
				j := sort.Search(len(sizes), func(j int) bool { return sizes[j].size > idx })
				if j == len(sizes) {
					b.Fatalf("record at %d never seen covered", idx)
				}
				lat = append(lat, sizes[j].at.Sub(c.accepted[i]))
			}
		}
		b.StartTimer()
	}
	b.StopTimer()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	b.ReportMetric(float64(lat[len(lat)/2].Milliseconds()), "p50_ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Milliseconds()), "p99_ms")
	b.ReportMetric(float64(lat[len(lat)-1].Milliseconds()), "max_ms")
}
