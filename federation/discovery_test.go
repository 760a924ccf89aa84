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

// autoOptions: the default DHT mode (auto), private addresses allowed
// (loopback), fast rounds, bootstrap peers boot.
func autoOptions(boot ...*fedtest.Peer) fedtest.Options {
	o := discoveryOptions(boot...)
	inner := o.Configure
	o.Configure = func(dir string, c *federation.Config) {
		inner(dir, c)
		c.DHT = "" // the default
	}
	return o
}

// TestDiscoveryAutoChainConverges: nodes with the default DHT mode on a
// closed network (127.0.0.1, where AutoNAT never concludes), each
// bootstrapping from the one started before it, serve the DHT and each
// connects to every other node, not only its neighbours in the chain.
// Property: with default settings enough DHT servers form for an
// all-auto federation to find itself.
func TestDiscoveryAutoChainConverges(t *testing.T) {
	clock := adptest.NewClock()
	const n = 5
	peers := make([]*fedtest.Peer, n)
	for i := range peers {
		var boot []*fedtest.Peer
		if i > 0 {
			boot = append(boot, peers[i-1])
		}
		peers[i] = fedtest.Start(t, string(rune('A'+i)), t.TempDir(), clock, 0, autoOptions(boot...))
	}
	for _, p := range peers {
		testwait.Until(t, 60*time.Second, p.Name+" connected to every other node", func() bool {
			for _, q := range peers {
				if q != p && !connectedTo(p, q) {
					return false
				}
			}
			return true
		})
	}
	for _, p := range peers {
		st := p.Fed.Discovery()
		if st.DHT != "server" || st.DHTConfigured != "auto" {
			t.Fatalf("%s: DHT %s (configured %s), want server (auto)", p.Name, st.DHT, st.DHTConfigured)
		}
		if st.RoutingTable == 0 || st.Connected < n-1 || st.Degraded {
			t.Fatalf("%s: discovery status %+v", p.Name, st)
		}
	}
	// The first and last nodes met through discovery (the DHT's rounds
	// or its queries), not as bootstrap peers.
	switch got := sourceOf(peers[n-1], peers[0]); got {
	case federation.SourceDHT, federation.SourceInbound, federation.SourceOther:
	default:
		t.Fatalf("last node's connection to the first came from %q", got)
	}
}

func sourceOf(p, q *fedtest.Peer) string {
	for _, pi := range p.Fed.Peers() {
		if pi.Connected && pi.PeerID == q.Fed.PeerID().String() {
			return pi.Source
		}
	}
	return ""
}

// TestDiscoveryDialsAnnouncedHosts: with no DHT, C (whose only peer is A)
// learns B's signed announcement through A and, below its low watermark,
// dials B at the addresses B announced; a node that may not dial private
// addresses leaves B's loopback addresses alone.
// Property: peers learned from verified announcements are dialled, within
// the private-address policy.
func TestDiscoveryDialsAnnouncedHosts(t *testing.T) {
	clock := adptest.NewClock()
	noDHT := func(static *fedtest.Peer, allowPrivate bool) fedtest.Options {
		// Reconciliation brings what gossip missed before a mesh formed.
		return fedtest.Options{ReconcileInterval: 2 * time.Second, Configure: func(dir string, c *federation.Config) {
			c.DHT = federation.DHTOff
			c.AllowPrivateAddrs = allowPrivate
			c.DiscoveryInterval = time.Second
			if static != nil {
				c.Peers = []string{static.Fed.Addrs()[0]}
			}
		}}
	}
	a := fedtest.Start(t, "A", t.TempDir(), clock, 0, noDHT(nil, true))
	b := fedtest.Start(t, "B", t.TempDir(), clock, 0, noDHT(a, true))
	c := fedtest.Start(t, "C", t.TempDir(), clock, 0, noDHT(a, true))
	d := fedtest.Start(t, "D", t.TempDir(), clock, 0, noDHT(a, false)) // public addresses only
	for _, p := range []*fedtest.Peer{b, c, d} {
		testwait.Until(t, 20*time.Second, p.Name+" in A's index mesh", func() bool { return connectedTo(p, a) && p.Fed.IndexPeers() >= 1 })
	}
	fedtest.CreateRoom(t, b, adptest.NewAgent("bob"), "public", "announced")
	knows := func(p *fedtest.Peer) bool {
		for _, h := range p.Fed.KnownHosts() {
			if h.PeerID == b.Fed.PeerID().String() {
				return true
			}
		}
		return false
	}
	// The source is noted once the dial returns, just after the
	// connection is up.
	testwait.Until(t, 30*time.Second, "C dialled B at its announced addresses", func() bool {
		return sourceOf(c, b) == federation.SourceAnnouncement
	})
	if c.Fed.Stats().Discovery.Announced.Load() == 0 {
		t.Fatal("announcement dials not counted")
	}
	// D holds B's announcement too; two rounds after, it has not dialled
	// B's loopback addresses.
	testwait.Until(t, 30*time.Second, "D learned B's announcement", func() bool { return knows(d) })
	r := d.Fed.Stats().Discovery.Rounds.Load()
	testwait.Until(t, 30*time.Second, "D ran two more rounds", func() bool { return d.Fed.Stats().Discovery.Rounds.Load() >= r+2 })
	if n := d.Fed.Stats().Discovery.Announced.Load(); n != 0 {
		t.Fatalf("D dialled %d announced peers at private addresses it may not dial", n)
	}
	if src := sourceOf(d, b); src == federation.SourceAnnouncement {
		t.Fatal("D connected to B from an announcement")
	}
}

// TestDiscoverySettlesQuietly: once every node is connected, discovery
// rounds neither put the provider record again (it lives 3 h; it is put
// every hour) nor repeat a provider lookup that found nobody new.
// Property: a settled federation's discovery costs no DHT traffic each
// round.
func TestDiscoverySettlesQuietly(t *testing.T) {
	clock := adptest.NewClock()
	o := func(boot ...*fedtest.Peer) fedtest.Options {
		ao := autoOptions(boot...)
		inner := ao.Configure
		ao.Configure = func(dir string, c *federation.Config) { inner(dir, c); c.DiscoveryInterval = 500 * time.Millisecond }
		return ao
	}
	a := fedtest.Start(t, "A", t.TempDir(), clock, 0, o())
	b := fedtest.Start(t, "B", t.TempDir(), clock, 0, o(a))
	c := fedtest.Start(t, "C", t.TempDir(), clock, 0, o(a))
	all := []*fedtest.Peer{a, b, c}
	testwait.Until(t, 30*time.Second, "everyone connected and advertised", func() bool {
		for _, p := range all {
			if p.Fed.Stats().Discovery.Advertised.Load() == 0 {
				return false
			}
			for _, q := range all {
				if p != q && !connectedTo(p, q) {
					return false
				}
			}
		}
		return true
	})
	d := &c.Fed.Stats().Discovery
	r := d.Rounds.Load()
	testwait.Until(t, 30*time.Second, "two more rounds", func() bool { return d.Rounds.Load() >= r+2 })
	adv, found, r := d.Advertised.Load(), d.Found.Load(), d.Rounds.Load()
	testwait.Until(t, 30*time.Second, "four more rounds", func() bool { return d.Rounds.Load() >= r+4 })
	if got := d.Advertised.Load(); got != adv {
		t.Fatalf("advertised %d more times in 4 settled rounds", got-adv)
	}
	if got := d.Found.Load(); got != found {
		t.Fatalf("read %d more provider records in 4 settled rounds", got-found)
	}
}
