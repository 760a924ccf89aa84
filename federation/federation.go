package federation

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/libp2p/go-libp2p"
	pubsub "github.com/libp2p/go-libp2p-pubsub"
	pb "github.com/libp2p/go-libp2p-pubsub/pb"
	coreconnmgr "github.com/libp2p/go-libp2p/core/connmgr"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/metrics"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/p2p/discovery/mdns"
	"github.com/libp2p/go-libp2p/p2p/net/connmgr"
	"github.com/libp2p/go-libp2p/p2p/net/swarm"
	quic "github.com/libp2p/go-libp2p/p2p/transport/quic"
	"github.com/libp2p/go-libp2p/p2p/transport/tcp"
	libp2pwebrtc "github.com/libp2p/go-libp2p/p2p/transport/webrtc"
	ws "github.com/libp2p/go-libp2p/p2p/transport/websocket"
	webtransport "github.com/libp2p/go-libp2p/p2p/transport/webtransport"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/adpnode/adpnode/adp/assertion"
	"github.com/adpnode/adpnode/adp/identity"
	"github.com/adpnode/adpnode/fedport"
	"github.com/adpnode/adpnode/index"
	"github.com/adpnode/adpnode/internal/periodic"
)

// Topic names.
const (
	IndexTopic        = "adp/index/1.0"
	recordTopicPrefix = "adp/records/1.0/"
	maxGossipBytes    = 1 << 20
)

// RecordTopic is the per-host record stream topic of a host (docs/federation.md:
// "Record streams" explains per-host rather than per-room topics).
func RecordTopic(id peer.ID) string { return recordTopicPrefix + id.String() }

// Config configures a federation peer.
type Config struct {
	Key         ed25519.PrivateKey
	ListenAddrs []string // multiaddrs, e.g. /ip4/127.0.0.1/tcp/4001, /ip4/127.0.0.1/udp/4001/quic-v1
	Peers       []string // static peers: multiaddrs ending in /p2p/<peer id>
	MDNS        bool
	// Bootstrap peers (multiaddrs ending in /p2p/<peer id>) are dialled
	// at start and whenever this node has no connections, and seed the
	// DHT; unlike static peers they are not kept connected.
	Bootstrap []string
	// DHT is how this node takes part in the ADP DHT (default auto:
	// server unless AutoNAT finds it private).
	DHT DHTMode
	// DiscoveryInterval is the longest pause between discovery rounds
	// (advertise under the rendezvous key, find providers, connect while
	// under the low watermark); default 5 min, the first rounds sooner.
	DiscoveryInterval time.Duration
	// AllowPrivateAddrs keeps loopback, private and link-local addresses
	// learned from the DHT and dials them (tests, closed networks).
	AllowPrivateAddrs bool
	// PeerCache is a file remembering peers met, dialled after a restart
	// when no peer is connected ("": none).
	PeerCache string
	// NAT: AutoNAT, hole punching, relay client (on), relay service and
	// UPnP/NAT-PMP port mapping (off).
	NAT NATOptions
	// AnnounceInterval paces binding re-checks and the default
	// per-host announcement rate (rooms are announced when they change,
	// not every interval: see AnnounceTTL).
	AnnounceInterval time.Duration
	// AnnounceTTL is how long an announcement of a live room is valid
	// (default 6 h); each is refreshed after TTL/6..TTL/2 (uniformly
	// spread) if nothing changed sooner.
	AnnounceTTL time.Duration
	// ReconcileInterval is how often the directory is reconciled with
	// every connected peer (default 2 min, ±25 %); also on connect.
	ReconcileInterval time.Duration
	// TombstoneTTL is how long ended/cancelled rooms stay announced.
	TombstoneTTL time.Duration
	// Reconnect is the initial static-peer redial backoff (doubles to 1 min).
	Reconnect time.Duration
	// AllowPrivateOrigins lets binding cross-checks reach loopback and
	// private addresses (tests, closed networks).
	AllowPrivateOrigins bool
	// PrivateOriginsHint tells the operator how to allow private origins
	// (logged once with the first check refused for that reason).
	PrivateOriginsHint string
	// Limits bound what peers may cost this node (resource manager,
	// connection manager, index-sync streams, announcement rate).
	Limits Limits
	// Index bounds what the index takes from any one host; MaxTTL
	// defaults to AnnounceTTL plus a sixth.
	Index index.Limits
	// Gater, when set, may refuse connections (libp2p's connection
	// gater): a firewall in the node, and how tests stage a partition
	// that discovery cannot heal. Nil: every connection the limits allow.
	Gater coreconnmgr.ConnectionGater
	Log   *slog.Logger
}

