//go:build e2e

package hostapi_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/adpnode/adpnode/adp/identity"
	"github.com/adpnode/adpnode/hostapi"
	"github.com/adpnode/adpnode/internal/adptest"
	"github.com/adpnode/adpnode/node"
)

// BenchmarkSSEFanout measures live fan-out over real HTTP on 127.0.0.1:
// R rooms with S SSE subscribers each, records written (pre-signed
// reaction.create signals, rates off, in-memory store: the write path is
// not what is measured) while every subscriber reads its stream. Writers
// keep at most 256 records of a room ahead of its slowest subscriber, so
// the figure is the sustainable rate without slow-consumer drops.
// Reported: delivered records/s, p99 and p50 delivery lag (the record's
// received_at to the moment its event is read by the subscriber, ms
// resolution), bytes read per subscriber and per delivery, and the ratio
// to a baseline measured in the same run: the same number of raw loopback
// TCP connections each written the same frames, one write per frame.
//
//	go test ./hostapi -run '^$' -bench SSEFanout -benchtime 1x
//
// -fanout.rate R paces the writers: together they offer R records per
// second (all rooms), record n at start + n/R, so the lag can be read at
// a set load and not only at saturation; a writer behind the schedule
// posts at once, so records/s below R says the host did not keep up.
// 0 (the default) writes as fast as flow control lets.
//
// Writers run in the benchmark process, so on a small machine they share
// the CPUs with the host.
var (
	fanoutFlush = flag.Duration("fanout.flush", hostapi.DefaultSSEFlushInterval, "BenchmarkSSEFanout: the host's SSEFlushInterval")
	fanoutRate  = flag.Float64("fanout.rate", 0, "BenchmarkSSEFanout: records per second the writers offer in all (0: as fast as possible)")
)

func BenchmarkSSEFanout(b *testing.B) {
	for _, c := range []struct{ rooms, subs, records int }{
		{1, 10, 5000}, {1, 100, 3000}, {1, 1000, 1000}, {1000, 10, 20},
	} {
		b.Run(fmt.Sprintf("rooms=%d/subs=%d", c.rooms, c.subs), func(b *testing.B) {
			// One end of every stream is in this process, the other in
			// the child: each needs a file per stream.
			if need := uint64(c.rooms*c.subs + 1000); !raiseFileLimit(need) {
				b.Skipf("needs %d open files per process (one end of each of %d streams); the hard RLIMIT_NOFILE is lower", need, c.rooms*c.subs)
			}
			for range b.N {
				benchFanout(b, c.rooms, c.subs, c.records)
			}
		})
	}
}

type fanRoom struct {
	id   string
	pre  [][][]byte // per writer agent
	sent atomic.Int64
	slow atomic.Int64 // events read by the room's slowest subscriber
}

