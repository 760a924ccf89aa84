//go:build e2e

package federation_test

// Federation benchmarks, all on 127.0.0.1. Benchmarks never run under plain
// `go test`; run them with
//
//	go test -run '^$' -bench . -benchtime 1x ./federation/
//
// Each benchmark builds its own network and runs one experiment per b.N
// iteration (-benchtime 1x runs each once). Most top-level benchmarks take
// under 60 s; those that fill directories of 100,000 rooms
// (BenchmarkDirectoryIdle, BenchmarkCatchUp) or run 30 nodes
// (BenchmarkScale, BenchmarkScaleNewRoom) take minutes on 2 cores, most
// of it signing and storing the synthetic entries. The figures are the b.ReportMetric units; ns/op is only the
// experiment's wall time, set-up included. The nodes run the production
// announce interval (30 s, the federation.Config default), not the tests'
// 2 s.
//
// Byte counts are what libp2p's bandwidth reporter counts
// (Federation.Bandwidth): stream payload bytes of gossipsub, identify and
// ping, in plus out, without yamux, Noise or TCP/IP framing. The reporter's
// totals advance once a second, process-wide; bwSweep aligns every window
// to those updates so that no window gains or loses up to a second of
// traffic.

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"github.com/adpnode/adpnode/internal/fedtest"
	"log/slog"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p"
	pubsub "github.com/libp2p/go-libp2p-pubsub"
	pb "github.com/libp2p/go-libp2p-pubsub/pb"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/metrics"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"

	"github.com/adpnode/adpnode/adp/room"
	"github.com/adpnode/adpnode/federation"
	"github.com/adpnode/adpnode/internal/adptest"
	"github.com/adpnode/adpnode/node"
)

// benchAnnounceInterval is the production default of
// federation.Config.AnnounceInterval.
const benchAnnounceInterval = 30 * time.Second

var benchLog = slog.New(slog.DiscardHandler)

// benchRates are quotas no benchmark reaches.
func benchRates() node.Rates {
	const big = 1 << 30
	return node.Rates{Message: big, Signal: big, Control: big,
		MessageCeiling: big, SignalCeiling: big, ControlCeiling: big, AgentStatus: big}
}

func benchOptions() fedtest.Options {
	return fedtest.Options{Rates: benchRates(), AnnounceInterval: benchAnnounceInterval, Log: benchLog}
}

// bwProbe only serves to detect the bandwidth meters' sweeps.
var bwProbe = metrics.NewBandwidthCounter()

// bwSweep waits for the next update of libp2p's bandwidth totals (one
// process-wide sweep a second updates every meter together) and returns
// its time: totals read right after it are exact as of that time.
func bwSweep() time.Time {
	before := bwProbe.GetBandwidthTotals().TotalOut
	bwProbe.LogSentMessage(1)
	for bwProbe.GetBandwidthTotals().TotalOut == before {
		time.Sleep(500 * time.Microsecond)
	}
	return time.Now()
}

// bwWindow is one sweep-aligned measurement window over a set of counters.
type bwWindow struct {
	start, end time.Time
	in0, out0  []int64
	in, out    []int64 // bytes over the window
}

func bwTotals(counters []func() (int64, int64)) (in, out []int64) {
	for _, c := range counters {
		i, o := c()
		in, out = append(in, i), append(out, o)
	}
	return in, out
}

func bwBegin(counters []func() (int64, int64)) *bwWindow {
	w := &bwWindow{start: bwSweep()}
	w.in0, w.out0 = bwTotals(counters)
	return w
}

// bwEnd closes the window at the first sweep at least d after its start
// (sweeps are a second apart, so the window lasts d rounded up to one).
func (w *bwWindow) bwEnd(counters []func() (int64, int64), d time.Duration) {
	time.Sleep(time.Until(w.start.Add(d - 300*time.Millisecond)))
	w.end = bwSweep()
	in, out := bwTotals(counters)
	for i := range in {
		w.in = append(w.in, in[i]-w.in0[i])
		w.out = append(w.out, out[i]-w.out0[i])
	}
}

func (w *bwWindow) secs() float64 { return w.end.Sub(w.start).Seconds() }

// rates returns each counter's (in+out) bytes per second over the window.
func (w *bwWindow) rates() []float64 {
	r := make([]float64, len(w.in))
	for i := range r {
		r[i] = float64(w.in[i]+w.out[i]) / w.secs()
	}
	return r
}

func meanMax(xs []float64) (mean, mx float64) {
	for _, x := range xs {
		mean += x
		mx = max(mx, x)
	}
	return mean / float64(len(xs)), mx
}

