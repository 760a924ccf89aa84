//go:build e2e

package federation_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/adpnode/adpnode/federation"
	"github.com/adpnode/adpnode/internal/adptest"
	"github.com/adpnode/adpnode/internal/fedtest"
	"github.com/adpnode/adpnode/internal/testwait"
)

// discoveryOptions: a DHT server on 127.0.0.1 (AutoNAT would never find
// loopback public), private addresses allowed, fast rounds, a peer cache
// in the peer's directory, and bootstrap peers boot.
func discoveryOptions(boot ...*fedtest.Peer) fedtest.Options {
	var addrs []string
	for _, b := range boot {
		addrs = append(addrs, b.Fed.Addrs()[0])
	}
	return fedtest.Options{Configure: func(dir string, c *federation.Config) {
		c.Bootstrap = addrs
		c.DHT = federation.DHTServer
		c.AllowPrivateAddrs = true
		c.DiscoveryInterval = 2 * time.Second
		c.PeerCache = filepath.Join(dir, "peers.json")
	}}
}

func connectedTo(p, q *fedtest.Peer) bool {
	for _, pi := range p.Fed.Peers() {
		if pi.Connected && pi.PeerID == q.Fed.PeerID().String() {
			return true
		}
	}
	return false
}

// TestDiscoveryFromOneBootstrap: B, C and D know only A; E, started with
// A's address alone, finds and connects to B, C and D through the ADP DHT
// and the rendezvous provider records. Restarted while A is down, E
// reconnects to them from its peer cache.
func TestDiscoveryFromOneBootstrap(t *testing.T) {
	clock := adptest.NewClock()
	a := fedtest.Start(t, "A", t.TempDir(), clock, 0, discoveryOptions())
	others := make([]*fedtest.Peer, 3)
	for i := range others {
		others[i] = fedtest.Start(t, string(rune('B'+i)), t.TempDir(), clock, 0, discoveryOptions(a))
	}
	for _, p := range append(others, a) {
		testwait.Until(t, 20*time.Second, p.Name+" advertised under the rendezvous key", func() bool {
			return p.Fed.Stats().Discovery.Advertised.Load() > 0
		})
	}
	e := fedtest.Start(t, "E", t.TempDir(), clock, 0, discoveryOptions(a))
	took := testwait.Until(t, 30*time.Second, "E connected to B, C and D", func() bool {
		for _, p := range others {
			if !connectedTo(e, p) {
				return false
			}
		}
		return true
	})
	t.Logf("E found B, C, D in %v; DHT routing table %d, provider records read %d", took.Round(time.Millisecond),
		e.Fed.DHTRoutingTableSize(), e.Fed.Stats().Discovery.Found.Load())
	if got := e.Fed.DHTMode(); got != federation.DHTServer {
		t.Fatalf("E's DHT mode %s, want server", got)
	}
	testwait.Until(t, 20*time.Second, "E read the rendezvous provider records of the others", func() bool {
		return e.Fed.Stats().Discovery.Found.Load() >= 4
	})
	// Index gossip reaches E through the peers it found, not only A.
	testwait.Until(t, 10*time.Second, "E's index mesh includes the discovered peers", func() bool { return e.Fed.IndexPeers() >= 3 })

	// Let a round write the peer cache, then restart E with its only
	// bootstrap peer down.
	testwait.Until(t, 10*time.Second, "peer cache written", func() bool {
		return e.Fed.Stats().Discovery.Rounds.Load() >= 3
	})
	a.Stop()
	e = e.Restart(t)
	testwait.Until(t, 30*time.Second, "restarted E reconnected to B, C, D without its bootstrap peer", func() bool {
		for _, p := range others {
			if !connectedTo(e, p) {
				return false
			}
		}
		return true
	})
}
