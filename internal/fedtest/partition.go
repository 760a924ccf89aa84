package fedtest

import (
	"sync"

	"github.com/libp2p/go-libp2p/core/control"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/adpnode/adpnode/federation"
)

// Partition stages a network partition among test peers: a peer Cut off
// can neither dial nor be dialled by any peer that uses the partition,
// whatever discovery knows of it, until Heal. Give it to every peer with
// Options.Configure = p.Configure.
type Partition struct {
	mu  sync.Mutex
	cut map[peer.ID]bool
}

// NewPartition returns a partition with nobody cut off.
func NewPartition() *Partition { return &Partition{cut: map[peer.ID]bool{}} }

// Configure installs the partition's gater in a peer's federation config.
func (p *Partition) Configure(_ string, c *federation.Config) {
	sk, err := crypto.UnmarshalEd25519PrivateKey(c.Key)
	if err != nil {
		return // federation.Start reports the bad key
	}
	self, err := peer.IDFromPrivateKey(sk)
	if err != nil {
		return
	}
	c.Gater = partitionGater{p: p, self: self}
}

// Cut isolates id: connections to and from it are refused.
func (p *Partition) Cut(id peer.ID) {
	p.mu.Lock()
	p.cut[id] = true
	p.mu.Unlock()
}

// Heal lets every peer connect again.
func (p *Partition) Heal() {
	p.mu.Lock()
	clear(p.cut)
	p.mu.Unlock()
}

func (p *Partition) allows(a, b peer.ID) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return !p.cut[a] && !p.cut[b]
}

// partitionGater is one peer's view of a Partition.
type partitionGater struct {
	p    *Partition
	self peer.ID
}

func (g partitionGater) InterceptPeerDial(id peer.ID) bool { return g.p.allows(g.self, id) }

func (g partitionGater) InterceptAddrDial(id peer.ID, _ ma.Multiaddr) bool {
	return g.p.allows(g.self, id)
}

func (g partitionGater) InterceptAccept(network.ConnMultiaddrs) bool { return true }

func (g partitionGater) InterceptSecured(_ network.Direction, id peer.ID, _ network.ConnMultiaddrs) bool {
	return g.p.allows(g.self, id)
}

func (g partitionGater) InterceptUpgraded(network.Conn) (bool, control.DisconnectReason) {
	return true, 0
}