func (c *Config) defaults() {
	if c.AnnounceInterval == 0 {
		c.AnnounceInterval = 30 * time.Second
	}
	if c.AnnounceTTL == 0 {
		c.AnnounceTTL = 6 * time.Hour
	}
	if c.ReconcileInterval == 0 {
		c.ReconcileInterval = 2 * time.Minute
	}
	if c.TombstoneTTL == 0 {
		c.TombstoneTTL = 24 * time.Hour
	}
	if c.Reconnect == 0 {
		c.Reconnect = time.Second
	}
	if c.Log == nil {
		c.Log = slog.Default()
	}
	if c.DHT == "" {
		c.DHT = DHTAuto
	}
	if c.DiscoveryInterval == 0 {
		c.DiscoveryInterval = 5 * time.Minute
	}
	c.Limits.defaults(c.AnnounceInterval)
	if c.Index.MaxTTL == 0 {
		c.Index.MaxTTL = c.AnnounceTTL + c.AnnounceTTL/6
	}
	if len(c.ListenAddrs) == 0 {
		c.ListenAddrs = []string{"/ip4/127.0.0.1/tcp/0", "/ip4/127.0.0.1/udp/0/quic-v1"}
	}
}

// Federation is one node's federation peer.
type Federation struct {
	flushes     atomic.Int64 // runs of the index flush loop (tests)
	inspections atomic.Int64 // gossipsub score inspections (tests)
	cfg         Config
	n           Host
	idx         *index.Index
	signer      *assertion.Signer
	h           host.Host
	ps          *pubsub.PubSub
	bw          *metrics.BandwidthCounter
	log         *slog.Logger

	idxTopic *pubsub.Topic
	recTopic *pubsub.Topic

	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	closeMu sync.RWMutex // orders goroutine starts against Close

	announceQ chan announceReq              // rooms whose entry changed
	feedFrom  uint64                        // the feed seq the record publisher starts after (publisherStart)
	stall     atomic.Pointer[chan struct{}] // tests: while set, the record publisher waits for it to close

	subMu    sync.Mutex
	recSubs  map[peer.ID]*recordSub // remote hosts' record topics we follow
	backfill BackfillSource

	static []peer.AddrInfo // static peers, set in Start before any goroutine reads them
	disc   discoveryState

	checkMu   sync.Mutex
	checks    map[identity.AgentID]bindingCheck
	queued    map[identity.AgentID]bool
	checkQ    chan index.Binding
	inflight  map[identity.AgentID]chan struct{}
	inline    chan struct{}
	retry     map[identity.AgentID]pendingRetry // failed checks to retry soon
	retryKick chan struct{}

	rate      *hostRate
	pull      *pullBudget // reconciliation and index sync served, per peer
	penalty   penalties   // peers that relayed announcements gossip would reject
	syncSlots peerSlots
	snapMu    sync.Mutex
	snap      syncSnapshot
	snapDirty atomic.Bool // the index or the local rooms changed since snap
	// reconStale: a verified entry or an own announcement changed since
	// the reconciliation set was built.
	reconStale atomic.Bool

	pubMu     sync.Mutex
	published map[string]published // room ID -> this node's latest announcement
	bounds    boundaries           // rooms' next status changes by the clock

	reconMu    sync.Mutex
	recon      *reconSet
	reconBusy  map[peer.ID]bool // sessions this node initiated, by peer
	reconSlots peerSlots        // sessions served, by peer

	stats Stats

	scoreMu sync.Mutex
	scores  map[peer.ID]float64 // gossipsub scores, refreshed every second

	privateNoted atomic.Bool // a check refused for a private origin was logged
}