func benchFanout(b *testing.B, rooms, subs, records int) {
	b.StopTimer()
	h := adptest.StartHost(b, node.Config{Rates: benchRatesOff(), Now: time.Now, Log: slog.New(slog.DiscardHandler), SSEBuffer: 1024})
	// The same node behind a second server with the flush interval under
	// test (the node's origin stays h.URL: tokens name it).
	api := hostapi.New(h.Node, hostapi.Options{Heartbeat: 10 * time.Second, SSEFlushInterval: *fanoutFlush})
	srv := httptest.NewServer(api.Handler())
	defer srv.Close()
	defer h.Node.DrainStreams()
	base := srv.URL
	tr := &http.Transport{MaxIdleConnsPerHost: 128, MaxIdleConns: 128, MaxConnsPerHost: 0}
	hc := &http.Client{Transport: tr}
	defer tr.CloseIdleConnections()
	now := func() int64 { return time.Now().UnixMilli() }

	// Rooms, each created by its own agent, with its signals pre-signed.
	rs := make([]*fanRoom, rooms)
	agents := make([]*adptest.Agent, rooms)
	for i := range rs {
		a := adptest.NewAgent(fmt.Sprintf("fan-%d", i))
		env, err := identity.Sign(a.Key, a.Event(now(), "room.create", "", 0, "", h.RoomPayload("public")))
		if err != nil {
			b.Fatal(err)
		}
		resp, err := hc.Post(base+"/v1/rooms", "application/json", bytes.NewReader(env.Raw))
		if err != nil {
			b.Fatal(err)
		}
		var c struct{ ID, Hash string }
		json.NewDecoder(resp.Body).Decode(&c)
		resp.Body.Close()
		if resp.StatusCode != http.StatusCreated {
			b.Fatalf("room.create: HTTP %d", resp.StatusCode)
		}
		r := &fanRoom{id: c.ID}
		// One room: several writer agents (members) so records pipeline;
		// many rooms: the creator writes, rooms give the parallelism.
		ws := []*adptest.Agent{a}
		if rooms == 1 {
			head := adptest.Head{Seq: 1, Hash: c.Hash}
			for j := 1; j < 16; j++ {
				m := adptest.NewAgent(fmt.Sprintf("fan-%d-w%d", i, j))
				resp, err := hc.Post(h.URL+"/v1/rooms/"+c.ID, "application/json", bytes.NewReader(
					m.Envelope(now(), "room.join", c.ID, head.Seq, head.Hash, map[string]any{"role": "speaker"})))
				if err != nil {
					b.Fatal(err)
				}
				json.NewDecoder(resp.Body).Decode(&head)
				resp.Body.Close()
				if resp.StatusCode != http.StatusCreated {
					b.Fatalf("room.join: HTTP %d", resp.StatusCode)
				}
				ws = append(ws, m)
			}
		}
		for k, wa := range ws {
			var pre [][]byte
			for n := k; n < records; n += len(ws) {
				pre = append(pre, wa.Envelope(now(), "reaction.create", c.ID, 1, c.Hash,
					map[string]any{"event_id": env.Hash, "reaction": "agree"}))
			}
			r.pre = append(r.pre, pre)
		}
		rs[i], agents[i] = r, a
	}

	// Subscribers: S live streams per room (the creator's token; the node
	// does not limit streams per agent), read by a child process (this
	// test binary, TestFanoutSubscriberProcess): the host's CPU is then
	// this process's alone, and 1,000 × 10 streams fit in two processes'
	// open-file limits where both ends in one process would not.
	cfg := fanoutConfig{URL: base, Subs: subs, Records: records}
	for i, r := range rs {
		cfg.Rooms = append(cfg.Rooms, fanoutRoom{ID: r.id, Token: agents[i].Token(h.URL, now())})
	}
	child := startFanoutChild(b, cfg, rs)
	defer child.kill()
	if err := child.waitReady(); err != nil {
		b.Fatal(err)
	}
	subErr := &child.err

	// Writers: each writer agent of a room posts its signals in order; up
	// to 64 goroutines, each round-robin over its (room, agent) pairs.
	type job struct {
		r   *fanRoom
		pre [][]byte
	}
	var jobs []job
	for _, r := range rs {
		for _, pre := range r.pre {
			jobs = append(jobs, job{r, pre})
		}
	}
	writers := min(len(jobs), 64)
	// pace waits for the next slot of the -fanout.rate schedule, shared
	// by all writers (a schedule for the offered load, not a
	// synchronisation: flow control below is what keeps order).
	var tickets atomic.Int64
	var start time.Time
	pace := func() {
		if *fanoutRate <= 0 {
			return
		}
		at := start.Add(time.Duration(float64(tickets.Add(1)-1) / *fanoutRate * float64(time.Second)))
		if d := time.Until(at); d > 0 {
			time.Sleep(d)
		}
	}
	var wg sync.WaitGroup
	var wErr atomic.Value
	cpu0 := procCPUTime()
	b.StartTimer()
	start = time.Now()
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []job
			for i := w; i < len(jobs); i += writers {
				mine = append(mine, jobs[i])
			}
			for k := 0; ; k++ {
				more := false
				for _, j := range mine {
					if k >= len(j.pre) {
						continue
					}
					more = true
					r := j.r
					for r.sent.Load()-r.slow.Load() >= 256 { // flow control, not a timing
						if subErr.Load() != nil {
							return
						}
						time.Sleep(200 * time.Microsecond)
					}
					pace()
					resp, err := hc.Post(base+"/v1/rooms/"+r.id, "application/json", bytes.NewReader(j.pre[k]))
					if err != nil {
						wErr.CompareAndSwap(nil, err.Error())
						return
					}
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != http.StatusCreated {
						wErr.CompareAndSwap(nil, fmt.Sprintf("write: HTTP %d", resp.StatusCode))
						return
					}
					r.sent.Add(1)
				}
				if !more {
					return
				}
			}
		}()
	}
	wg.Wait()
	if e := wErr.Load(); e != nil {
		b.Fatal(e)
	}
	res, err := child.wait()
	el := time.Since(start)
	b.StopTimer()
	cpu := procCPUTime() - cpu0
	if err != nil {
		b.Fatal(err)
	}
	deliveries := int64(rooms * subs * records)
	rate := float64(deliveries) / el.Seconds()
	frame := float64(res.Bytes) / float64(deliveries)
	b.ReportMetric(rate, "deliveries/s")
	b.ReportMetric(float64(rooms*records)/el.Seconds(), "records/s")
	if *fanoutRate > 0 {
		b.ReportMetric(*fanoutRate, "offered-records/s")
	}
	b.ReportMetric(res.P50, "p50-lag-ms")
	b.ReportMetric(res.P99, "p99-lag-ms")
	b.ReportMetric(float64(res.Bytes)/float64(rooms*subs), "bytes/sub")
	b.ReportMetric(frame, "bytes/delivery")
	if cpu > 0 {
		// This process: the host and the writers (the subscribers are
		// the child's, reported apart).
		b.ReportMetric(float64(cpu.Microseconds())/float64(deliveries), "host-cpu-µs/delivery")
	}
	b.ReportMetric(float64(res.CPU.Microseconds())/float64(deliveries), "sub-cpu-µs/delivery")
	// The baseline: raw loopback TCP, as many connections, frames of the
	// same size, at most 1,000,000 frames in all.
	conns := min(rooms*subs, 1000)
	per := max(min(int(deliveries)/conns, 1_000_000/conns), 1)
	tcp := bareFanout(b, conns, per, int(frame))
	b.ReportMetric(tcp, "tcp-baseline-frames/s")
	b.ReportMetric(rate/tcp, "ratio-to-tcp")
}

