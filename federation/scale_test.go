//go:build e2e

package federation_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/adpnode/adpnode/adp/room"
	"github.com/adpnode/adpnode/directory"
	"github.com/adpnode/adpnode/federation"
	"github.com/adpnode/adpnode/internal/fedtest"
	"github.com/adpnode/adpnode/internal/testwait"
)

// The scale tests run k ≥ 30 federated nodes in this process, connected
// as a sparse random graph (a ring plus k chords: degree about 4, as a
// node's gossip mesh would be), and fill their directories with signed
// announcements built directly (each node signs rooms of its own that no
// agent wrote; docs/federation.md, "Scale").

// scaleEdges is a ring over k nodes plus k chords, the same for a seed.
func scaleEdges(k int, seed uint64) [][2]int {
	r := rand.New(rand.NewPCG(seed, 17))
	seen := map[[2]int]bool{}
	var out [][2]int
	add := func(a, b int) {
		if a == b {
			return
		}
		if a > b {
			a, b = b, a
		}
		if e := [2]int{a, b}; !seen[e] {
			seen[e] = true
			out = append(out, e)
		}
	}
	for i := range k {
		add(i, (i+1)%k)
	}
	for len(out) < 2*k {
		add(r.IntN(k), r.IntN(k))
	}
	return out
}

// scaleRoom is the summary of node n's synthetic room i, version v.
func scaleRoom(p *fedtest.Peer, n, i, v int) directory.Entry {
	now := p.Clock.Ms()
	id := fmt.Sprintf("sc%02d%016d", n, i)
	return directory.Entry{ID: id, URL: p.URL + "/v1/rooms/" + id, Host: strings.TrimPrefix(p.URL, "http://"),
		Status: room.StatusActive, Topic: fmt.Sprintf("scale room %d of node %d, version %d: a topic of ordinary length", i, n, v),
		Visibility: room.Public, StartTime: now, EndTime: now + 3_600_000, Members: 3, Seq: int64(10 + v), LastActive: now}
}

// scaleNet is a running scale federation.
type scaleNet struct {
	peers []*fedtest.Peer
	edges [][2]int
}

// announce publishes rooms [from, to) of every node, version v, each node
// at most 256 per 200 ms (the announce loop's pace), all nodes at once.
func (s *scaleNet) announce(tb testing.TB, from, to, v int) {
	var wg sync.WaitGroup
	for n, p := range s.peers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := from; i < to; i++ {
				if (i-from)%256 == 255 {
					time.Sleep(200 * time.Millisecond)
				}
				federation.AnnounceSummary(p.Fed, scaleRoom(p, n, i, v))
			}
		}()
	}
	wg.Wait()
}

// holds reports whether every peer but the author holds each node's rooms
// [0, n) (the index holds other hosts' rooms; its own are its node's).
func (s *scaleNet) holds(n int) bool {
	for _, p := range s.peers {
		if p.Index.Len() < n*(len(s.peers)-1) {
			return false
		}
	}
	return true
}

// newRoom announces one new room on node n and returns how long until
// every node holds it.
func (s *scaleNet) newRoom(tb testing.TB, n, i int, within time.Duration) time.Duration {
	tb.Helper()
	p := s.peers[n]
	sum := scaleRoom(p, n, i, 0)
	start := time.Now()
	federation.AnnounceSummary(p.Fed, sum)
	for time.Since(start) < within {
		all := true
		for j, q := range s.peers {
			if j == n {
				continue
			}
			if _, ok := q.Index.Room(sum.ID, q.Clock.Ms()); !ok {
				all = false
				break
			}
		}
		if all {
			return time.Since(start)
		}
		time.Sleep(5 * time.Millisecond)
	}
	tb.Fatalf("room %s of node %d not everywhere within %v", sum.ID, n, within)
	return 0
}