func (f *Federation) keepScores(m map[peer.ID]float64) {
	f.inspections.Add(1)
	f.scoreMu.Lock()
	f.scores = m
	f.scoreMu.Unlock()
}

// PeerScore returns a peer's gossipsub score as last inspected (peers
// whose messages validators reject go negative).
func (f *Federation) PeerScore(id peer.ID) (float64, bool) {
	f.scoreMu.Lock()
	defer f.scoreMu.Unlock()
	s, ok := f.scores[id]
	return s, ok
}

// Start brings up the libp2p host, joins the topics, registers validators
// and starts announcing the node's rooms.
func Start(cfg Config, n Host, idx *index.Index) (*Federation, error) {
	cfg.defaults()
	sk, err := crypto.UnmarshalEd25519PrivateKey(cfg.Key)
	if err != nil {
		return nil, err
	}
	listen := make([]ma.Multiaddr, 0, len(cfg.ListenAddrs))
	for _, s := range cfg.ListenAddrs {
		a, err := ma.NewMultiaddr(s)
		if err != nil {
			return nil, fmt.Errorf("libp2p listen address %q: %w", s, err)
		}
		listen = append(listen, a)
	}
	cm, err := connmgr.NewConnManager(cfg.Limits.ConnLow, cfg.Limits.ConnHigh, connmgr.WithGracePeriod(time.Minute))
	if err != nil {
		return nil, err
	}
	rm, err := resourceManager(cfg.Limits)
	if err != nil {
		return nil, fmt.Errorf("resource manager: %w", err)
	}
	bw := metrics.NewBandwidthCounter()
	// The default TCP transport sets SO_REUSEPORT, so a second node on the
	// same port would share it silently; without it, and listening on
	// each address one by one, a port in use fails Start by name.
	// Relays are found among connected peers: f is set below, before
	// the host has any peer to offer.
	var self atomic.Pointer[Federation]
	opts := []libp2p.Option{libp2p.Identity(sk), libp2p.NoListenAddrs, libp2p.ConnectionManager(cm),
		libp2p.Transport(tcp.NewTCPTransport, tcp.DisableReuseport()), libp2p.Transport(quic.NewTransport),
		libp2p.Transport(ws.New), libp2p.Transport(webtransport.New), libp2p.Transport(libp2pwebrtc.New),
		libp2p.ResourceManager(rm), libp2p.BandwidthReporter(bw), libp2p.Ping(true)}
	opts = append(opts, natOptions(cfg.NAT, self.Load)...)
	if cfg.Gater != nil {
		opts = append(opts, libp2p.ConnectionGater(cfg.Gater))
	}
	h, err := libp2p.New(opts...)
	if err != nil { // libp2p closes rm and cm itself
		return nil, fmt.Errorf("libp2p host: %w", err)
	}
	for _, a := range listen {
		if err := h.Network().Listen(a); err != nil {
			h.Close()
			return nil, fmt.Errorf("libp2p listen %s: %w (is another node using this port? choose another with --p2p-listen)", a, err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	f := &Federation{cfg: cfg, n: n, idx: idx, signer: assertion.NewSigner(cfg.Key), h: h, bw: bw, log: cfg.Log,
		ctx: ctx, cancel: cancel, announceQ: make(chan announceReq, 16384),
		recSubs: map[peer.ID]*recordSub{}, checks: map[identity.AgentID]bindingCheck{}, queued: map[identity.AgentID]bool{},
		checkQ: make(chan index.Binding, 1024), retry: map[identity.AgentID]pendingRetry{}, retryKick: make(chan struct{}, 1), inflight: map[identity.AgentID]chan struct{}{}, inline: make(chan struct{}, inlineWaiters), rate: newHostRate(cfg.Limits.AnnounceBurst, cfg.Limits.AnnounceRate),
		syncSlots: peerSlots{max: cfg.Limits.SyncPerPeer}, reconSlots: peerSlots{max: cfg.Limits.SyncPerPeer},
		published: map[string]published{}, reconBusy: map[peer.ID]bool{},
		pull: newPullBudget(cfg.Limits.Pull, func() time.Time { return time.UnixMilli(n.NowMs()) })}
	self.Store(f)
	f.loadChecks()
	f.loadOwn()
	idx.SetLimits(cfg.Index)
	idx.SetVerifier(f.Verified)
	idx.Reverify()
	for _, s := range cfg.Peers {
		ai, err := peer.AddrInfoFromString(s)
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("peer %q: %w", s, err)
		}
		f.static = append(f.static, *ai)
		h.ConnManager().Protect(ai.ID, "static")
	}
	if f.disc.boot, err = parseAddrInfos("bootstrap peer", cfg.Bootstrap); err != nil {
		f.Close()
		return nil, err
	}
	if err := f.startPubSub(); err != nil {
		f.Close()
		return nil, err
	}
	if err := f.startDiscovery(); err != nil {
		f.Close()
		return nil, err
	}
	h.SetStreamHandler(RelayProtocol, f.serveRelay)
	h.SetStreamHandler(BackfillProtocol, f.serveBackfill)
	h.SetStreamHandler(SyncProtocol, f.serveSync)
	h.SetStreamHandler(ReconcileProtocol, f.serveReconcile)
	h.Network().Notify(syncNotifiee{f})
	f.feedFrom = f.publisherStart()
	f.goLoop(f.dialLoop)
	f.goLoop(f.announceLoop)
	f.goLoop(f.antiEntropyLoop)
	f.goLoop(f.publishLoop)
	f.goLoop(f.bindingLoop)
	f.goLoop(f.retryLoop)
	for i := 0; i < bindingCheckers; i++ {
		f.goLoop(f.checkWorker)
	}
	if cfg.MDNS {
		svc := mdns.NewMdnsService(h, "adpnode", mdnsNotifee{f})
		if err := svc.Start(); err != nil {
			f.log.Warn("mdns", "err", err)
		} else {
			f.goLoop(func(ctx context.Context) { <-ctx.Done(); svc.Close() })
		}
	}
	// Gossip lands in the index in memory; it reaches the disk in one
	// batch a second at most (and when the federation stops), not one
	// synced write per announcement under the index lock. The loop sleeps
	// while nothing is pending (a failed batch stays pending and wakes it
	// again).
	f.goLoop(func(ctx context.Context) {
		periodic.Loop(ctx, f.idx.Dirty(), indexFlushInterval, 0, func() time.Duration {
			f.flushes.Add(1)
			if err := f.idx.Flush(); err != nil {
				f.log.Warn("store index entries", "err", err, "pending", f.idx.Pending())
			}
			return 0
		})
	})
	f.log.Info("federation up", "peer_id", h.ID().String(), "host_key", f.signer.HostKey(), "addrs", f.Addrs(),
		"dht", string(f.DHTMode()), "dht_configured", string(cfg.DHT), "bootstrap", len(f.disc.boot), "static", len(f.static), "conn_low", cfg.Limits.ConnLow, "conn_high", cfg.Limits.ConnHigh)
	return f, nil
}

// goLoop runs fn on a goroutine the federation owns; it does nothing once
// Close has begun.
func (f *Federation) goLoop(fn func(context.Context)) {
	f.closeMu.RLock()
	defer f.closeMu.RUnlock()
	if f.ctx.Err() != nil {
		return
	}
	f.wg.Add(1)
	go func() { defer f.wg.Done(); fn(f.ctx) }()
}

// Close leaves the federation: stops every loop, then the libp2p host.
func (f *Federation) Close() error {
	f.closeMu.Lock()
	f.cancel()
	f.closeMu.Unlock()
	f.wg.Wait()
	f.savePeerCache()
	f.closeDiscovery()
	if err := f.idx.Flush(); err != nil {
		f.log.Warn("store index entries", "err", err)
	}
	return f.h.Close()
}

// scoreInspectEvery is how often the peers' gossipsub scores are copied
// for PeerScore. Scoring itself (decay, penalties, the mesh) is
// gossipsub's and runs on its own intervals; the copy is only read.
const scoreInspectEvery = 5 * time.Second

// indexFlushInterval is how often received index entries are stored.
const indexFlushInterval = time.Second

// PeerID returns this node's libp2p peer ID.
func (f *Federation) PeerID() peer.ID { return f.h.ID() }

// HostKey returns this node's did:agent: host key.
func (f *Federation) HostKey() identity.AgentID { return f.signer.HostKey() }

// Addrs returns the full multiaddrs (with /p2p/) peers can dial.
func (f *Federation) Addrs() []string {
	var out []string
	for _, a := range f.h.Addrs() {
		out = append(out, a.Encapsulate(ma.StringCast("/p2p/"+f.h.ID().String())).String())
	}
	sort.Strings(out)
	return out
}

// Bandwidth returns total bytes in and out of this libp2p host.
func (f *Federation) Bandwidth() (in, out int64) {
	t := f.bw.GetBandwidthTotals()
	return t.TotalIn, t.TotalOut
}

// BandwidthByProtocol returns bytes in and out by libp2p protocol ID.
func (f *Federation) BandwidthByProtocol() map[string][2]int64 {
	out := map[string][2]int64{}
	for p, st := range f.bw.GetBandwidthByProtocol() {
		out[string(p)] = [2]int64{st.TotalIn, st.TotalOut}
	}
	return out
}

// PeerInfo describes one connected or configured peer.
type PeerInfo = fedport.PeerInfo

// Peers lists connected peers and configured static peers.
func (f *Federation) Peers() []PeerInfo {
	m := map[peer.ID]*PeerInfo{}
	for _, id := range f.h.Network().Peers() {
		pi := &PeerInfo{PeerID: id.String(), Connected: true, Addrs: []string{}, Source: f.sourceOf(id)}
		for _, c := range f.h.Network().ConnsToPeer(id) {
			pi.Addrs = append(pi.Addrs, c.RemoteMultiaddr().String())
		}
		m[id] = pi
	}
	for _, s := range f.static {
		pi, ok := m[s.ID]
		if !ok {
			pi = &PeerInfo{PeerID: s.ID.String(), Addrs: []string{}}
			for _, a := range s.Addrs {
				pi.Addrs = append(pi.Addrs, a.String())
			}
			m[s.ID] = pi
		}
		pi.Static = true
	}
	out := make([]PeerInfo, 0, len(m))
	bound := map[identity.AgentID]index.Binding{}
	for _, b := range f.idx.Bindings(f.n.NowMs()) {
		bound[b.Key] = b
	}
	for id, pi := range m {
		if k, ok := HostKeyOf(id); ok {
			pi.HostKey = k
			if b, ok := bound[k]; ok {
				pi.NotListed = f.notListed(b)
			}
		}
		out = append(out, *pi)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].PeerID < out[j].PeerID })
	return out
}

