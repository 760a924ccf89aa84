//go:build e2e

package federation_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/adpnode/adpnode/internal/procnet"
	"github.com/adpnode/adpnode/internal/testwait"
)

// TestChainOfProcessesFindsItself: 20 `adpnode serve` processes with the
// default discovery settings (DHT auto; --allow-private-peers, as
// loopback needs), each started with one bootstrap peer, the node
// started before it. Every node connects beyond its neighbours in the
// chain; after SIGKILL of a middle node, a room created at one end is
// listed by every survivor.
// Property: a federation of default nodes finds itself, and survives the
// loss of a node its chain ran through.
func TestChainOfProcessesFindsItself(t *testing.T) {
	if testing.Short() {
		t.Skip("20 processes")
	}
	const n = 20
	root := t.TempDir()
	bin, err := procnet.Build(root)
	if err != nil {
		t.Fatal(err)
	}
	nodes := make([]*procnet.Node, n)
	for i := range nodes {
		var boot []*procnet.Node
		if i > 0 {
			boot = nodes[i-1 : i]
		}
		nd, err := procnet.Start(bin, root, fmt.Sprintf("n%02d", i), boot, 60*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nd.Kill)
		nodes[i] = nd
	}
	// Beyond the chain: a peer other than the node's two neighbours.
	for i, nd := range nodes {
		neighbours := map[string]bool{}
		for _, j := range []int{i - 1, i + 1} {
			if j >= 0 && j < n {
				neighbours[nodes[j].PeerID()] = true
			}
		}
		testwait.Until(t, 90*time.Second, nd.Name+" connected beyond its chain neighbours", func() bool {
			ps, err := nd.Peers()
			if err != nil {
				return false
			}
			for _, p := range ps {
				if !neighbours[p.PeerID] {
					return true
				}
			}
			return false
		})
	}
	mid := nodes[n/2]
	mid.Kill()
	topic := fmt.Sprintf("after-kill-%d", time.Now().UnixNano())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	id, err := nodes[0].CreateRoom(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	for _, nd := range nodes {
		if nd == mid {
			continue
		}
		testwait.Until(t, 60*time.Second, nd.Name+" lists the room created after the kill", func() bool {
			ok, err := nd.Lists(id, topic)
			return err == nil && ok
		})
	}
}
