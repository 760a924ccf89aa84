package federation

import (
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
	rcmgr "github.com/libp2p/go-libp2p/p2p/host/resource-manager"

	"github.com/adpnode/adpnode/adp/identity"
)

// Limits bound what peers may cost this node. Zero values take the
// defaults named on each field.
type Limits struct {
	// Conns caps all connections (default 512); PeerConns connections
	// per peer (default 8); PeerStreams streams per peer (default 512).
	Conns, PeerConns, PeerStreams int
	// Memory caps what libp2p may reserve in all (default 512 MiB) and
	// per peer (PeerMemory, default 64 MiB).
	Memory, PeerMemory int64
	// ConnLow and ConnHigh are the connection manager's watermarks
	// (defaults 64 and 128; static peers are protected).
	ConnLow, ConnHigh int
	// SyncPerPeer is how many index-sync streams one peer may have open
	// at once (default 2).
	SyncPerPeer int
	// AnnounceBurst and AnnounceRate bound the announcements taken from
	// one host key (defaults 2048 and 4 × 10,000 per announce interval).
	AnnounceBurst int
	AnnounceRate  float64 // per second
}

func (l *Limits) defaults(interval time.Duration) {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&l.Conns, 512)
	def(&l.PeerConns, 8)
	def(&l.PeerStreams, 512)
	def(&l.ConnLow, 64)
	def(&l.ConnHigh, 128)
	def(&l.SyncPerPeer, 2)
	def(&l.AnnounceBurst, 2048)
	if l.Memory <= 0 {
		l.Memory = 512 << 20
	}
	if l.PeerMemory <= 0 {
		l.PeerMemory = 64 << 20
	}
	if l.AnnounceRate <= 0 {
		l.AnnounceRate = 4 * 10_000 / interval.Seconds()
	}
}

// resourceManager builds libp2p's resource manager with explicit limits:
// system-wide, per peer, and per ADP protocol (all streams and per peer).
func resourceManager(l Limits) (network.ResourceManager, error) {
	lv := func(n int) rcmgr.LimitVal { return rcmgr.LimitVal(n) }
	proto := func(streams, perPeer int, mem int64) (rcmgr.ResourceLimits, rcmgr.ResourceLimits) {
		return rcmgr.ResourceLimits{Streams: lv(streams), StreamsInbound: lv(streams), Memory: rcmgr.LimitVal64(mem)},
			rcmgr.ResourceLimits{Streams: lv(perPeer), StreamsInbound: lv(perPeer), Memory: rcmgr.LimitVal64(mem / 8)}
	}
	syncAll, syncPeer := proto(64, 2*l.SyncPerPeer, 64<<20)
	relayAll, relayPeer := proto(256, 16, 64<<20)
	backAll, backPeer := proto(128, 8, 128<<20)
	reconAll, reconPeer := proto(64, 2*l.SyncPerPeer, 64<<20)
	cfg := rcmgr.PartialLimitConfig{
		System: rcmgr.ResourceLimits{Conns: lv(l.Conns), ConnsInbound: lv(l.Conns), Streams: lv(16 * l.Conns),
			Memory: rcmgr.LimitVal64(l.Memory), FD: lv(l.Conns)},
		Transient:   rcmgr.ResourceLimits{Conns: lv(l.Conns / 4), Streams: lv(l.Conns), Memory: rcmgr.LimitVal64(l.Memory / 8)},
		PeerDefault: rcmgr.ResourceLimits{Conns: lv(l.PeerConns), ConnsInbound: lv(l.PeerConns), Streams: lv(l.PeerStreams), Memory: rcmgr.LimitVal64(l.PeerMemory)},
		Protocol: map[protocol.ID]rcmgr.ResourceLimits{SyncProtocol: syncAll, RelayProtocol: relayAll, BackfillProtocol: backAll,
			ReconcileProtocol: reconAll},
		ProtocolPeer: map[protocol.ID]rcmgr.ResourceLimits{SyncProtocol: syncPeer, RelayProtocol: relayPeer,
			BackfillProtocol: backPeer, ReconcileProtocol: reconPeer},
	}
	return rcmgr.NewResourceManager(rcmgr.NewFixedLimiter(cfg.Build(rcmgr.DefaultLimits.AutoScale())))
}

// hostRate is a token bucket per host key for announcements.
type hostRate struct {
	mu      sync.Mutex
	burst   float64
	rate    float64
	buckets map[identity.AgentID]*bucket
}

type bucket struct {
	tokens float64
	at     time.Time
}

const maxRateBuckets = 65536

func newHostRate(burst int, rate float64) *hostRate {
	return &hostRate{burst: float64(burst), rate: rate, buckets: map[identity.AgentID]*bucket{}}
}

// allow takes one token from key's bucket.
func (r *hostRate) allow(key identity.AgentID, now time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	b, ok := r.buckets[key]
	if !ok {
		if len(r.buckets) >= maxRateBuckets {
			for k, ob := range r.buckets { // drop buckets that have refilled
				if ob.tokens+now.Sub(ob.at).Seconds()*r.rate >= r.burst {
					delete(r.buckets, k)
				}
			}
			if len(r.buckets) >= maxRateBuckets {
				return false
			}
		}
		b = &bucket{tokens: r.burst, at: now}
		r.buckets[key] = b
	}
	b.tokens = min(r.burst, b.tokens+now.Sub(b.at).Seconds()*r.rate)
	b.at = now
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

// peerSlots counts concurrent streams per peer.
type peerSlots struct {
	mu  sync.Mutex
	max int
	n   map[peer.ID]int
}

func (s *peerSlots) acquire(id peer.ID) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.n == nil {
		s.n = map[peer.ID]int{}
	}
	if s.n[id] >= s.max {
		return false
	}
	s.n[id]++
	return true
}

func (s *peerSlots) release(id peer.ID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.n[id]--; s.n[id] <= 0 {
		delete(s.n, id)
	}
}