func fedCounters(peers []*fedtest.Peer) []func() (int64, int64) {
	var cs []func() (int64, int64)
	for _, p := range peers {
		cs = append(cs, p.Fed.Bandwidth)
	}
	return cs
}

func fmtBytes(names []string, w *bwWindow) string {
	var sb strings.Builder
	for i := range w.in {
		fmt.Fprintf(&sb, " %s=%d", names[i], w.in[i]+w.out[i])
	}
	return sb.String()
}

func fmtRates(names []string, r []float64) string {
	var sb strings.Builder
	for i, x := range r {
		fmt.Fprintf(&sb, " %s=%.0f", names[i], x)
	}
	return sb.String()
}

func peerNames(peers []*fedtest.Peer) []string {
	var ns []string
	for _, p := range peers {
		ns = append(ns, p.Name)
	}
	return ns
}

// benchCreate creates a public room on p by a's signed room.create,
// straight through node.Submit (safe from any goroutine).
func benchCreate(p *fedtest.Peer, a *adptest.Agent, topic string) (string, error) {
	now := p.Clock.Ms()
	env := a.Envelope(now, "room.create", "", 0, "", map[string]any{"topic": topic, "visibility": room.Public,
		"start_time": now, "end_time": now + 3_600_000, "tags": []string{"bench"}})
	res, err := p.Node.Submit(context.Background(), env, "")
	if err != nil {
		return "", err
	}
	return res.Record.RoomID, nil
}

func stopAll(peers []*fedtest.Peer) {
	for _, p := range peers {
		p.Stop()
	}
}

// BenchmarkIndexConvergence creates 1,000 public rooms, 200 on each of 5
// nodes, by 4 creator agents per node (each creates its 50 rooms one after
// the other, all 20 concurrently, through node.Submit), and measures until
// every node's federated Directory() lists all 1,000: from the first
// creation (first-ms) and from the last accepted one (last-ms). listed-% is
// the least complete node's share when the measurement ended (100 when it
// converged; otherwise after cap, and then first-ms and last-ms are not
// reported).
//
// Topologies: mesh (full mesh), ring+chord (ring A-B-C-D-E-A plus the
// chord A-C, so some announcements take two hops). Creation: paced (each
// creator 5 rooms/s: 100 rooms/s federation-wide, 10 s in all) and burst
// (as fast as the nodes accept them).
func BenchmarkIndexConvergence(b *testing.B) {
	for _, tc := range []struct {
		name  string
		edges [][2]int
	}{
		{"mesh", nil},
		{"ring+chord", [][2]int{{0, 1}, {1, 2}, {2, 3}, {3, 4}, {4, 0}, {0, 2}}},
	} {
		for _, mode := range []struct {
			name string
			each time.Duration // pause between one creator's rooms
			cap  time.Duration // wait at most this long after the last creation
		}{
			{"paced", 200 * time.Millisecond, 20 * time.Second},
			{"burst", 0, 10 * time.Second},
		} {
			b.Run("topology="+tc.name+"/create="+mode.name, func(b *testing.B) {
				for range b.N {
					benchIndexConvergence(b, tc.edges, mode.each, mode.cap)
				}
			})
		}
	}
}

