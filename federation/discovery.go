package federation

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"time"

	dht "github.com/libp2p/go-libp2p-kad-dht"
	"github.com/libp2p/go-libp2p/core/discovery"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
	drouting "github.com/libp2p/go-libp2p/p2p/discovery/routing"
	"github.com/libp2p/go-libp2p/p2p/net/swarm"
	ma "github.com/multiformats/go-multiaddr"
	manet "github.com/multiformats/go-multiaddr/net"

	"github.com/adpnode/adpnode/fedport"
)

// Peer discovery (docs/federation.md, "Finding peers"): bootstrap peers from the
// configuration, a Kademlia DHT of ADP nodes only (protocol prefix /adp),
// provider records under one rendezvous key, gossipsub peer exchange, and
// a small cache of peers met before so that a restart does not depend on
// the bootstrap peers being up.

// DHTMode chooses how this node takes part in the ADP DHT.
type DHTMode string

const (
	// DHTAuto answers DHT queries unless AutoNAT finds the node
	// private (the default): a node whose reachability is unknown, as
	// on a closed network where no peer runs the AutoNAT service, or
	// that AutoNAT finds public, serves; one found private is a client.
	DHTAuto DHTMode = "auto"
	// DHTServer always answers DHT queries.
	DHTServer DHTMode = "server"
	// DHTClient never answers DHT queries.
	DHTClient DHTMode = "client"
	// DHTOff runs no DHT: bootstrap, static peers, peer exchange,
	// announced addresses and mDNS only.
	DHTOff DHTMode = "off"
)

// How a connected peer came (PeerInfo.Source).
const (
	SourceStatic       = "static"
	SourceBootstrap    = "bootstrap"
	SourceDHT          = "dht"
	SourceAnnouncement = "announcement"
	SourceMDNS         = "mdns"
	SourceCache        = "cache"
	SourceInbound      = "inbound"
	// SourceOther: this node dialled the peer, but not in discovery's
	// own rounds (the mirror, a relay, gossipsub peer exchange).
	SourceOther = "other"
)

// ParseDHTMode reads a DHT mode by name ("" is auto).
func ParseDHTMode(s string) (DHTMode, error) {
	switch m := DHTMode(s); m {
	case "":
		return DHTAuto, nil
	case DHTAuto, DHTServer, DHTClient, DHTOff:
		return m, nil
	}
	return "", fmt.Errorf("dht mode %q: want auto, server, client or off", s)
}

const (
	// DHTProtocolPrefix keeps ADP nodes in a DHT of their own
	// (/adp/kad/1.0.0), apart from the IPFS Amino DHT.
	DHTProtocolPrefix = "/adp"
	// Rendezvous is the namespace under which every ADP node puts a
	// provider record in the DHT (its key is the CID of its SHA-256).
	Rendezvous = "adp/federation/1.0"

	// maxFoundPerRound is how many provider records one discovery round
	// reads; maxDialsPerRound how many of them it dials (8 at a time, 5 s
	// each); maxAddrsPerPeer how many addresses of one peer it keeps.
	maxFoundPerRound = 64
	maxDialsPerRound = 16
	dialParallel     = 8
	maxAddrsPerPeer  = 8
	// maxCachedPeers is how many peers the peer cache remembers.
	maxCachedPeers = 64
	// advertiseEvery is how often the provider record is put again: it
	// lives advertiseTTL in the DHT.
	advertiseEvery = time.Hour
	advertiseTTL   = 3 * time.Hour
	// settledLookupEvery is how often a node whose last provider lookup
	// found no peer to dial looks again (new nodes dial it themselves).
	settledLookupEvery = 30 * time.Minute
	// discoveryRetry is how long a peer that discovery failed to dial
	// (found in the DHT or in an announcement) is left alone.
	discoveryRetry = 2 * time.Minute
)

// discovery is the federation's peer discovery state.
type discoveryState struct {
	boot []peer.AddrInfo
	kad  *dht.IpfsDHT // nil when DHTOff

	mu     sync.Mutex
	source map[peer.ID]string    // how this node first connected to a peer
	failed map[peer.ID]time.Time // discovery dials that failed, by peer

	// The discovery loop's own state: rounds in a row in which no
	// bootstrap peer answered, whether the last round advertised, and
	// whether the node had connections in the last round.
	bootFailures  int
	bootDown      map[peer.ID]bool // bootstrap peers whose failure streak was logged
	advertiseFail int
	hadPeers      bool
	// advertisedAt is when the provider record last went out; found
	// whether the last provider lookup found a peer to dial, and
	// lookupAt when it ran.
	advertisedAt time.Time
	found        bool
	lookupAt     time.Time
}

