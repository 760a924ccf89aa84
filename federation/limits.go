package federation

import (
	"math"
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
	// SyncPerPeer is how many index-sync streams, and how many
	// reconciliation streams, one peer may have open at once (default 2).
	SyncPerPeer int
	// AnnounceBurst and AnnounceRate bound the announcements taken from
	// one host key (defaults 2048 and 4 × 10,000 per announce interval).
	AnnounceBurst int
	AnnounceRate  float64 // per second
	// Pull bounds what the directory protocols (reconciliation and the
	// legacy index sync, together) serve one peer.
	Pull PullLimits
}

// PullLimits is a token bucket per peer: in any PullWindow a peer gets at
// most Requests streams and frames, Bytes bytes read and written, and IDs
// announcements answered, refilled evenly over the window. A request
// beyond them is refused: its stream is held for RefuseHold, then reset,
// so that a peer pulling back to back waits instead of spinning.
type PullLimits struct {
	Window   time.Duration // default 10 min
	Requests int           // default 1,024
	Bytes    int64         // default 32 MiB
	IDs      int           // default 32,768 (two full reconciliations)
	// RefuseHold defaults to 1 s.
	RefuseHold time.Duration
}

func (l *PullLimits) defaults() {
	if l.Window <= 0 {
		l.Window = 10 * time.Minute
	}
	if l.Requests <= 0 {
		l.Requests = 1024
	}
	if l.Bytes <= 0 {
		l.Bytes = 32 << 20
	}
	if l.IDs <= 0 {
		l.IDs = 2 * reconWantBatch * reconMaxFetches
	}
	if l.RefuseHold <= 0 {
		l.RefuseHold = time.Second
	}
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
	l.Pull.defaults()
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

// pullBudget holds a PullLimits bucket per peer. Its clock is the node's
// (tests move it by hand).
type pullBudget struct {
	mu  sync.Mutex
	lim PullLimits
	now func() time.Time
	m   map[peer.ID]*pullBucket
}

type pullBucket struct {
	req, bytes, ids float64
	at              time.Time
}

// maxPullBuckets bounds the buckets kept; full ones are dropped first.
const maxPullBuckets = 65536

func newPullBudget(l PullLimits, now func() time.Time) *pullBudget {
	l.defaults()
	return &pullBudget{lim: l, now: now, m: map[peer.ID]*pullBucket{}}
}

// refill brings b up to date at now.
func (p *pullBudget) refill(b *pullBucket, now time.Time) {
	el := now.Sub(b.at)
	if el <= 0 {
		return
	}
	f := float64(el) / float64(p.lim.Window)
	b.req = min(float64(p.lim.Requests), b.req+f*float64(p.lim.Requests))
	b.bytes = min(float64(p.lim.Bytes), b.bytes+f*float64(p.lim.Bytes))
	b.ids = min(float64(p.lim.IDs), b.ids+f*float64(p.lim.IDs))
	b.at = now
}

func (p *pullBudget) full(b *pullBucket) bool {
	return b.req >= float64(p.lim.Requests) && b.bytes >= float64(p.lim.Bytes) && b.ids >= float64(p.lim.IDs)
}

// take spends req requests, n bytes and ids answered from id's bucket, all
// or nothing, and reports whether it could.
func (p *pullBudget) take(id peer.ID, req int, n int64, ids int) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.now()
	b, ok := p.m[id]
	if !ok {
		if len(p.m) >= maxPullBuckets {
			for k, ob := range p.m {
				if p.refill(ob, now); p.full(ob) {
					delete(p.m, k)
				}
			}
			if len(p.m) >= maxPullBuckets {
				return false
			}
		}
		b = &pullBucket{req: float64(p.lim.Requests), bytes: float64(p.lim.Bytes), ids: float64(p.lim.IDs), at: now}
		p.m[id] = b
	}
	p.refill(b, now)
	if b.req < float64(req) || b.bytes < float64(n) || b.ids < float64(ids) {
		return false
	}
	b.req -= float64(req)
	b.bytes -= float64(n)
	b.ids -= float64(ids)
	return true
}

// penalties scores the peers that relayed, by reconciliation or index
// sync, announcements that gossip would reject, the way gossipsub scores
// a peer's invalid deliveries on the index topic (topicScore): a counter
// per peer, decaying by InvalidMessageDeliveriesDecay a second, counting
// InvalidMessageDeliveriesWeight × counter² in the peer's application
// score.
type penalties struct {
	mu sync.Mutex
	m  map[peer.ID]*penalty
}

type penalty struct {
	n  float64
	at time.Time
}

// maxPenalties bounds the peers tracked; decayed ones are dropped first.
const maxPenalties = 65536

func (p *penalties) decayed(x *penalty, now time.Time) float64 {
	n := x.n * math.Pow(topicScore().InvalidMessageDeliveriesDecay, now.Sub(x.at).Seconds())
	if n < 0.01 { // gossipsub's DecayToZero
		return 0
	}
	return n
}

// add counts one rejected announcement relayed by id.
func (p *penalties) add(id peer.ID, now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.m == nil {
		p.m = map[peer.ID]*penalty{}
	}
	x, ok := p.m[id]
	if !ok {
		if len(p.m) >= maxPenalties {
			for k, o := range p.m {
				if p.decayed(o, now) == 0 {
					delete(p.m, k)
				}
			}
			if len(p.m) >= maxPenalties {
				return
			}
		}
		x = &penalty{at: now}
		p.m[id] = x
	}
	x.n, x.at = p.decayed(x, now)+1, now
}

// score is id's (negative or zero) penalty.
func (p *penalties) score(id peer.ID, now time.Time) float64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	x, ok := p.m[id]
	if !ok {
		return 0
	}
	n := p.decayed(x, now)
	if n == 0 {
		delete(p.m, id)
		return 0
	}
	ts := topicScore()
	return ts.TopicWeight * ts.InvalidMessageDeliveriesWeight * n * n
}