// Connect dials a peer given as a multiaddr with /p2p/.
func (f *Federation) Connect(ctx context.Context, addr string) error {
	ai, err := peer.AddrInfoFromString(addr)
	if err != nil {
		return err
	}
	return f.h.Connect(ctx, *ai)
}

// dialLoop keeps static peers connected, redialling with exponential
// backoff per peer.
func (f *Federation) dialLoop(ctx context.Context) {
	if len(f.static) == 0 {
		return // nothing to keep connected: no ticker on an idle node
	}
	next := map[peer.ID]time.Time{}
	wait := map[peer.ID]time.Duration{}
	failed := map[peer.ID]int{}   // dials failed in the current streak
	dialled := map[peer.ID]bool{} // the loop has connected to the peer before
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	for {
		now := time.Now()
		for _, ai := range f.static {
			if f.h.Network().Connectedness(ai.ID) == network.Connected {
				wait[ai.ID] = 0
				continue
			}
			if now.Before(next[ai.ID]) {
				continue
			}
			// This loop keeps its own backoff (1 s doubling to 1 min);
			// the swarm's (5 s growing to 5 min) would hold a static
			// peer back long after it came back.
			if sw, ok := f.h.Network().(*swarm.Swarm); ok {
				sw.Backoff().Clear(ai.ID)
			}
			dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			err := f.h.Connect(dctx, ai)
			cancel()
			if ctx.Err() != nil {
				return
			}
			if err != nil {
				w := wait[ai.ID]
				if w == 0 {
					w = f.cfg.Reconnect
				} else {
					w = min(2*w, time.Minute)
				}
				wait[ai.ID], next[ai.ID] = w, now.Add(w)
				failed[ai.ID]++
				if failed[ai.ID] == 1 {
					// Once per failure streak; the retries follow at debug.
					f.log.Info("static peer unreachable; retrying with backoff", "peer", ai.ID, "addrs", ai.Addrs,
						"retry_in", w.String(), "next_retry", next[ai.ID].UTC().Format(time.RFC3339), "err", err)
				} else {
					f.log.Debug("static peer dial failed", "peer", ai.ID, "failures", failed[ai.ID], "retry_in", w.String(), "err", err)
				}
				continue
			}
			msg := "static peer connected"
			if dialled[ai.ID] || failed[ai.ID] > 0 {
				msg = "static peer reconnected"
			}
			f.log.Info(msg, "peer", ai.ID, "failed_dials", failed[ai.ID])
			failed[ai.ID], wait[ai.ID], dialled[ai.ID] = 0, 0, true
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

type mdnsNotifee struct{ f *Federation }

func (m mdnsNotifee) HandlePeerFound(ai peer.AddrInfo) {
	if ai.ID == m.f.h.ID() {
		return
	}
	ctx, cancel := context.WithTimeout(m.f.ctx, 5*time.Second)
	defer cancel()
	if m.f.h.Connect(ctx, ai) == nil { // best effort: mDNS announces the peer again
		m.f.noteSource(ai.ID, SourceMDNS)
	}
}

// msgID identifies gossip messages by content, so that the same signed
// bytes relayed by different peers are one message.
func msgID(m *pb.Message) string {
	s := sha256.Sum256(m.Data)
	return hex.EncodeToString(s[:16])
}

func (f *Federation) startPubSub() error {
	params := &pubsub.PeerScoreParams{
		SkipAtomicValidation: true,
		// Peers the operator named (static, bootstrap) start at +1; others
		// earn a positive score by time in the mesh (0.01 a second) and
		// first deliveries. Peer exchange is taken only from peers at
		// AcceptPXThreshold (1) or more.
		AppSpecificScore:  f.appScore,
		AppSpecificWeight: 1,
		// All test peers share 127.0.0.1, and operators may run several
		// nodes behind one address: no IP colocation penalty.
		IPColocationFactorWeight: 0,
		BehaviourPenaltyWeight:   -10, BehaviourPenaltyThreshold: 6, BehaviourPenaltyDecay: 0.9,
		DecayInterval: time.Second, DecayToZero: 0.01, RetainScore: 10 * time.Minute,
		Topics: map[string]*pubsub.TopicScoreParams{IndexTopic: topicScore()},
	}
	thresholds := &pubsub.PeerScoreThresholds{SkipAtomicValidation: true,
		GossipThreshold: -100, PublishThreshold: -200, GraylistThreshold: graylistThreshold, AcceptPXThreshold: 1, OpportunisticGraftThreshold: 5}
	ps, err := pubsub.NewGossipSub(f.ctx, f.h,
		pubsub.WithMessageIdFn(msgID),
		pubsub.WithPeerExchange(true),
		pubsub.WithMaxMessageSize(maxGossipBytes),
		pubsub.WithPeerScore(params, thresholds),
		pubsub.WithPeerScoreInspect(pubsub.PeerScoreInspectFn(f.keepScores), scoreInspectEvery),
		pubsub.WithMessageSignaturePolicy(pubsub.StrictSign),
		pubsub.WithValidateQueueSize(4096),
		// The default per-peer queue (32) silently drops bursts of
		// announcements and records; BenchmarkIndexConvergence found it.
		pubsub.WithPeerOutboundQueueSize(4096),
	)
	if err != nil {
		return fmt.Errorf("gossipsub: %w", err)
	}
	f.ps = ps
	if err := ps.RegisterTopicValidator(IndexTopic, f.validateAnnouncement, pubsub.WithValidatorTimeout(2*inlineTimeout)); err != nil {
		return err
	}
	if f.idxTopic, err = ps.Join(IndexTopic); err != nil {
		return err
	}
	sub, err := f.idxTopic.Subscribe(pubsub.WithBufferSize(4096))
	if err != nil {
		return err
	}
	f.goLoop(func(ctx context.Context) { f.consumeIndex(ctx, sub) })
	own := RecordTopic(f.h.ID())
	if err := ps.RegisterTopicValidator(own, f.validateRecord); err != nil {
		return err
	}
	if f.recTopic, err = ps.Join(own); err != nil {
		return err
	}
	return nil
}

// topicScore penalises invalid deliveries hard and rewards first
// deliveries a little (gossipsub v1.1 scoring).
func topicScore() *pubsub.TopicScoreParams {
	return &pubsub.TopicScoreParams{SkipAtomicValidation: true, TopicWeight: 1, TimeInMeshQuantum: time.Second,
		TimeInMeshWeight: 0.01, TimeInMeshCap: 3600,
		FirstMessageDeliveriesWeight: 1, FirstMessageDeliveriesDecay: 0.5, FirstMessageDeliveriesCap: 20,
		InvalidMessageDeliveriesWeight: -100, InvalidMessageDeliveriesDecay: 0.3}
}

// graylistThreshold is the gossipsub score under which a peer's messages
// are ignored; reconciliation and index sync stop taking announcements
// from a peer whose penalty alone reaches it.
const graylistThreshold = -400

// bindingCheckers is how many binding checks run at once.
const bindingCheckers = 2

// Stats counts gossip validation outcomes (for metrics and tests), and
// why announcements were refused.
type Stats = fedport.GossipStats

// DiscoveryStats counts what discovery did: rounds run, provider records
// read, dials, dials that connected, advertisements that went through.
type DiscoveryStats = fedport.DiscoveryStats

// Stats returns the federation's counters.
func (f *Federation) Stats() *Stats { return &f.stats }

// count records a validation result and returns it.
func (f *Federation) count(r pubsub.ValidationResult) pubsub.ValidationResult {
	switch r {
	case pubsub.ValidationAccept:
		f.stats.Accepted.Add(1)
	case pubsub.ValidationReject:
		f.stats.Rejected.Add(1)
	default:
		f.stats.Ignored.Add(1)
	}
	return r
}

// IndexPeers returns how many peers this node knows subscribe to the index
// topic.
func (f *Federation) IndexPeers() int { return len(f.ps.ListPeers(IndexTopic)) }

// TopicPeers returns the peers this node knows subscribe to topic: a test
// waits on it instead of sleeping until a mesh forms.
func (f *Federation) TopicPeers(topic string) []peer.ID { return f.ps.ListPeers(topic) }