// warm marks every node's host binding verified at every other (as in a
// federation that has run for a while: one HTTP check per host, long
// ago), makes every node announce one room and waits until all hold all.
func (s *scaleNet) warm(tb testing.TB) {
	tb.Helper()
	for _, p := range s.peers {
		for _, q := range s.peers {
			if p != q {
				federation.MarkVerified(p.Fed, q.Fed.Binding())
			}
		}
		p.Index.Reverify()
	}
	s.announce(tb, 0, 1, 0)
	deadline := time.Now().Add(60 * time.Second)
	for !s.holds(1) {
		if time.Now().After(deadline) {
			s.dump(tb)
			tb.Fatalf("not every node holds every node's first room")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (s *scaleNet) dump(tb testing.TB) {
	for _, p := range s.peers {
		st := p.Fed.Stats()
		tb.Logf("%s: %d entries, %d index peers; accepted %d rejected %d ignored %d rate-limited %d over-cap %d published %d", p.Name, p.Index.Len(),
			p.Fed.IndexPeers(), st.Accepted.Load(), st.Rejected.Load(), st.Ignored.Load(), st.RateLimited.Load(), st.OverCap.Load(), st.Published.Load())
	}
}

// TestScale30Convergence: 30 nodes in the sparse scale graph, every host
// binding verified (a federation that has run a while); every node's
// first room reaches all 29 others, then 20 new rooms, one after the
// other from nodes spread over the graph, each reach all 29 others. The
// times are logged, not asserted (BenchmarkScaleNewRoom measures the
// ≤ 2 s acceptance figure without the race detector); the bounds asserted
// are delivery and the goroutines per node. ADP_SCALE_NODES changes k.
func TestScale30Convergence(t *testing.T) {
	if testing.Short() {
		t.Skip("30 in-process nodes: skipped in -short mode")
	}
	k := envInt("ADP_SCALE_NODES", 30)
	g0 := runtime.NumGoroutine()
	start := time.Now()
	s := &scaleNet{edges: scaleEdges(k, 1)}
	s.peers = networkWith(t, k, s.edges, scaleOptions())
	netUp := time.Since(start)
	s.warm(t)
	up := time.Since(start)
	perNode := (runtime.NumGoroutine() - g0) / k
	ds := s.newRooms(t, 20, 1, 30*time.Second)
	t.Logf("%d nodes, %d edges: up in %v, warm in %v more, %d goroutines per node; 20 new rooms everywhere in p50 %v, p99 %v (min %v)",
		k, len(s.edges), netUp.Round(time.Millisecond), (up - netUp).Round(time.Millisecond), perNode, quantile(ds, 0.5).Round(time.Millisecond),
		quantile(ds, 0.99).Round(time.Millisecond), slices.Min(ds).Round(time.Millisecond))
	// A node's goroutines: libp2p (swarm, transports, identify, gossipsub
	// per peer), the federation's loops, the node's, HTTP, Badger.
	if perNode > 600 {
		t.Fatalf("%d goroutines per node, want at most 600", perNode)
	}
}

// BenchmarkScale: k nodes (ADP_SCALE_NODES, default 30) in the scale
// graph whose directories hold ADP_SCALE_ROOMS rooms (default 10,000:
// 30 directories of 100,000 would need ≈ 11 GB here) of synthetic
// verified hosts, injected into every index as if gossiped long ago (a
// burst of that many announcements through 30 in-process nodes takes
// longer than the benchmark is worth). Reports: RSS per node, new-room
// convergence (p50/p99 of 24), idle bytes per node over 30 s (production
// anti-entropy period), bytes per node under 100 room changes/s, and
// catch-up bytes of a node away during N changes at two N (docs/federation.md,
// "Bandwidth model").
func BenchmarkScale(b *testing.B) {
	k, rooms := envInt("ADP_SCALE_NODES", 30), envInt("ADP_SCALE_ROOMS", 10_000)
	for range b.N {
		benchScale(b, k, rooms)
	}
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// rssBytes is this process's resident set size.
func rssBytes() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}

func benchScale(b *testing.B, k, rooms int) {
	runtime.GC()
	rss0 := rssBytes()
	s := &scaleNet{edges: scaleEdges(k, 1)}
	s.peers = networkWith(b, k, s.edges, scaleOptions())
	defer stopAll(s.peers)
	s.warm(b)
	runtime.GC()
	rssUp := rssBytes()
	start := time.Now()
	hosts, entries := synthRooms(b, rooms, s.peers[0].Clock.Ms())
	trustSynth(s.peers, hosts)
	inject(b, s.peers, entries)
	b.Logf("%d nodes: %d rooms signed and put in every directory in %v", k, rooms, time.Since(start).Round(time.Millisecond))
	runtime.GC()
	rss := rssBytes()
	b.Logf("RSS: %d MiB before, %d MiB with %d idle nodes, %d MiB with %d rooms in every directory: %.1f MiB per node (%.1f MiB of it the directory)",
		rss0>>20, rssUp>>20, k, rss>>20, rooms, float64(rss-rss0)/float64(k)/(1<<20), float64(rss-rssUp)/float64(k)/(1<<20))
	b.ReportMetric(float64(rss-rss0)/float64(k)/(1<<20), "RSS-MiB/node")
	ds := s.newRooms(b, 24, 1, 30*time.Second)
	b.Logf("24 new rooms everywhere in p50 %v, p99 %v", quantile(ds, 0.5).Round(time.Millisecond), quantile(ds, 0.99).Round(time.Millisecond))
	b.ReportMetric(ms(quantile(ds, 0.5)), "new-room-p50-ms")
	b.ReportMetric(ms(quantile(ds, 0.99)), "new-room-p99-ms")
	per := 25 // rooms 0..24 of some nodes exist now; changes go to rooms 1..per-1

	// Idle: 30 s with nothing changing (the anti-entropy timer runs at
	// its production period, 2 min ±25 %, so a 30 s window holds a
	// quarter of the sessions on average).
	time.Sleep(3 * time.Second)
	counters := fedCounters(s.peers)
	w := bwBegin(counters)
	w.bwEnd(counters, 30*time.Second)
	idle, idleMax := meanMax(w.rates())
	b.Logf("idle: %.0f B/node/s mean, %.0f max (in+out, %.0f s)", idle, idleMax, w.secs())
	b.ReportMetric(idle, "idle-B/node/s")

	// 100 room changes/s for 30 s, spread over the nodes.
	const rate, secs = 100, 30
	w = bwBegin(counters)
	tick := time.NewTicker(time.Second / rate)
	for c := 0; c < rate*secs; c++ {
		<-tick.C
		n := c % k
		federation.AnnounceSummary(s.peers[n].Fed, scaleRoom(s.peers[n], n, 1+(c/k)%(per-1), 1+c/(k*(per-1))))
	}
	tick.Stop()
	w.bwEnd(counters, secs*time.Second)
	busy, busyMax := meanMax(w.rates())
	b.Logf("%d changes/s: %.0f B/node/s mean, %.0f max (in+out, %.0f s); %.0f B per change per node", rate, busy, busyMax, w.secs(), (busy-idle)/rate)
	b.ReportMetric(busy, "busy-B/node/s")

	// Catch-up: node c leaves, N rooms change elsewhere, c comes back.
	for _, n := range []int{100, 1000} {
		bytes, took := s.catchUp(b, k-1, n, 2+n)
		b.Logf("catch-up after %d changes: %.0f B in+out, %v (%.0f B/change)", n, bytes, took.Round(time.Millisecond), bytes/float64(n))
		b.ReportMetric(bytes, fmt.Sprintf("catchup%d-B", n))
	}
}

// catchUp disconnects node c, changes n rooms of other nodes (version
// v), reconnects c to its neighbours and returns c's bytes until it
// holds every change.
func (s *scaleNet) catchUp(b *testing.B, c, n, v int) (float64, time.Duration) {
	p := s.peers[c]
	var nbrs []*fedtest.Peer
	for _, e := range s.edges {
		if e[0] == c {
			nbrs = append(nbrs, s.peers[e[1]])
		} else if e[1] == c {
			nbrs = append(nbrs, s.peers[e[0]])
		}
	}
	for _, q := range nbrs {
		p.Fed.Disconnect(q.Fed.PeerID())
	}
	testwait.Until(b, 10*time.Second, "the condition", func() bool { return len(p.Fed.Peers()) == 0 })
	type want struct {
		id    string
		topic string
	}
	var changed []want
	for i := range n {
		a := i % (len(s.peers) - 1)
		sum := scaleRoom(s.peers[a], a, 1+i/(len(s.peers)-1), v)
		federation.AnnounceSummary(s.peers[a].Fed, sum)
		changed = append(changed, want{sum.ID, sum.Topic})
		if i%256 == 255 {
			time.Sleep(200 * time.Millisecond)
		}
	}
	time.Sleep(2 * time.Second) // the others' gossip settles
	bwSweep()
	in0, out0 := p.Fed.Bandwidth()
	start := time.Now()
	for _, q := range nbrs {
		fedtest.Connect(b, p, q)
	}
	testwait.Until(b, 60*time.Second, "the condition", func() bool {
		for _, w := range changed {
			if e, ok := p.Index.Room(w.id, p.Clock.Ms()); !ok || e.Room.Topic != w.topic {
				return false
			}
		}
		return true
	})
	took := time.Since(start)
	time.Sleep(3 * time.Second) // on-connect sessions finish
	bwSweep()
	in1, out1 := p.Fed.Bandwidth()
	return float64(in1 - in0 + out1 - out0), took
}

// scaleOptions are benchOptions without the DHT: on 127.0.0.1 AutoNAT
// never finds a node public, so every node is a DHT client and the DHT
// finds nobody (TestDiscovery* test it); the scale graph is the edges.
func scaleOptions() fedtest.Options {
	o := benchOptions()
	o.Configure = func(_ string, c *federation.Config) { c.DHT = federation.DHTOff }
	return o
}

// newRooms announces count new rooms one after the other (room first,
// first+1, …), from nodes spread over the federation, and returns how long
// each took to reach every other node.
func (s *scaleNet) newRooms(tb testing.TB, count, first int, within time.Duration) []time.Duration {
	tb.Helper()
	k := len(s.peers)
	out := make([]time.Duration, 0, count)
	for j := range count {
		out = append(out, s.newRoom(tb, (j*7)%k, first+j, within))
	}
	return out
}

// quantile is the q-quantile (nearest rank) of ds.
func quantile(ds []time.Duration, q float64) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(math.Ceil(q*float64(len(s)))) - 1
	return s[min(max(i, 0), len(s)-1)]
}

// BenchmarkScaleNewRoom: k nodes (ADP_SCALE_NODES, default 30) in the
// scale graph, warm (every binding verified, every node's first room
// everywhere), then ADP_SCALE_NEW (default 24) new rooms one after the
// other from nodes spread over the graph, each timed from its publication
// until all k-1 other nodes hold it. Reports p50, p99 and max (the
// acceptance bound is 2 s) and the time to start and warm the network.
func BenchmarkScaleNewRoom(b *testing.B) {
	k, count := envInt("ADP_SCALE_NODES", 30), envInt("ADP_SCALE_NEW", 24)
	for range b.N {
		start := time.Now()
		s := &scaleNet{edges: scaleEdges(k, 1)}
		s.peers = networkWith(b, k, s.edges, scaleOptions())
		s.warm(b)
		up := time.Since(start)
		ds := s.newRooms(b, count, 1, 30*time.Second)
		p50, p99, mx := quantile(ds, 0.5), quantile(ds, 0.99), slices.Max(ds)
		b.Logf("%d nodes, %d edges: up and warm in %v; %d new rooms everywhere in p50 %v, p99 %v, max %v (min %v)",
			k, len(s.edges), up.Round(time.Millisecond), count, p50.Round(time.Millisecond), p99.Round(time.Millisecond),
			mx.Round(time.Millisecond), slices.Min(ds).Round(time.Millisecond))
		b.ReportMetric(ms(p50), "p50-ms")
		b.ReportMetric(ms(p99), "p99-ms")
		b.ReportMetric(ms(mx), "max-ms")
		b.ReportMetric(up.Seconds(), "up-s")
		stopAll(s.peers)
	}
}