// parseAddrInfos reads multiaddrs ending in /p2p/<id>; what names the
// same peer twice is merged.
func parseAddrInfos(what string, addrs []string) ([]peer.AddrInfo, error) {
	var out []peer.AddrInfo
	at := map[peer.ID]int{}
	for _, s := range addrs {
		ai, err := peer.AddrInfoFromString(s)
		if err != nil {
			return nil, fmt.Errorf("%s %q: want a multiaddr ending in /p2p/<peer id>: %w", what, s, err)
		}
		if i, ok := at[ai.ID]; ok {
			out[i].Addrs = append(out[i].Addrs, ai.Addrs...)
			continue
		}
		at[ai.ID] = len(out)
		out = append(out, *ai)
	}
	return out, nil
}

// dialable keeps at most maxAddrsPerPeer distinct addresses a peer could
// be dialled at: IP or DNS addresses with a transport, never unspecified
// ones, and addresses that are not public (loopback, private, link-local,
// unroutable) only when allowed.
func dialable(addrs []ma.Multiaddr, allowPrivate bool) []ma.Multiaddr {
	seen := map[string]bool{}
	var out []ma.Multiaddr
	for _, a := range addrs {
		if len(out) >= maxAddrsPerPeer {
			break
		}
		if a == nil || seen[string(a.Bytes())] {
			continue
		}
		seen[string(a.Bytes())] = true
		if _, err := a.ValueForProtocol(ma.P_CIRCUIT); err == nil {
			out = append(out, a) // a relayed address: its relay is checked when dialled
			continue
		}
		if _, err := manet.ToIP(a); err != nil {
			if !isDNS(a) {
				continue
			}
		} else if manet.IsIPUnspecified(a) {
			continue
		}
		// Not public: loopback, private, link-local, documentation and
		// other unroutable ranges.
		if !allowPrivate && !manet.IsPublicAddr(a) {
			continue
		}
		if !hasTransport(a) {
			continue
		}
		out = append(out, a)
	}
	return out
}

func isDNS(a ma.Multiaddr) bool {
	for _, p := range []int{ma.P_DNS, ma.P_DNS4, ma.P_DNS6} {
		if _, err := a.ValueForProtocol(p); err == nil {
			return true
		}
	}
	return false
}

func hasTransport(a ma.Multiaddr) bool {
	for _, p := range []int{ma.P_TCP, ma.P_UDP} {
		if _, err := a.ValueForProtocol(p); err == nil {
			return true
		}
	}
	return false
}

// startDiscovery reads the bootstrap peers and the peer cache and starts
// the DHT (unless off) and the discovery loop.
func (f *Federation) startDiscovery() error {
	boot := f.disc.boot
	f.disc.source = map[peer.ID]string{}
	f.disc.failed = map[peer.ID]time.Time{}
	f.disc.bootDown = map[peer.ID]bool{}
	if f.cfg.DHT != DHTOff {
		// auto is libp2p's ModeAutoServer: serve unless AutoNAT finds the
		// node private. ModeAuto (serve only once AutoNAT finds it public)
		// left closed networks without a single DHT server: AutoNAT needs
		// peers running its service to conclude anything.
		mode := map[DHTMode]dht.ModeOpt{DHTAuto: dht.ModeAutoServer, DHTServer: dht.ModeServer, DHTClient: dht.ModeClient}[f.cfg.DHT]
		filter := func(as []ma.Multiaddr) []ma.Multiaddr { return dialable(as, f.cfg.AllowPrivateAddrs) }
		kad, err := dht.New(f.h, dht.ProtocolPrefix(DHTProtocolPrefix), dht.Mode(mode), dht.DisableValues(),
			dht.BootstrapPeers(append(append([]peer.AddrInfo(nil), boot...), f.static...)...), dht.AddressFilter(filter))
		if err != nil {
			return fmt.Errorf("dht: %w", err)
		}
		f.disc.kad = kad
	}
	f.goLoop(f.discoveryLoop)
	return nil
}

