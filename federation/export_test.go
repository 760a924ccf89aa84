package federation

import (
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/adpnode/adpnode/directory"
	"github.com/adpnode/adpnode/index"
)

// MarkVerified records b as verified without an HTTP check (benchmarks
// with synthetic hosts whose origins serve nothing), and not due for a
// re-check for a day: a re-check of such an origin would fail, and a
// benchmark that fills directories of 100,000 rooms outlasts the ten
// announce intervals after which a real check is due.
func MarkVerified(f *Federation, b index.Binding) {
	f.checkMu.Lock()
	f.checks[b.Key] = bindingCheck{verified: true, peerID: b.PeerID, origin: b.Origin, at: f.n.NowMs(), wall: time.Now().Add(24 * time.Hour)}
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

// LibP2PHost returns f's libp2p host (NAT tests: pings over a relayed
// connection, connection state).
func LibP2PHost(f *Federation) host.Host { return f.h }

// StallPublisher makes f's record publisher wait before its next batch of
// feed entries until resume is called.
func StallPublisher(f *Federation) (resume func()) {
	ch := make(chan struct{})
	f.stall.Store(&ch)
	return func() { f.stall.Store(nil); close(ch) }
}

// IndexFlushes counts the runs of f's index flush loop.
func IndexFlushes(f *Federation) int64 { return f.flushes.Load() }

// ScoreInspections counts f's copies of the gossipsub scores.
func ScoreInspections(f *Federation) int64 { return f.inspections.Load() }
