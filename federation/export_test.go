package federation

import (
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/adpnode/adpnode/directory"
	"github.com/adpnode/adpnode/index"
)

// MarkVerified records b as verified without an HTTP check (benchmarks
// with synthetic hosts whose origins serve nothing).
func MarkVerified(f *Federation, b index.Binding) {
	f.checkMu.Lock()
	f.checks[b.Key] = bindingCheck{verified: true, peerID: b.PeerID, origin: b.Origin, at: f.n.NowMs(), wall: time.Now()}
	f.checkMu.Unlock()
}

// PeerAddrs returns the addresses f's peerstore holds for id.
func PeerAddrs(f *Federation, id peer.ID) []ma.Multiaddr { return f.h.Peerstore().Addrs(id) }

// Dialable is the address filter of discovery.
func Dialable(addrs []ma.Multiaddr, allowPrivate bool) []ma.Multiaddr {
	return dialable(addrs, allowPrivate)
}

// AnnounceSummary signs and publishes an announcement of s as one of f's
// rooms (scale tests: rooms built directly, not through node writes).
func AnnounceSummary(f *Federation, s directory.Entry) bool { return f.announce(f.ctx, s) }
