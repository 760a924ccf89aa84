package federation

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"time"

	dht "github.com/libp2p/go-libp2p-kad-dht"
	"github.com/libp2p/go-libp2p/core/discovery"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	drouting "github.com/libp2p/go-libp2p/p2p/discovery/routing"
	"github.com/libp2p/go-libp2p/p2p/net/swarm"
	ma "github.com/multiformats/go-multiaddr"
	manet "github.com/multiformats/go-multiaddr/net"
)

// Peer discovery (docs/federation.md, "Finding peers"): bootstrap peers from the
// configuration, a Kademlia DHT of ADP nodes only (protocol prefix /adp),
// provider records under one rendezvous key, gossipsub peer exchange, and
// a small cache of peers met before so that a restart does not depend on
// the bootstrap peers being up.

// DHTMode chooses how this node takes part in the ADP DHT.
type DHTMode string

const (
	// DHTAuto answers DHT queries only once AutoNAT finds the node
	// publicly reachable (the default); until then it is a client.
	DHTAuto DHTMode = "auto"
	// DHTServer always answers DHT queries (closed networks, tests).
	DHTServer DHTMode = "server"
	// DHTClient never answers DHT queries.
	DHTClient DHTMode = "client"
	// DHTOff runs no DHT: bootstrap, static peers, peer exchange and mDNS
	// only.
	DHTOff DHTMode = "off"
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
)

// discovery is the federation's peer discovery state.
type discoveryState struct {
	boot []peer.AddrInfo
	kad  *dht.IpfsDHT // nil when DHTOff

	mu    sync.Mutex
	known map[peer.ID]bool // peers discovery connected to
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
	f.disc.known = map[peer.ID]bool{}
	if f.cfg.DHT != DHTOff {
		mode := map[DHTMode]dht.ModeOpt{DHTAuto: dht.ModeAuto, DHTServer: dht.ModeServer, DHTClient: dht.ModeClient}[f.cfg.DHT]
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
// intervals (1 s doubling) up to DiscoveryInterval, ±25 %.
func (f *Federation) discoveryLoop(ctx context.Context) {
	wait := time.Second
	for {
		f.discoverRound(ctx)
		f.savePeerCache()
		d := min(wait, f.cfg.DiscoveryInterval)
		d = d*3/4 + rand.N(d/2+1)
		if wait < f.cfg.DiscoveryInterval {
			wait *= 2
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(d):
		}
	}
}

// discoverRound: with too few connections, dial the bootstrap peers and
// the cached peers; advertise under the rendezvous key; read providers
// and dial those not connected, while under the low watermark.
func (f *Federation) discoverRound(ctx context.Context) {
	f.stats.Discovery.Rounds.Add(1)
	if len(f.h.Network().Peers()) < max(1, len(f.disc.boot)) {
		f.dialAll(ctx, append(append([]peer.AddrInfo(nil), f.disc.boot...), f.loadPeerCache()...))
	}
	if f.disc.kad == nil {
		return
	}
	rd := drouting.NewRoutingDiscovery(f.disc.kad)
	actx, cancel := context.WithTimeout(ctx, 30*time.Second)
	if _, err := rd.Advertise(actx, Rendezvous, discovery.TTL(3*time.Hour)); err == nil {
		f.stats.Discovery.Advertised.Add(1)
	} else if ctx.Err() == nil {
		f.log.Debug("dht advertise", "err", err)
	}
	cancel()
	if len(f.h.Network().Peers()) >= f.cfg.Limits.ConnLow {
		return
	}
	fctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	ch, err := rd.FindPeers(fctx, Rendezvous, discovery.Limit(maxFoundPerRound))
	if err != nil {
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
	f.dialAll(ctx, todo)
}

// dialAll dials peers (at most maxDialsPerRound, dialParallel at once)
// at their dialable addresses.
func (f *Federation) dialAll(ctx context.Context, ais []peer.AddrInfo) {
	if len(ais) > maxDialsPerRound {
		ais = ais[:maxDialsPerRound]
	}
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
			return
		}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			f.stats.Discovery.Dialled.Add(1)
			if sw, ok := f.h.Network().(*swarm.Swarm); ok {
				sw.Backoff().Clear(ai.ID)
			}
			dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			if err := f.h.Connect(dctx, ai); err != nil {
				f.log.Debug("discovered peer unreachable", "peer", ai.ID, "err", err)
				return
			}
			f.stats.Discovery.Connected.Add(1)
			f.disc.mu.Lock()
			f.disc.known[ai.ID] = true
			f.disc.mu.Unlock()
		}()
	}
	wg.Wait()
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

// DHTMode returns the mode the DHT runs in now ("off" without one).
func (f *Federation) DHTMode() DHTMode {
	if f.disc.kad == nil {
		return DHTOff
	}
	if f.disc.kad.Mode() == dht.ModeServer {
		return DHTServer
	}
	return DHTClient
}

// DHTRoutingTableSize is how many peers the DHT routing table holds.
func (f *Federation) DHTRoutingTableSize() int {
	if f.disc.kad == nil {
		return 0
	}
	return f.disc.kad.RoutingTable().Size()
}