// receivedAt extracts received_at (ms) from a record's data line.
func receivedAt(line []byte) int64 {
	const key = `"received_at":`
	i := bytes.Index(line, []byte(key))
	if i < 0 {
		return 0
	}
	j := i + len(key)
	k := j
	for k < len(line) && line[k] >= '0' && line[k] <= '9' {
		k++
	}
	v, _ := strconv.ParseInt(string(line[j:k]), 10, 64)
	return v
}

// bareFanout writes per frames of size bytes to each of conns loopback
// TCP connections (one goroutine and one write per frame per connection,
// as an SSE stream that is not behind) and returns frames read per second.
func bareFanout(b *testing.B, conns, per, size int) float64 {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	frame := bytes.Repeat([]byte("x"), max(size-2, 1))
	frame = append(frame, '\n', '\n')
	var servers, readers sync.WaitGroup
	startBare := make(chan struct{})
	go func() {
		for range conns {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			servers.Add(1)
			go func() {
				defer servers.Done()
				defer c.Close()
				<-startBare
				for range per {
					if _, err := c.Write(frame); err != nil {
						return
					}
				}
			}()
		}
	}()
	cs := make([]net.Conn, conns)
	for i := range cs {
		if cs[i], err = net.Dial("tcp", ln.Addr().String()); err != nil {
			b.Fatal(err)
		}
	}
	t0 := time.Now()
	close(startBare)
	for _, c := range cs {
		readers.Add(1)
		go func() {
			defer readers.Done()
			defer c.Close()
			buf := make([]byte, 64<<10)
			want := per * len(frame)
			for got := 0; got < want; {
				n, err := c.Read(buf)
				got += n
				if err != nil {
					return
				}
			}
		}()
	}
	readers.Wait()
	el := time.Since(t0)
	servers.Wait()
	return float64(conns*per) / el.Seconds()
}

// procCPUTime is this process's user+system CPU time.
func procCPUTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