// appScore is the gossipsub application score: +1 for the peers the
// operator named (static and bootstrap), 0 for the others (those lists
// are set before gossipsub starts and read-only after), less the penalty
// of a peer that relayed announcements gossip would reject by
// reconciliation or index sync (penalise).
func (f *Federation) appScore(id peer.ID) float64 {
	p := f.penalty.score(id, time.Now())
	for _, ai := range f.static {
		if ai.ID == id {
			return 1 + p
		}
	}
	for _, ai := range f.disc.boot {
		if ai.ID == id {
			return 1 + p
		}
	}
	return p
}

// penalise counts an announcement that gossip would reject, relayed by
// id outside gossip, against id's score.
func (f *Federation) penalise(id peer.ID) {
	f.stats.Penalised.Add(1)
	f.penalty.add(id, time.Now())
}

// closeDiscovery stops the DHT (after the loops have stopped).
func (f *Federation) closeDiscovery() {
	if f.disc.kad != nil {
		f.disc.kad.Close()
	}
}

// discoveryLoop runs discovery rounds: right away, then at growing
// intervals (1 s doubling) up to DiscoveryInterval, ±25 %; back to 1 s
// when the node has lost every connection.
func (f *Federation) discoveryLoop(ctx context.Context) {
	wait := time.Second
	for {
		d := min(wait, f.cfg.DiscoveryInterval)
		d = d*3/4 + rand.N(d/2+1)
		f.discoverRound(ctx, d)
		f.savePeerCache()
		if wait < f.cfg.DiscoveryInterval {
			wait *= 2
		}
		if n := len(f.h.Network().Peers()); n == 0 && f.disc.hadPeers {
			wait = time.Second
			f.disc.hadPeers = false
			f.disc.advertisedAt, f.disc.lookupAt = time.Time{}, time.Time{} // start afresh
		} else if n > 0 {
			f.disc.hadPeers = true
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(d):
		}
	}
}

// discoverRound: with too few connections, dial the bootstrap peers and
// the cached peers; advertise under the rendezvous key; while under the
// low watermark, read providers and dial those not connected, and dial
// hosts known from their signed announcements at the addresses they
// announced. next is the pause before the next round (for the logs).
func (f *Federation) discoverRound(ctx context.Context, next time.Duration) {
	f.stats.Discovery.Rounds.Add(1)
	if len(f.h.Network().Peers()) < max(1, len(f.disc.boot)) {
		f.dialBootstrap(ctx, next)
		f.dialAll(ctx, f.loadPeerCache(), SourceCache)
	}
	// The provider record lives advertiseTTL: put it again every
	// advertiseEvery, not every round.
	if f.disc.kad != nil && time.Since(f.disc.advertisedAt) >= advertiseEvery {
		f.advertise(ctx)
	}
	if len(f.h.Network().Peers()) >= f.cfg.Limits.ConnLow {
		return
	}
	// A lookup that found nobody new is not repeated every round: nodes
	// that join later find this one and dial it.
	if f.disc.kad != nil && (f.disc.found || time.Since(f.disc.lookupAt) >= settledLookupEvery) {
		f.dialProviders(ctx)
	}
	if len(f.h.Network().Peers()) >= f.cfg.Limits.ConnLow {
		return
	}
	f.dialAll(ctx, f.announcedPeers(), SourceAnnouncement)
}

