//go:build e2e

package federation_test

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p"
	dht "github.com/libp2p/go-libp2p-kad-dht"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
	drouting "github.com/libp2p/go-libp2p/p2p/discovery/routing"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/adpnode/adpnode/federation"
	"github.com/adpnode/adpnode/internal/adptest"
	"github.com/adpnode/adpnode/internal/fedtest"
	"github.com/adpnode/adpnode/internal/testwait"
)

// junkAddrs are n addresses nobody listens on: unspecified, private,
// TEST-NET (dials time out), duplicates and transport-less ones.
func junkAddrs(n int) []ma.Multiaddr {
	out := make([]ma.Multiaddr, 0, n)
	for i := 0; len(out) < n; i++ {
		for _, s := range []string{"/ip4/0.0.0.0/tcp/%d", "/ip4/192.0.2.%d/tcp/4001", "/ip4/10.9.%d.1/udp/4001/quic-v1",
			"/ip4/192.0.2.1/tcp/4001", "/ip4/198.51.100.%d"} {
			if strings.Contains(s, "%") {
				s = fmt.Sprintf(s, i%250+1)
			}
			out = append(out, ma.StringCast(s))
		}
	}
	return out[:n]
}

// rawDHTHost is a libp2p host outside adpnode that joins the ADP DHT and
// provides under the rendezvous key with the addresses addrs returns.
func rawDHTHost(t *testing.T, ctx context.Context, boot peer.AddrInfo, mode dht.ModeOpt, addrs func([]ma.Multiaddr) []ma.Multiaddr) (host.Host, *dht.IpfsDHT) {
	t.Helper()
	h, err := libp2p.New(libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0"), libp2p.DisableRelay())
	if err != nil {
		t.Fatal(err)
	}
	kad, err := dht.New(h, dht.ProtocolPrefix(federation.DHTProtocolPrefix), dht.Mode(mode), dht.DisableValues(),
		dht.BootstrapPeers(boot), dht.AddressFilter(addrs))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { kad.Close(); h.Close() })
	if err := h.Connect(ctx, boot); err != nil {
		t.Fatal(err)
	}
	return h, kad
}

// TestDiscoveryHostileProviders: one DHT server whose provider records
// carry 500 junk addresses plus its real one, and 12 sybil identities
// whose records carry only junk, all provide under the rendezvous key at
// A. A keeps at most 8 addresses of any of them (9 with the one it is connected from); V, bootstrapping from A,
// dials at most 16 peers per round, finishes its rounds, and holds a
// bounded number of goroutines.
func TestDiscoveryHostileProviders(t *testing.T) {
	if n := len(federation.Dialable(junkAddrs(500), true)); n > 8 {
		t.Fatalf("dialable kept %d of 500 junk addresses, want ≤ 8", n)
	}
	if n := len(federation.Dialable(junkAddrs(500), false)); n != 0 {
		t.Fatalf("dialable kept %d junk addresses with private ones refused, want 0 (TEST-NET, private, unspecified)", n)
	}
	// The hostile hosts live as long as ctx: generously past the waits
	// below, which a loaded machine stretches.
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	clock := adptest.NewClock()
	a := fedtest.Start(t, "A", t.TempDir(), clock, 0, discoveryOptions())
	boot, _ := peer.AddrInfoFromString(a.Fed.Addrs()[0])
	hostile, hk := rawDHTHost(t, ctx, *boot, dht.ModeServer, func(real []ma.Multiaddr) []ma.Multiaddr {
		return append(junkAddrs(500), real...)
	})
	providers := []*dht.IpfsDHT{hk}
	for range 12 {
		_, k := rawDHTHost(t, ctx, *boot, dht.ModeClient, func([]ma.Multiaddr) []ma.Multiaddr { return junkAddrs(40) })
		providers = append(providers, k)
	}
	testwait.Until(t, 20*time.Second, "hostile routing tables hold A", func() bool {
		for _, k := range providers {
			if k.RoutingTable().Size() == 0 {
				return false
			}
		}
		return true
	})
	// Provide walks to the closest servers, the hostile one among them,
	// whose junk addresses A passes on: some of these time out, and a
	// record stored at A is all the test needs.
	var wg sync.WaitGroup
	for _, k := range providers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			actx, cancel := context.WithTimeout(ctx, 15*time.Second)
			defer cancel()
			drouting.NewRoutingDiscovery(k).Advertise(actx, federation.Rendezvous)
		}()
	}
	wg.Wait()
	// 8 from its provider record, and the one it is connected from.
	if n := len(federation.PeerAddrs(a.Fed, hostile.ID())); n > 9 {
		t.Fatalf("A holds %d addresses of the hostile provider, want ≤ 9", n)
	}
	// What one peer costs in goroutines with nothing to discover.
	before := runtime.NumGoroutine()
	c := fedtest.Start(t, "C", t.TempDir(), clock, 0, discoveryOptions())
	testwait.Until(t, 10*time.Second, "C ran two rounds", func() bool { return c.Fed.Stats().Discovery.Rounds.Load() >= 2 })
	control := runtime.NumGoroutine() - before
	base := runtime.NumGoroutine()
	v := fedtest.Start(t, "V", t.TempDir(), clock, 0, discoveryOptions(a))
	st := v.Fed.Stats()
	defer func() {
		if t.Failed() {
			t.Logf("V: %d rounds, %d provider records read, %d dials", st.Discovery.Rounds.Load(), st.Discovery.Found.Load(), st.Discovery.Dialled.Load())
		}
	}()
	testwait.Until(t, 2*time.Minute, "V ran three discovery rounds past the hostile records", func() bool {
		return st.Discovery.Rounds.Load() >= 4 && st.Discovery.Found.Load() >= 8
	})
	// Bounded by the caps, not by the records: 8 dials at once of 8
	// addresses each, DHT lookups 10 at once, a few connections.
	vcost := runtime.NumGoroutine() - base
	if vcost > control+1000 {
		t.Fatalf("V costs %d goroutines, a peer with nothing to discover %d: discovery is not bounded", vcost, control)
	}
	rounds, dialled := st.Discovery.Rounds.Load(), st.Discovery.Dialled.Load()
	if dialled > 16*rounds {
		t.Fatalf("V dialled %d peers in %d rounds, want ≤ 16 a round", dialled, rounds)
	}
	if n := len(federation.PeerAddrs(v.Fed, hostile.ID())); n > 9 {
		t.Fatalf("V holds %d addresses of the hostile provider, want ≤ 9", n)
	}
	t.Logf("V: %d rounds, %d provider records read, %d dials, %d connected; V costs %d goroutines, a quiet peer %d",
		rounds, st.Discovery.Found.Load(), dialled, st.Discovery.Connected.Load(), vcost, control)
	// Every goroutine V started has an owner: stopping V ends them.
	v.Stop()
	testwait.Until(t, 20*time.Second, "V's goroutines ended with V", func() bool { return runtime.NumGoroutine() <= base+50 })
}
