package federation

import (
	"context"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/p2p/host/autorelay"
)

// NATOptions choose libp2p's NAT traversal (docs/federation.md, "NAT"). The zero value
// is the default: AutoNAT v1 and v2 clients, hole punching (DCUtR) and the
// circuit relay v2 client on; the relay service, the AutoNAT dial-back
// service and port mapping off.
type NATOptions struct {
	// NoHolePunching turns DCUtR hole punching off.
	NoHolePunching bool
	// NoRelayClient turns the circuit relay v2 client (and auto-relay,
	// which reserves a slot on a connected relay while AutoNAT finds this
	// node private) off.
	NoRelayClient bool
	// RelayService lets other nodes reserve relayed connections through
	// this one (libp2p's limited relay: 2 min, 128 KiB per connection).
	RelayService bool
	// AutoNATService answers other nodes' reachability dial-back requests
	// (v1 and v2); a public node should, so that private ones learn they
	// are private.
	AutoNATService bool
	// PortMap asks the router for a port mapping (UPnP / NAT-PMP).
	PortMap bool
	// Reachability overrides AutoNAT: "public" or "private" ("": let
	// AutoNAT decide). A node known to sit behind a NAT says private and
	// looks for a relay at once.
	Reachability string
}

// natOptions are the libp2p options for o; relays for the auto-relay
// client are drawn from the connected peers of fed() (nil until Start
// has built it).
func natOptions(o NATOptions, fed func() *Federation) []libp2p.Option {
	opts := []libp2p.Option{libp2p.EnableAutoNATv2()}
	if !o.NoHolePunching {
		opts = append(opts, libp2p.EnableHolePunching())
	}
	if o.NoRelayClient {
		opts = append(opts, libp2p.DisableRelay())
	} else {
		opts = append(opts, libp2p.EnableRelay(), libp2p.EnableAutoRelayWithPeerSource(func(ctx context.Context, num int) <-chan peer.AddrInfo {
			return connectedPeers(fed(), num)
		}, autorelay.WithMinInterval(10*time.Second), autorelay.WithMinCandidates(1), autorelay.WithBootDelay(10*time.Second)))
	}
	if o.RelayService {
		opts = append(opts, libp2p.EnableRelayService())
	}
	if o.AutoNATService {
		opts = append(opts, libp2p.EnableNATService())
	}
	if o.PortMap {
		opts = append(opts, libp2p.NATPortMap())
	}
	switch o.Reachability {
	case "public":
		opts = append(opts, libp2p.ForceReachabilityPublic())
	case "private":
		opts = append(opts, libp2p.ForceReachabilityPrivate())
	}
	return opts
}

// connectedPeers offers up to num connected peers as relay candidates
// (auto-relay keeps those that speak the relay v2 hop protocol).
func connectedPeers(f *Federation, num int) <-chan peer.AddrInfo {
	ch := make(chan peer.AddrInfo, max(num, 0))
	defer close(ch)
	if f == nil {
		return ch
	}
	for _, id := range f.h.Network().Peers() {
		if len(ch) >= num {
			break
		}
		ch <- peer.AddrInfo{ID: id, Addrs: f.h.Peerstore().Addrs(id)}
	}
	return ch
}