// dialBootstrap dials the bootstrap peers not connected; the first round
// of a streak in which none answers is logged at warn with the reason.
func (f *Federation) dialBootstrap(ctx context.Context, next time.Duration) {
	boot := f.disc.boot
	if len(boot) == 0 {
		return
	}
	errs := f.dialAll(ctx, boot, SourceBootstrap)
	if ctx.Err() != nil {
		return
	}
	up := 0
	var firstErr error
	var down []peer.AddrInfo
	for _, ai := range boot {
		if f.h.Network().Connectedness(ai.ID) == network.Connected {
			up++
			delete(f.disc.bootDown, ai.ID)
		} else {
			down = append(down, ai)
			if err := errs[ai.ID]; err != nil && firstErr == nil {
				firstErr = err
			}
		}
	}
	if up > 0 {
		if f.disc.bootFailures > 0 {
			f.log.Info("bootstrap peer reached", "connected", up, "failed_rounds", f.disc.bootFailures)
		}
		f.disc.bootFailures = 0
		// The others, each once per failure streak: a wrong or dead
		// address among working ones is worth a line too.
		for _, ai := range down {
			if f.disc.bootDown[ai.ID] {
				continue
			}
			f.disc.bootDown[ai.ID] = true
			reason := "no dialable address"
			if err := errs[ai.ID]; err != nil {
				reason = err.Error()
			}
			f.log.Warn("bootstrap peer unreachable; retrying with backoff", "peer", ai.ID.String(), "addrs", fmt.Sprint(ai.Addrs),
				"err", reason, "retry_in", next.Round(time.Millisecond).String())
		}
		return
	}
	for _, ai := range down {
		f.disc.bootDown[ai.ID] = true // reported below, all at once
	}
	f.stats.Discovery.BootstrapFailed.Add(1)
	f.disc.bootFailures++
	reason := "no dialable address"
	if firstErr != nil {
		reason = firstErr.Error()
	}
	if f.disc.bootFailures == 1 {
		f.log.Warn("no bootstrap peer reachable; retrying with backoff", "bootstrap", len(boot),
			"err", reason, "retry_in", next.Round(time.Millisecond).String())
	} else {
		f.log.Debug("bootstrap peers still unreachable", "failed_rounds", f.disc.bootFailures,
			"err", reason, "retry_in", next.Round(time.Millisecond).String())
	}
}

// advertise puts this node's provider record under the rendezvous key; a
// third failure in a row while connected is logged at warn.
func (f *Federation) advertise(ctx context.Context) {
	rd := drouting.NewRoutingDiscovery(f.disc.kad)
	actx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	_, err := rd.Advertise(actx, Rendezvous, discovery.TTL(advertiseTTL))
	if ctx.Err() != nil {
		return
	}
	if err == nil {
		f.disc.advertisedAt = time.Now()
		f.stats.Discovery.Advertised.Add(1)
		if f.disc.advertiseFail > 0 {
			f.log.Info("dht advertise succeeded", "failed_rounds", f.disc.advertiseFail)
		}
		f.disc.advertiseFail = 0
		return
	}
	f.stats.Discovery.AdvertiseFailed.Add(1)
	f.disc.advertiseFail++
	lvl := slog.LevelDebug
	if f.disc.advertiseFail == 3 && len(f.h.Network().Peers()) > 0 {
		// Connected, yet three rounds in a row no DHT server took the
		// record (the first rounds come before the routing table fills).
		lvl = slog.LevelWarn
	}
	f.log.Log(ctx, lvl, "dht advertise failed: peers find this node through bootstrap, static peers and announcements only",
		"err", err, "dht", string(f.DHTMode()), "routing_table", f.DHTRoutingTableSize())
}

// dialProviders reads the provider records under the rendezvous key and
// dials the peers not connected.
func (f *Federation) dialProviders(ctx context.Context) {
	rd := drouting.NewRoutingDiscovery(f.disc.kad)
	fctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	f.disc.lookupAt = time.Now()
	ch, err := rd.FindPeers(fctx, Rendezvous, discovery.Limit(maxFoundPerRound))
	if err != nil {
		f.disc.found = true // look again next round
		return
	}
	var todo []peer.AddrInfo
	for ai := range ch {
		f.stats.Discovery.Found.Add(1)
		if ai.ID == f.h.ID() || f.h.Network().Connectedness(ai.ID) == network.Connected || len(todo) >= maxDialsPerRound {
			continue
		}
		todo = append(todo, ai)
	}
	// Found nobody new (or a lookup that ran on an empty table): look
	// again next round only if there was someone to dial.
	f.disc.found = len(todo) > 0 || f.DHTRoutingTableSize() == 0
	f.dialAll(ctx, todo, SourceDHT)
}