func benchIndexConvergence(b *testing.B, edges [][2]int, each, cap time.Duration) {
	const rooms, creatorsPerNode = 1000, 4
	peers := networkWith(b, 5, edges, benchOptions())
	defer stopAll(peers)
	perNode := rooms / len(peers)
	creators := len(peers) * creatorsPerNode

	var mu sync.Mutex
	want := make(map[string]bool, rooms)
	var failed atomic.Value
	var wg sync.WaitGroup
	start := time.Now()
	for i, p := range peers {
		for c := range creatorsPerNode {
			a := adptest.NewAgent(fmt.Sprintf("conv-%d-%d", i, c))
			offset := time.Duration(i*creatorsPerNode+c) * each / time.Duration(creators)
			wg.Go(func() {
				for n, k := 0, c; k < perNode; n, k = n+1, k+creatorsPerNode {
					time.Sleep(time.Until(start.Add(offset + time.Duration(n)*each)))
					id, err := benchCreate(p, a, fmt.Sprintf("convergence room %d.%d", i, k))
					if err != nil {
						failed.CompareAndSwap(nil, err)
						return
					}
					mu.Lock()
					want[id] = true
					mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	lastCreated := time.Now()
	if err := failed.Load(); err != nil {
		b.Fatalf("room.create: %v", err)
	}

	listedAll := func(p *fedtest.Peer) int {
		n := 0
		for _, s := range p.Fed.Directory() {
			if want[s.ID] {
				n++
			}
		}
		return n
	}
	done := make([]time.Duration, len(peers)) // since lastCreated; 0 = not yet
	left := len(peers)
	for left > 0 && time.Since(lastCreated) < cap {
		for i, p := range peers {
			if done[i] == 0 && listedAll(p) == rooms {
				done[i] = time.Since(lastCreated)
				left--
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	leastListed := rooms
	var per []string
	for i, p := range peers {
		n := listedAll(p)
		leastListed = min(leastListed, n)
		if done[i] > 0 {
			per = append(per, fmt.Sprintf("%s=%.0fms", p.Name, ms(done[i])))
		} else {
			per = append(per, fmt.Sprintf("%s=%d/%d", p.Name, n, rooms))
		}
	}
	var accepted, ignored, rejected int64
	for _, p := range peers {
		st := p.Fed.Stats()
		accepted += st.Accepted.Load()
		ignored += st.Ignored.Load()
		rejected += st.Rejected.Load()
	}
	createMs := ms(lastCreated.Sub(start))
	b.Logf("%d rooms created in %.0f ms; per node after the last creation: %s; announcements validated: accepted %d (%d would be all), ignored %d, rejected %d",
		rooms, createMs, strings.Join(per, " "), accepted, rooms*(len(peers)-1), ignored, rejected)
	if left == 0 {
		last := slices.Max(done)
		b.ReportMetric(createMs+ms(last), "first-ms")
		b.ReportMetric(ms(last), "last-ms")
	} else {
		b.Logf("NOT converged within %v of the last creation", cap)
	}
	b.ReportMetric(100*float64(leastListed)/rooms, "listed-%")
	b.ReportMetric(createMs, "create-ms")
}

// BenchmarkGossipBytes: 5 nodes in a full mesh; 10 public rooms on A, each
// with its creator and two joined members; B..E follow A's record stream
// (FollowRecords), as mirrors would. After a settling pause it measures
// 10 s idle, then 10 s of 100 writes/s on A (each room's creator writes
// message.create on the head it got back, 10/s per room, staggered). Per
// node: libp2p bytes in+out per second; net = load minus idle.
func BenchmarkGossipBytes(b *testing.B) {
	for range b.N {
		benchGossipBytes(b)
	}
}

func benchGossipBytes(b *testing.B) {
	const rooms, perRoomHz, members, window = 10, 10, 2, 10 * time.Second
	peers := networkWith(b, 5, nil, benchOptions())
	defer stopAll(peers)
	a := peers[0]
	counters, names := fedCounters(peers), peerNames(peers)

	// B..E follow A's records before anything is written.
	got := make([]atomic.Int64, len(peers))
	var recBytes atomic.Int64
	for i, p := range peers[1:] {
		if err := p.Fed.FollowRecords(a.Fed.PeerID(), func(sr *federation.StreamedRecord) {
			got[i+1].Add(1)
			if i == 0 && sr.Record.Seq > 1+members { // a message.create record
				rj, _ := sr.Record.MarshalJSON()
				recBytes.Store(int64(len(rj) + len(sr.Signed) + len(`{"record":,"checkpoint":}`)))
			}
		}); err != nil {
			b.Fatal(err)
		}
	}
	time.Sleep(2 * time.Second) // two heartbeats: A knows the followers' subscriptions

	type writer struct {
		a    *adptest.Agent
		room string
		seq  int64
		hash string
	}
	ws := make([]*writer, rooms)
	for i := range ws {
		owner := adptest.NewAgent(fmt.Sprintf("gossip-owner-%d", i))
		id := createRoom(b, a, owner, room.Public, fmt.Sprintf("gossip room %d", i))
		for m := range members {
			submit(b, a, adptest.NewAgent(fmt.Sprintf("gossip-member-%d-%d", i, m)), "room.join", id, map[string]any{"role": "speaker"})
		}
		r, err := a.Node.Room(id, owner.ID)
		if err != nil {
			b.Fatal(err)
		}
		ws[i] = &writer{a: owner, room: id, seq: r.Head.Seq, hash: r.Head.Hash}
	}
	// Let the set-up burst (creations, joins, their records and
	// announcements) die down.
	time.Sleep(4 * time.Second)

	announceAccepted := func() int64 { return peers[1].Fed.Stats().Accepted.Load() - got[1].Load() }
	ann0 := announceAccepted()
	idle := bwBegin(counters)
	idle.bwEnd(counters, window)
	annIdle := announceAccepted() - ann0

	ctx, stop := context.WithCancel(context.Background())
	var wrote atomic.Int64
	var failed atomic.Value
	var wg sync.WaitGroup
	period := time.Second / perRoomHz
	load := bwBegin(counters)
	ann0 = announceAccepted()
	for i, w := range ws {
		wg.Go(func() {
			time.Sleep(time.Duration(i) * period / rooms) // spread the 100/s evenly
			t := time.NewTicker(period)
			defer t.Stop()
			for k := 0; ; k++ {
				env := w.a.Envelope(a.Clock.Ms(), "message.create", w.room, w.seq, w.hash,
					map[string]any{"content_type": "text/plain", "content": fmt.Sprintf("load message %d in room %d: a sentence of ordinary length to stand for a chat line.", k, i)})
				res, err := a.Node.Submit(ctx, env, w.room)
				if err != nil {
					if ctx.Err() == nil {
						failed.CompareAndSwap(nil, err)
					}
					return
				}
				w.seq, w.hash = res.Record.Seq, res.Record.Hash
				wrote.Add(1)
				select {
				case <-ctx.Done():
					return
				case <-t.C:
				}
			}
		})
	}
	load.bwEnd(counters, window)
	annLoad := announceAccepted() - ann0
	writes := wrote.Load()
	stop()
	wg.Wait()
	if err := failed.Load(); err != nil {
		b.Fatalf("writer: %v", err)
	}

	// Delivery: every follower should have every record A published.
	time.Sleep(1500 * time.Millisecond)
	published := a.Fed.Stats().Published.Load()
	minDelivered := 1.0
	for i := 1; i < len(peers); i++ {
		minDelivered = min(minDelivered, float64(got[i].Load())/float64(published))
	}

	idleR, loadR := idle.rates(), load.rates()
	net := make([]float64, len(peers))
	for i := range net {
		net[i] = loadR[i] - idleR[i]
	}
	idleMean, idleMax := meanMax(idleR)
	loadMean, loadMax := meanMax(loadR)
	netMean, netMax := meanMax(net)
	var annBytes int
	if e, ok := peers[1].Index.Room(ws[0].room, peers[1].Clock.Ms()); ok {
		annBytes = len(e.Raw)
	}
	b.Logf("idle %.1fs, B/s:%s (announcements accepted at B: %d)", idle.secs(), fmtRates(names, idleR), annIdle)
	b.Logf("load %.1fs, %d writes (%.1f/s), B/s:%s (announcements accepted at B: %d)", load.secs(), writes,
		float64(writes)/load.secs(), fmtRates(names, loadR), annLoad)
	b.Logf("net of idle, B/s:%s", fmtRates(names, net))
	b.Logf("record message ≈ %d B, announcement %d B; delivered to every follower: min %.2f%% of %d records",
		recBytes.Load(), annBytes, 100*minDelivered, published)
	b.ReportMetric(idleMean, "idle-B/s-mean")
	b.ReportMetric(idleMax, "idle-B/s-max")
	b.ReportMetric(loadMean, "load-B/s-mean")
	b.ReportMetric(loadMax, "load-B/s-max")
	b.ReportMetric(netMean, "net-B/s-mean")
	b.ReportMetric(netMax, "net-B/s-max")
	b.ReportMetric(float64(writes)/load.secs(), "writes/s")
	b.ReportMetric(100*minDelivered, "delivered-%")
	b.ReportMetric(float64(recBytes.Load()), "record-msg-B")
	b.ReportMetric(float64(annBytes), "announce-msg-B")
}

// BenchmarkTopicLayout compares the two record-topic layouts on raw
// gossipsub (plain libp2p hosts, the federation's gossipsub options) with
// 3 hosts in a full mesh: P publishes the records of 1,000 public rooms,
// S1 and S2 subscribe to all of them.
//
//	per-host: one topic carries all 1,000 rooms' records;
//	per-room: 1,000 topics, one per room; subscribers join all 1,000.
//
// For each: time to join (from the subscribers' first Join until P sees
// both subscribed to every topic) and the bytes sent until the next meter
// sweep (subscriptions and the GRAFTs of the first heartbeat), per-node
// bytes/s over the following 10 s (idle: heartbeats, IHAVE, late GRAFTs),
// per-node bytes/s over 10 s of 100 messages/s spread round-robin over the
// rooms, delivery and its latency, goroutines and memory per subscriber.
// Like the federation, P joins the topics without subscribing (it
// publishes through fanout), every host has a topic validator checking the
// author, and each subscription has its own reader goroutine (buffer:
// FollowRecords' 8192 for the per-host topic, gossipsub's default 32 per
// room topic). Memory is heap plus stacks, after GC, per subscriber.
func BenchmarkTopicLayout(b *testing.B) {
	var perHost, perRoom *layoutResult
	b.Run("layout=per-host", func(b *testing.B) {
		for range b.N {
			perHost = benchTopicLayout(b, false)
		}
	})
	b.Run("layout=per-room", func(b *testing.B) {
		for range b.N {
			perRoom = benchTopicLayout(b, true)
		}
	})
	if perHost != nil && perRoom != nil {
		// On stdout: a parent benchmark's log is not shown, and a
		// benchmark's log is cut after 10 lines.
		fmt.Print(layoutTable(perHost, perRoom))
	}
}

func layoutTable(h, r *layoutResult) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "BenchmarkTopicLayout side by side:\n%-34s %14s %14s\n", "", "per-host", "per-room")
	row := func(name, f string, x, y float64) {
		fmt.Fprintf(&sb, "%-34s %14s %14s\n", name, fmt.Sprintf(f, x), fmt.Sprintf(f, y))
	}
	row("topics", "%.0f", h.topics, r.topics)
	row("publisher join, ms", "%.1f", h.pubJoinMs, r.pubJoinMs)
	row("subscriber join calls, ms", "%.1f", h.subCallMs, r.subCallMs)
	row("time to join (visible at P), ms", "%.1f", h.joinMs, r.joinMs)
	row("join bytes per node, mean", "%.0f", h.joinBytes, r.joinBytes)
	row("idle B/s per node, mean", "%.0f", h.idleMean, r.idleMean)
	row("idle B/s per node, max", "%.0f", h.idleMax, r.idleMax)
	row("load B/s per node, mean", "%.0f", h.loadMean, r.loadMean)
	row("load B/s per node, max", "%.0f", h.loadMax, r.loadMax)
	row("delivered, %", "%.2f", h.delivered, r.delivered)
	row("delivery latency p50, ms", "%.2f", h.p50, r.p50)
	row("delivery latency p99, ms", "%.2f", h.p99, r.p99)
	row("goroutines per subscriber", "%.0f", h.goroutines, r.goroutines)
	row("memory per subscriber, KiB", "%.0f", h.memKiB, r.memKiB)
	row("dropped RPCs (queue full)", "%.0f", h.dropped, r.dropped)
	row("subscription announce retries", "%.0f", h.retries, r.retries)
	return sb.String()
}

type layoutResult struct {
	topics                               float64
	pubJoinMs, subCallMs, joinMs         float64
	joinBytes                            float64
	idleMean, idleMax, loadMean, loadMax float64
	delivered, p50, p99                  float64
	goroutines, memKiB, dropped, retries float64
}

// rawHost is a plain libp2p host with gossipsub configured as the
// federation configures it.
type rawHost struct {
	h   host.Host
	ps  *pubsub.PubSub
	bw  *metrics.BandwidthCounter
	tr  *rpcCounter
	log *logCounter
}

func newRawHost(b *testing.B, ctx context.Context) *rawHost {
	sk, _, err := crypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		b.Fatal(err)
	}
	bw := metrics.NewBandwidthCounter()
	h, err := libp2p.New(libp2p.Identity(sk), libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0"),
		libp2p.BandwidthReporter(bw), libp2p.DisableRelay(), libp2p.Ping(true))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { h.Close() })
	// The federation's parameters (federation.startPubSub), without the
	// index topic's score parameters: no index topic here.
	params := &pubsub.PeerScoreParams{
		SkipAtomicValidation:     true,
		AppSpecificScore:         func(peer.ID) float64 { return 0 },
		IPColocationFactorWeight: 0,
		BehaviourPenaltyWeight:   -10, BehaviourPenaltyThreshold: 6, BehaviourPenaltyDecay: 0.9,
		DecayInterval: time.Second, DecayToZero: 0.01, RetainScore: 10 * time.Minute,
		Topics: map[string]*pubsub.TopicScoreParams{},
	}
	thresholds := &pubsub.PeerScoreThresholds{SkipAtomicValidation: true,
		GossipThreshold: -100, PublishThreshold: -200, GraylistThreshold: -400, AcceptPXThreshold: 10, OpportunisticGraftThreshold: 5}
	tr, lc := &rpcCounter{}, &logCounter{}
	ps, err := pubsub.NewGossipSub(ctx, h,
		pubsub.WithMessageIdFn(func(m *pb.Message) string {
			s := sha256.Sum256(m.Data)
			return hex.EncodeToString(s[:16])
		}),
		pubsub.WithMaxMessageSize(1<<20),
		pubsub.WithPeerScore(params, thresholds),
		pubsub.WithMessageSignaturePolicy(pubsub.StrictSign),
		pubsub.WithValidateQueueSize(4096),
		pubsub.WithRawTracer(tr),
		pubsub.WithLogger(slog.New(lc)),
	)
	if err != nil {
		b.Fatal(err)
	}
	return &rawHost{h: h, ps: ps, bw: bw, tr: tr, log: lc}
}

func (r *rawHost) bandwidth() (int64, int64) {
	t := r.bw.GetBandwidthTotals()
	return t.TotalIn, t.TotalOut
}

func benchTopicLayout(b *testing.B, perRoom bool) *layoutResult {
	const rooms, rate, msgBytes, window = 1000, 100, 1330, 10 * time.Second // 1330 B ≈ a record message (BenchmarkGossipBytes)
	// Subscription buffer: FollowRecords' 8192 for the one per-host topic;
	// gossipsub's default (32) per room topic, as 1,000 buffers of 8192
	// would cost 64 MiB per subscriber by themselves.
	bufSize := 8192
	if perRoom {
		bufSize = 32
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	hosts := []*rawHost{newRawHost(b, ctx), newRawHost(b, ctx), newRawHost(b, ctx)}
	pub, subs := hosts[0], hosts[1:]
	names := []string{"P", "S1", "S2"}
	var counters []func() (int64, int64)
	for _, h := range hosts {
		counters = append(counters, h.bandwidth)
	}
	for i := range hosts {
		for j := i + 1; j < len(hosts); j++ {
			if err := hosts[i].h.Connect(ctx, peer.AddrInfo{ID: hosts[j].h.ID(), Addrs: hosts[j].h.Addrs()}); err != nil {
				b.Fatal(err)
			}
		}
	}
	time.Sleep(500 * time.Millisecond) // identify and pubsub streams

	base := federation.RecordTopic(pub.h.ID())
	topics := []string{base}
	if perRoom {
		topics = topics[:0]
		for i := range rooms {
			topics = append(topics, fmt.Sprintf("%s/room-%04d", base, i))
		}
	}
	author := pub.h.ID()
	validator := func(_ context.Context, _ peer.ID, m *pubsub.Message) pubsub.ValidationResult {
		if a, err := peer.IDFromBytes(m.From); err != nil || a != author {
			return pubsub.ValidationReject
		}
		return pubsub.ValidationAccept
	}
	join := func(h *rawHost) []*pubsub.Topic {
		ts := make([]*pubsub.Topic, len(topics))
		for i, name := range topics {
			if err := h.ps.RegisterTopicValidator(name, validator); err != nil {
				b.Fatal(err)
			}
			t, err := h.ps.Join(name)
			if err != nil {
				b.Fatal(err)
			}
			ts[i] = t
		}
		return ts
	}

	// P joins (publishes through fanout, as the federation does).
	t0 := time.Now()
	pubTopics := join(pub)
	res := &layoutResult{topics: float64(len(topics)), pubJoinMs: ms(time.Since(t0))}

	// Subscribers join every topic, a reader goroutine per subscription.
	runtime.GC()
	runtime.GC()
	var m0 runtime.MemStats
	runtime.ReadMemStats(&m0)
	g0 := runtime.NumGoroutine()
	received := make([]atomic.Int64, len(hosts))
	var latMu sync.Mutex
	var lats []time.Duration
	var measure atomic.Bool // latency only during the load window
	ctl0 := sumCounts(hosts)
	joinWin := bwBegin(counters)
	t0 = time.Now()
	var wg sync.WaitGroup
	for si, s := range subs {
		wg.Go(func() {
			for _, t := range join(s) {
				sub, err := t.Subscribe(pubsub.WithBufferSize(bufSize))
				if err != nil {
					b.Error(err)
					return
				}
				go func() {
					for {
						m, err := sub.Next(ctx)
						if err != nil {
							return
						}
						received[si+1].Add(1)
						if measure.Load() && len(m.Data) >= 8 {
							d := time.Since(time.Unix(0, int64(binary.BigEndian.Uint64(m.Data))))
							latMu.Lock()
							lats = append(lats, d)
							latMu.Unlock()
						}
					}
				}()
			}
		})
	}
	wg.Wait()
	res.subCallMs = ms(time.Since(t0))
	visible := func() bool {
		for _, name := range topics {
			if len(pub.ps.ListPeers(name)) < len(subs) {
				return false
			}
		}
		return true
	}
	for !visible() {
		if time.Since(t0) > 30*time.Second {
			b.Fatal("subscriptions not visible at P within 30 s")
		}
		time.Sleep(2 * time.Millisecond)
	}
	res.joinMs = ms(time.Since(t0))
	joinWin.bwEnd(counters, 0)
	ctlJoin := sumCounts(hosts).minus(ctl0)
	var jb float64
	for i := range hosts {
		jb += float64(joinWin.in[i] + joinWin.out[i])
	}
	res.joinBytes = jb / float64(len(hosts))
	runtime.GC()
	runtime.GC()
	var m1 runtime.MemStats
	runtime.ReadMemStats(&m1)
	res.goroutines = float64(runtime.NumGoroutine()-g0) / float64(len(subs))
	res.memKiB = (float64(m1.HeapAlloc+m1.StackInuse) - float64(m0.HeapAlloc+m0.StackInuse)) / float64(len(subs)) / 1024

	// Idle: the 10 s after joining.
	ctl0 = sumCounts(hosts)
	idle := bwBegin(counters)
	idle.bwEnd(counters, window)
	ctlIdle := sumCounts(hosts).minus(ctl0)

	// Load: 100 messages/s, round-robin over the rooms.
	ctl0 = sumCounts(hosts)
	for _, s := range subs {
		received[slices.Index(hosts, s)].Store(0)
	}
	measure.Store(true)
	load := bwBegin(counters)
	var sent int
	tick := time.NewTicker(time.Second / rate)
	for time.Since(load.start) < window-200*time.Millisecond {
		<-tick.C
		payload := make([]byte, msgBytes) // fresh: Publish keeps the slice
		binary.BigEndian.PutUint64(payload, uint64(time.Now().UnixNano()))
		binary.BigEndian.PutUint64(payload[8:], uint64(sent)) // room number and sequence
		t := pubTopics[0]
		if perRoom {
			t = pubTopics[sent%len(pubTopics)]
		}
		if err := t.Publish(ctx, payload); err != nil {
			b.Fatal(err)
		}
		sent++
	}
	tick.Stop()
	load.bwEnd(counters, window)
	ctlLoad := sumCounts(hosts).minus(ctl0)
	time.Sleep(1500 * time.Millisecond)
	measure.Store(false)
	res.delivered = 100.0
	for _, s := range subs {
		res.delivered = min(res.delivered, 100*float64(received[slices.Index(hosts, s)].Load())/float64(sent))
	}
	latMu.Lock()
	slices.Sort(lats)
	if len(lats) > 0 {
		res.p50, res.p99 = ms(lats[len(lats)/2]), ms(lats[len(lats)*99/100])
	}
	latMu.Unlock()

	res.idleMean, res.idleMax = meanMax(idle.rates())
	res.loadMean, res.loadMax = meanMax(load.rates())
	for _, h := range hosts {
		res.dropped += float64(h.tr.dropped.Load())
		res.retries += float64(h.log.count("queue full; scheduling retry"))
	}
	b.Logf("%d topics: publisher join %.1f ms; subscriber join calls %.1f ms; visible at P after %.1f ms; join bytes:%s",
		len(topics), res.pubJoinMs, res.subCallMs, res.joinMs, fmtBytes(names, joinWin))
	b.Logf("join window %.1fs: sent %s", joinWin.secs(), ctlJoin)
	b.Logf("idle %.1fs B/s:%s; sent %s", idle.secs(), fmtRates(names, idle.rates()), ctlIdle)
	b.Logf("load %.1fs, %d messages of %d B, B/s:%s; sent %s", load.secs(), sent, msgBytes, fmtRates(names, load.rates()), ctlLoad)
	b.Logf("delivered min %.2f%%, latency p50 %.2f ms p99 %.2f ms; per subscriber: %.0f goroutines, %.0f KiB heap+stacks; dropped RPCs %.0f, announce retries %.0f",
		res.delivered, res.p50, res.p99, res.goroutines, res.memKiB, res.dropped, res.retries)
	b.ReportMetric(res.joinMs, "join-ms")
	b.ReportMetric(res.joinBytes, "join-B/node")
	b.ReportMetric(res.idleMean, "idle-B/s-mean")
	b.ReportMetric(res.idleMax, "idle-B/s-max")
	b.ReportMetric(res.loadMean, "load-B/s-mean")
	b.ReportMetric(res.loadMax, "load-B/s-max")
	b.ReportMetric(res.delivered, "delivered-%")
	b.ReportMetric(res.p99, "p99-ms")
	b.ReportMetric(res.goroutines, "goroutines/sub")
	b.ReportMetric(res.memKiB, "mem-KiB/sub")
	return res
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// rpcCounts counts what a host's gossipsub queued for sending.
type rpcCounts struct {
	rpcs, msgs, subs, ihave, iwant, graft, prune, idontwant int64
	dropped, undeliverable, rejected                        int64
}

func (c rpcCounts) minus(o rpcCounts) rpcCounts {
	return rpcCounts{c.rpcs - o.rpcs, c.msgs - o.msgs, c.subs - o.subs, c.ihave - o.ihave, c.iwant - o.iwant,
		c.graft - o.graft, c.prune - o.prune, c.idontwant - o.idontwant,
		c.dropped - o.dropped, c.undeliverable - o.undeliverable, c.rejected - o.rejected}
}

func (c rpcCounts) String() string {
	return fmt.Sprintf("%d RPCs: %d messages, %d subscription changes, IHAVE %d ids, IWANT %d ids, GRAFT %d, PRUNE %d, IDONTWANT %d ids; dropped %d RPCs (queue full), %d undeliverable, %d rejected/ignored",
		c.rpcs, c.msgs, c.subs, c.ihave, c.iwant, c.graft, c.prune, c.idontwant, c.dropped, c.undeliverable, c.rejected)
}

func sumCounts(hosts []*rawHost) rpcCounts {
	var c rpcCounts
	for _, h := range hosts {
		t := h.tr
		c.rpcs += t.rpcs.Load()
		c.msgs += t.msgs.Load()
		c.subs += t.subs.Load()
		c.ihave += t.ihave.Load()
		c.iwant += t.iwant.Load()
		c.graft += t.graft.Load()
		c.prune += t.prune.Load()
		c.idontwant += t.idontwant.Load()
		c.dropped += t.dropped.Load()
		c.undeliverable += t.undeliverable.Load()
		c.rejected += t.rejected.Load()
	}
	return c
}

// rpcCounter is a pubsub.RawTracer counting sent RPCs by content.
type rpcCounter struct {
	rpcs, msgs, subs, ihave, iwant, graft, prune, idontwant atomic.Int64
	dropped, undeliverable, rejected                        atomic.Int64
}

func (c *rpcCounter) SendRPC(rpc *pubsub.RPC, _ peer.ID) {
	c.rpcs.Add(1)
	c.msgs.Add(int64(len(rpc.Publish)))
	c.subs.Add(int64(len(rpc.Subscriptions)))
	if ctl := rpc.Control; ctl != nil {
		for _, ih := range ctl.Ihave {
			c.ihave.Add(int64(len(ih.MessageIDs)))
		}
		for _, iw := range ctl.Iwant {
			c.iwant.Add(int64(len(iw.MessageIDs)))
		}
		for _, idw := range ctl.Idontwant {
			c.idontwant.Add(int64(len(idw.MessageIDs)))
		}
		c.graft.Add(int64(len(ctl.Graft)))
		c.prune.Add(int64(len(ctl.Prune)))
	}
}
func (c *rpcCounter) DropRPC(*pubsub.RPC, peer.ID)                         { c.dropped.Add(1) }
func (c *rpcCounter) OnNewOutboundStream(peer.ID, protocol.ID)             {}
func (c *rpcCounter) OnClosedOutboundStream(peer.ID)                       {}
func (c *rpcCounter) Join(string)                                          {}
func (c *rpcCounter) Leave(string)                                         {}
func (c *rpcCounter) Graft(peer.ID, string)                                {}
func (c *rpcCounter) Prune(peer.ID, string)                                {}
func (c *rpcCounter) ValidateMessage(*pubsub.Message)                      {}
func (c *rpcCounter) DeliverMessage(*pubsub.Message)                       {}
func (c *rpcCounter) RejectMessage(*pubsub.Message, string)                { c.rejected.Add(1) }
func (c *rpcCounter) DuplicateMessage(*pubsub.Message)                     {}
func (c *rpcCounter) ThrottlePeer(peer.ID)                                 {}
func (c *rpcCounter) RecvRPC(*pubsub.RPC)                                  {}
func (c *rpcCounter) SendRPCCompleted(*pubsub.RPC, peer.ID, time.Duration) {}
func (c *rpcCounter) UndeliverableMessage(*pubsub.Message)                 { c.undeliverable.Add(1) }

// logCounter is a slog.Handler that counts records by message.
type logCounter struct {
	mu sync.Mutex
	m  map[string]int
}

func (l *logCounter) Enabled(_ context.Context, lv slog.Level) bool { return lv >= slog.LevelInfo }
func (l *logCounter) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.m == nil {
		l.m = map[string]int{}
	}
	l.m[r.Message]++
	return nil
}
func (l *logCounter) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logCounter) WithGroup(string) slog.Handler      { return l }

func (l *logCounter) count(substr string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for k, v := range l.m {
		if strings.Contains(k, substr) {
			n += v
		}
	}
	return n
}
