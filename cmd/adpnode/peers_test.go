package main

import (
	"strings"
	"testing"

	"github.com/adpnode/adpnode/fedport"
)

// Property: adpnode peers shows the discovery state in effect: the DHT
// mode the node runs in beside the configured one, the routing table,
// connections by source, and why federation is degraded.
func TestPeersPrintsDiscovery(t *testing.T) {
	var b strings.Builder
	printDiscovery(&b, &fedport.DiscoveryStatus{DHT: "server", DHTConfigured: "auto", RoutingTable: 7, Bootstrap: 1,
		Connected: 3, BySource: map[string]int{"dht": 2, "bootstrap": 1}})
	want := "DHT server (configured auto), routing table 7; connected 3 (bootstrap 1, dht 2); bootstrap 1, static 0\n"
	if b.String() != want {
		t.Fatalf("got %q, want %q", b.String(), want)
	}
	b.Reset()
	printDiscovery(&b, &fedport.DiscoveryStatus{DHT: "client", DHTConfigured: "auto", Bootstrap: 2, BySource: map[string]int{},
		Degraded: true, Reason: "no connection: none of the 2 bootstrap and static peers answers"})
	if !strings.Contains(b.String(), "federation degraded: no connection") || !strings.Contains(b.String(), "connected 0;") {
		t.Fatalf("degraded node: %q", b.String())
	}
}
