//go:build e2e

package federation_test

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/adpnode/adpnode/adp/assertion"
	"github.com/adpnode/adpnode/adp/identity"
	"github.com/adpnode/adpnode/adp/room"
	"github.com/adpnode/adpnode/directory"
	"github.com/adpnode/adpnode/federation"
	"github.com/adpnode/adpnode/index"
	"github.com/adpnode/adpnode/internal/fedtest"
	"github.com/adpnode/adpnode/internal/testwait"
)

// synthHost is a made-up remote host whose signed announcements fill the
// directories of a benchmark federation (its origin serves nothing; the
// benchmark marks its binding verified).
type synthHost struct {
	signer  *assertion.Signer
	binding index.Binding
}

const synthPerHost = 5000 // under the index's 10,000 per host

func synthHosts(b *testing.B, n int) []synthHost {
	out := make([]synthHost, n)
	for i := range out {
		seed := make([]byte, 32)
		copy(seed, fmt.Sprintf("synthetic host %d", i))
		k, _ := identity.KeyFromSeed(seed)
		pk, _ := crypto.UnmarshalEd25519PublicKey(k.Public().(ed25519.PublicKey))
		pid, err := peer.IDFromPublicKey(pk)
		if err != nil {
			b.Fatal(err)
		}
		s := assertion.NewSigner(k)
		out[i] = synthHost{signer: s, binding: index.Binding{Key: s.HostKey(), PeerID: pid.String(), Origin: fmt.Sprintf("http://127.0.0.1:%d", 20000+i)}}
	}
	return out
}

// synthEntry signs the announcement of synthetic room i (version v).
func synthEntry(b *testing.B, hosts []synthHost, i, v int, now int64) *index.Entry {
	h := hosts[i/synthPerHost]
	id := fmt.Sprintf("rooms%015d", i)
	a := index.Announcement{Room: directory.Entry{ID: id, URL: h.binding.Origin + "/v1/rooms/" + id, Host: h.binding.Origin[len("http://"):],
		Status: room.StatusActive, Topic: fmt.Sprintf("synthetic room %d, version %d: a topic of ordinary length", i, v),
		Visibility: room.Public, StartTime: now, EndTime: now + 3_600_000, Members: 3, Seq: int64(10 + v), LastActive: now},
		Host: h.binding, ExpiresAt: now + (6 * time.Hour).Milliseconds()}
	raw, err := h.signer.Sign(assertion.TypeAnnounce, a, now)
	if err != nil {
		b.Fatal(err)
	}
	e, err := index.Parse(raw)
	if err != nil {
		b.Fatal(err)
	}
	return e
}

// inject puts copies of entries into each peer's index directly (no
// gossip), as if learned long ago.
func inject(b *testing.B, peers []*fedtest.Peer, entries []*index.Entry) {
	for _, p := range peers {
		now := p.Clock.Ms()
		for _, e := range entries {
			c := *e
			// Not stored (nil error) only when reconciliation brought it first.
			_, err := p.Index.Put(&c, now)
			if errors.Is(err, index.ErrHostFull) {
				// A check marked before a long injection may be due
				// (and forgotten) by now: trust the host again.
				federation.MarkVerified(p.Fed, e.Host)
				p.Index.Reverify()
				c = *e
				_, err = p.Index.Put(&c, now)
			}
			if err != nil {
				b.Fatalf("inject %s: %v", e.Room.ID, err)
			}
		}
		if err := p.Index.Flush(); err != nil {
			b.Fatal(err)
		}
		// Checks marked before a long injection may be due again.
		seen := map[string]bool{}
		for _, e := range entries {
			if !seen[e.Host.PeerID] {
				seen[e.Host.PeerID] = true
				federation.MarkVerified(p.Fed, e.Host)
			}
		}
		p.Index.Reverify()
	}
}

func trustSynth(peers []*fedtest.Peer, hosts []synthHost) {
	for _, p := range peers {
		for _, h := range hosts {
			federation.MarkVerified(p.Fed, h.binding)
		}
		p.Index.Reverify()
	}
}

func synthRooms(b *testing.B, rooms int, now int64) ([]synthHost, []*index.Entry) {
	hosts := synthHosts(b, (rooms+synthPerHost-1)/synthPerHost)
	entries := make([]*index.Entry, rooms)
	for i := range entries {
		entries[i] = synthEntry(b, hosts, i, 0, now)
	}
	return hosts, entries
}

// BenchmarkDirectoryIdle: idle bytes per node per second of a 3-node
// federation (full mesh) whose directories hold 1,000 vs 100,000 rooms,
// announced long ago and unchanged: gossipsub heartbeats plus
// anti-entropy reconciliation. To compare like with like, the timer-driven
// anti-entropy is off and the benchmark runs it at fixed times instead:
// every node reconciles with each of its peers every 5 s (24 times the
// production rate of one session per peer per 2 min), six rounds in the
// 30 s window. Change-only announcements send nothing for unchanged
// rooms; reconciliation of equal sets is one round of 16 fingerprints
// whatever their size.
func BenchmarkDirectoryIdle(b *testing.B) {
	var perRooms = map[int]float64{}
	for _, rooms := range []int{1_000, 100_000} {
		b.Run(fmt.Sprintf("rooms=%d", rooms), func(b *testing.B) {
			for range b.N {
				perRooms[rooms] = benchDirectoryIdle(b, rooms)
			}
		})
	}
	if lo, hi := perRooms[1_000], perRooms[100_000]; lo > 0 && hi > 0 {
		b.Logf("idle B/node/s: %.1f at 1,000 rooms, %.1f at 100,000 (ratio %.3f)", lo, hi, hi/lo)
	}
}