// announcedPeers are the hosts of the index's unexpired announcements
// that are not connected, at the addresses their signed announcements
// give (a peer ID that does not commit to the announcing key is
// skipped), shuffled, at most maxDialsPerRound, leaving out peers whose
// last discovery dial failed less than discoveryRetry ago.
func (f *Federation) announcedPeers() []peer.AddrInfo {
	now := time.Now()
	f.disc.mu.Lock()
	for id, at := range f.disc.failed {
		if now.Sub(at) >= discoveryRetry {
			delete(f.disc.failed, id)
		}
	}
	failed := maps.Clone(f.disc.failed)
	f.disc.mu.Unlock()
	var out []peer.AddrInfo
	for _, b := range f.idx.Bindings(f.n.NowMs()) {
		id, err := peer.Decode(b.PeerID)
		if err != nil || id == f.h.ID() || f.h.Network().Connectedness(id) == network.Connected {
			continue
		}
		if _, ok := failed[id]; ok {
			continue
		}
		if k, ok := HostKeyOf(id); !ok || k != b.Key {
			continue
		}
		ai := peer.AddrInfo{ID: id}
		for _, s := range b.Addrs {
			if a, err := ma.NewMultiaddr(s); err == nil {
				ai.Addrs = append(ai.Addrs, a)
			}
		}
		out = append(out, ai)
	}
	rand.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	if len(out) > maxDialsPerRound {
		out = out[:maxDialsPerRound]
	}
	return out
}

// dialAll dials peers (at most maxDialsPerRound, dialParallel at once)
// at their dialable addresses, and returns the errors of the dials that
// failed. source says where the peers were learned.
func (f *Federation) dialAll(ctx context.Context, ais []peer.AddrInfo, source string) map[peer.ID]error {
	if len(ais) > maxDialsPerRound {
		ais = ais[:maxDialsPerRound]
	}
	var mu sync.Mutex
	errs := map[peer.ID]error{}
	sem := make(chan struct{}, dialParallel)
	var wg sync.WaitGroup
	for _, ai := range ais {
		if ai.ID == f.h.ID() || f.h.Network().Connectedness(ai.ID) == network.Connected {
			continue
		}
		ai.Addrs = dialable(ai.Addrs, f.cfg.AllowPrivateAddrs)
		if len(ai.Addrs) == 0 {
			continue
		}
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			wg.Wait()
			return errs
		}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			f.stats.Discovery.Dialled.Add(1)
			if source == SourceAnnouncement {
				f.stats.Discovery.Announced.Add(1)
			}
			if sw, ok := f.h.Network().(*swarm.Swarm); ok {
				sw.Backoff().Clear(ai.ID)
			}
			dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			if err := f.h.Connect(dctx, ai); err != nil {
				f.log.Debug("discovered peer unreachable", "peer", ai.ID, "source", source, "err", err)
				mu.Lock()
				errs[ai.ID] = err
				mu.Unlock()
				if source == SourceDHT || source == SourceAnnouncement {
					f.disc.mu.Lock()
					f.disc.failed[ai.ID] = time.Now()
					f.disc.mu.Unlock()
				}
				return
			}
			f.stats.Discovery.Connected.Add(1)
			f.noteSource(ai.ID, source)
		}()
	}
	wg.Wait()
	return errs
}

// noteSource remembers how this node first connected to a peer (the
// first source sticks until the peer cache forgets it).
func (f *Federation) noteSource(id peer.ID, source string) {
	f.disc.mu.Lock()
	defer f.disc.mu.Unlock()
	delete(f.disc.failed, id)
	if _, ok := f.disc.source[id]; !ok {
		if len(f.disc.source) >= 4*maxCachedPeers+len(f.static)+len(f.disc.boot) {
			// Bound the map: forget peers no longer connected.
			for p := range f.disc.source {
				if f.h.Network().Connectedness(p) != network.Connected {
					delete(f.disc.source, p)
				}
			}
		}
		f.disc.source[id] = source
	}
}

// sourceOf says how a connected peer came.
func (f *Federation) sourceOf(id peer.ID) string {
	for _, ai := range f.static {
		if ai.ID == id {
			return SourceStatic
		}
	}
	for _, ai := range f.disc.boot {
		if ai.ID == id {
			return SourceBootstrap
		}
	}
	f.disc.mu.Lock()
	s, ok := f.disc.source[id]
	f.disc.mu.Unlock()
	if ok {
		return s
	}
	for _, c := range f.h.Network().ConnsToPeer(id) {
		if c.Stat().Direction == network.DirOutbound {
			// DHT queries dial the peers they learn of themselves.
			if f.disc.kad != nil && f.disc.kad.RoutingTable().Find(id) != "" {
				return SourceDHT
			}
			return SourceOther
		}
	}
	return SourceInbound
}

// cachedPeer is one entry of the peer cache file.
type cachedPeer struct {
	ID    string   `json:"id"`
	Addrs []string `json:"addrs"`
}