func benchDirectoryIdle(b *testing.B, rooms int) float64 {
	const window = 30 * time.Second
	o := benchOptions()
	o.ReconcileInterval = time.Hour
	peers := networkWith(b, 3, nil, o)
	defer stopAll(peers)
	hosts, entries := synthRooms(b, rooms, peers[0].Clock.Ms())
	trustSynth(peers, hosts)
	inject(b, peers, entries)
	for _, p := range peers {
		if got := len(p.Index.Live(p.Clock.Ms(), true)); got != rooms {
			b.Fatalf("%s holds %d verified entries, want %d", p.Name, got, rooms)
		}
	}
	time.Sleep(5 * time.Second) // past the connect-time sessions
	counters := fedCounters(peers)
	w := bwBegin(counters)
	sessions := 0
	var slowest time.Duration
	for round := range 6 {
		time.Sleep(time.Until(w.start.Add(time.Duration(round)*5*time.Second + time.Second)))
		for _, p := range peers {
			for _, q := range peers {
				if p == q {
					continue
				}
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				t0 := time.Now()
				res, err := p.Fed.Reconcile(ctx, q.Fed.PeerID())
				slowest = max(slowest, time.Since(t0))
				cancel()
				if err != nil || res.Need != 0 || res.Have != 0 {
					b.Fatalf("%s with %s: %+v %v", p.Name, q.Name, res, err)
				}
				sessions++
			}
		}
	}
	w.bwEnd(counters, window)
	var total int64
	for i := range peers {
		total += w.in[i] + w.out[i]
	}
	perSec := float64(total) / float64(len(peers)) / w.secs()
	b.Logf("%d rooms: %.1f B/node/s idle (in+out, %.1f s window, %d sessions, each node with each peer every 5 s; slowest session %v)",
		rooms, perSec, w.secs(), sessions, slowest.Round(time.Millisecond))
	b.ReportMetric(perSec, "idle-B/node/s")
	return perSec
}

// BenchmarkCatchUp: a node (C) of a 3-node federation whose directories
// hold 100,000 rooms (ADP_CATCHUP_ROOMS) is disconnected while N of those
// rooms change (re-signed, newer versions, on A and B), then reconnects
// to A; the figure is C's bytes (in+out) from reconnecting until C holds
// every new version. N = 0 is the fixed cost of a reconnection (identify,
// gossipsub hello, the two on-connect sessions over equal sets); N =
// 1,000 and 10,000 give the slope.
func BenchmarkCatchUp(b *testing.B) {
	rooms := envInt("ADP_CATCHUP_ROOMS", 100_000)
	res := map[int]float64{}
	for _, n := range []int{0, 1_000, 10_000} {
		b.Run(fmt.Sprintf("changes=%d", n), func(b *testing.B) {
			for range b.N {
				res[n] = benchCatchUp(b, rooms, n)
			}
		})
	}
	if res[1_000] > 0 && res[10_000] > 0 {
		b.Logf("catch-up bytes over %d rooms: %.0f (N=0), %.0f (N=1,000), %.0f (N=10,000); per change %.0f and %.0f B; ratio of the net costs %.2f",
			rooms, res[0], res[1_000], res[10_000], (res[1_000]-res[0])/1000, (res[10_000]-res[0])/10000, (res[10_000]-res[0])/(res[1_000]-res[0]))
	}
}

func benchCatchUp(b *testing.B, rooms, changes int) float64 {
	o := benchOptions()
	o.ReconcileInterval = time.Hour // only the on-connect sessions
	peers := networkWith(b, 3, nil, o)
	defer stopAll(peers)
	a, c := peers[0], peers[2]
	now := a.Clock.Ms()
	hosts, entries := synthRooms(b, rooms, now)
	trustSynth(peers, hosts)
	inject(b, peers, entries)
	for _, p := range peers[:2] {
		if err := c.Fed.Disconnect(p.Fed.PeerID()); err != nil {
			b.Fatal(err)
		}
	}
	testwait.Until(b, 20*time.Second, "the condition", func() bool { return len(c.Fed.Peers()) == 0 })
	changed := make([]*index.Entry, changes)
	for i := range changed {
		changed[i] = synthEntry(b, hosts, i*(rooms/max(changes, 1)), 1, now+1)
	}
	inject(b, peers[:2], changed)
	counters := fedCounters(peers[2:])
	in0, out0 := counters[0]()
	start := time.Now()
	fedtest.Connect(b, c, a)
	testwait.Until(b, 10*time.Minute, "the condition", func() bool {
		for _, e := range changed {
			if got, ok := c.Index.Room(e.Room.ID, c.Clock.Ms()); !ok || got.Nonce != e.Nonce {
				return false
			}
		}
		return true
	})
	took := time.Since(start)
	// Let the on-connect sessions finish and the meters sweep.
	time.Sleep(3 * time.Second)
	bwSweep()
	in1, out1 := counters[0]()
	bytes := float64(in1 - in0 + out1 - out0)
	b.Logf("%d rooms, %d changed while away: C caught up in %v with %.0f B in+out", rooms, changes, took.Round(time.Millisecond), bytes)
	b.ReportMetric(bytes, "catchup-B")
	if changes > 0 {
		b.ReportMetric(bytes/float64(changes), "B/change")
	}
	return bytes
}