// savePeerCache remembers up to maxCachedPeers connected peers (their
// dialable addresses) in PeerCache, atomically.
func (f *Federation) savePeerCache() {
	if f.cfg.PeerCache == "" {
		return
	}
	var out []cachedPeer
	for _, id := range f.h.Network().Peers() {
		if len(out) >= maxCachedPeers {
			break
		}
		addrs := dialable(f.h.Peerstore().Addrs(id), f.cfg.AllowPrivateAddrs)
		if len(addrs) == 0 {
			continue
		}
		cp := cachedPeer{ID: id.String()}
		for _, a := range addrs {
			cp.Addrs = append(cp.Addrs, a.String())
		}
		out = append(out, cp)
	}
	if len(out) == 0 {
		return // keep what an earlier run learned
	}
	b, _ := json.Marshal(out)
	tmp := f.cfg.PeerCache + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err == nil {
		err = os.Rename(tmp, f.cfg.PeerCache)
		if err != nil {
			f.log.Debug("peer cache", "err", err)
		}
	}
}

// loadPeerCache reads the peer cache; a missing or damaged file is no
// peers (a damaged one is logged).
func (f *Federation) loadPeerCache() []peer.AddrInfo {
	if f.cfg.PeerCache == "" {
		return nil
	}
	b, err := os.ReadFile(f.cfg.PeerCache)
	if err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			f.log.Warn("peer cache unreadable", "path", filepath.Base(f.cfg.PeerCache), "err", err)
		}
		return nil
	}
	var in []cachedPeer
	if len(b) > 1<<20 || json.Unmarshal(b, &in) != nil {
		f.log.Warn("peer cache damaged; ignored", "path", f.cfg.PeerCache)
		return nil
	}
	var out []peer.AddrInfo
	for _, cp := range in {
		if len(out) >= maxCachedPeers {
			break
		}
		id, err := peer.Decode(cp.ID)
		if err != nil {
			continue
		}
		ai := peer.AddrInfo{ID: id}
		for _, s := range cp.Addrs {
			if a, err := ma.NewMultiaddr(s); err == nil {
				ai.Addrs = append(ai.Addrs, a)
			}
		}
		out = append(out, ai)
	}
	return out
}

// DHTMode returns the mode the DHT runs in now ("off" without one):
// server while the host answers the ADP DHT protocol.
func (f *Federation) DHTMode() DHTMode {
	if f.disc.kad == nil {
		return DHTOff
	}
	for _, p := range f.h.Mux().Protocols() {
		if p == dhtProtocol {
			return DHTServer
		}
	}
	return DHTClient
}

// dhtProtocol is the ADP DHT's protocol ID, which the host handles only
// while the DHT serves.
const dhtProtocol = protocol.ID(DHTProtocolPrefix + "/kad/1.0.0")

// DHTRoutingTableSize is how many peers the DHT routing table holds.
func (f *Federation) DHTRoutingTableSize() int {
	if f.disc.kad == nil {
		return 0
	}
	return f.disc.kad.RoutingTable().Size()
}

// Discovery reports the effective state of peer discovery.
func (f *Federation) Discovery() fedport.DiscoveryStatus {
	st := fedport.DiscoveryStatus{DHT: string(f.DHTMode()), DHTConfigured: string(f.cfg.DHT), RoutingTable: f.DHTRoutingTableSize(),
		Bootstrap: len(f.disc.boot), Static: len(f.static), BySource: map[string]int{}}
	for _, id := range f.h.Network().Peers() {
		st.Connected++
		st.BySource[f.sourceOf(id)]++
	}
	if named := st.Bootstrap + st.Static; named > 0 && st.Connected == 0 {
		st.Degraded = true
		st.Reason = fmt.Sprintf("no connection: none of the %d bootstrap and static peers answers", named)
	}
	return st
}

// ExpectedDHT says, before the node runs, what DHT mode a configured mode
// and a forced reachability ("", public or private) give: auto is a
// server unless AutoNAT (or the operator) finds the node private.
func ExpectedDHT(m DHTMode, reachability string) string {
	switch m {
	case DHTAuto, "":
		switch reachability {
		case "public":
			return string(DHTServer)
		case "private":
			return string(DHTClient)
		}
		return "server unless AutoNAT finds this node private"
	}
	return string(m)
}
