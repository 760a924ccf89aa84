//go:build e2e

package adpmcp_test

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/adpnode/adpnode/internal/adptest"
	"github.com/adpnode/adpnode/internal/fedtest"
	"github.com/adpnode/adpnode/stack"
)

func benchRates() stack.Rates {
	return stack.Rates{Message: 1 << 20, Signal: 1 << 20, Control: 1 << 20, Create: 1 << 20, MessageCeiling: 1 << 20,
		SignalCeiling: 1 << 20, ControlCeiling: 1 << 20, AgentStatus: 1 << 20, JoinRequests: 1 << 20}
}

// BenchmarkToolCallOverhead compares reading the last 10 records of a
// room through read_room (MCP in-memory session, verification against
// the cached chain) with the Go client alone (room head, then a verified
// page of records).
func BenchmarkToolCallOverhead(b *testing.B) {
	h := adptest.StartHost(b, stack.NodeConfig{Rates: benchRates()})
	key := newKey(b)
	a := startAgent(b, h.URL, h.Clock, key, b.TempDir(), nil, agentOpts{})
	var room createOut
	a.must("create_room", map[string]any{"topic": "bench"}, &room)
	for i := 0; i < 20; i++ {
		var p postOut
		a.must("post", map[string]any{"room": room.RoomID, "text": fmt.Sprintf("message %d", i)}, &p)
	}
	b.Run("read_room", func(b *testing.B) {
		for b.Loop() {
			var r readOut
			a.must("read_room", map[string]any{"room": room.RoomID, "limit": 10}, &r)
		}
	})
	b.Run("client", func(b *testing.B) {
		c := adptest.SeededClient(b, h.URL, h.Clock, "bench")
		ctx := context.Background()
		for b.Loop() {
			r, err := c.Room(ctx, room.RoomID)
			if err != nil {
				b.Fatal(err)
			}
			if _, _, err := c.Events(ctx, room.RoomID, r.Head.Seq-10, 10); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkWaitWakeup measures how soon a blocked wait returns after
// another agent started a post (p50 and p99 in ms, the post's own write
// included); both agents have the same home node.
func BenchmarkWaitWakeup(b *testing.B) {
	h := adptest.StartHost(b, stack.NodeConfig{Rates: benchRates()})
	alice := startAgent(b, h.URL, h.Clock, newKey(b), b.TempDir(), nil, agentOpts{})
	bob := startAgent(b, h.URL, h.Clock, newKey(b), b.TempDir(), nil, agentOpts{})
	var room createOut
	alice.must("create_room", map[string]any{"topic": "wakeup"}, &room)
	benchWaitWakeup(b, alice, bob, room.RoomID, room.RoomID)
}

// BenchmarkWaitWakeupFederated is BenchmarkWaitWakeup across two
// federated nodes: the room is hosted on node A, where alice (home node
// A) posts; bob's home node is B and he waits on the room by its URL.
func BenchmarkWaitWakeupFederated(b *testing.B) {
	peers := fedtest.Network(b, 2, nil, fedtest.Options{Rates: benchRates(), AnnounceInterval: 300 * time.Millisecond})
	na, nb := peers[0], peers[1]
	alice := startAgent(b, na.URL, na.Clock, newKey(b), b.TempDir(), nil, agentOpts{})
	bob := startAgent(b, nb.URL, nb.Clock, newKey(b), b.TempDir(), nil, agentOpts{})
	var room createOut
	alice.must("create_room", map[string]any{"topic": "federated wakeup"}, &room)
	benchWaitWakeup(b, alice, bob, room.RoomID, room.URL)
}

// benchWaitWakeup has waiter join the room (waitRoom names it to the
// waiter), then, once per iteration, blocks a wait of the waiter on it,
// has poster post to it (postRoom names it to the poster) and records how
// long after the post started the wait returned; it reports the p50 and
// p99 in ms.
func benchWaitWakeup(b *testing.B, poster, waiter *agent, postRoom, waitRoom string) {
	var j joinOut
	waiter.must("join_room", map[string]any{"room": waitRoom}, &j)
	if j.Status != "joined" {
		b.Fatalf("join: %+v", j)
	}
	var w waitOut
	waiter.must("wait", map[string]any{"rooms": []string{waitRoom}, "mentions": false, "timeout_seconds": 0}, &w)
	var lat []time.Duration
	for i := 0; b.Loop(); i++ {
		token := fmt.Sprintf("w%d", i)
		type woke struct {
			at time.Time
			w  waitOut
		}
		done := make(chan woke, 1)
		go func() {
			var w waitOut
			waiter.callCtx(context.Background(), "wait", map[string]any{"rooms": []string{waitRoom}, "mentions": false, "timeout_seconds": 60},
				&w, mcp.Meta{"progressToken": token})
			done <- woke{time.Now(), w}
		}()
		for got := ""; got != token; {
			got = <-waiter.prog
		}
		var p postOut
		posted := time.Now() // includes the post's own write
		poster.must("post", map[string]any{"room": postRoom, "text": "ping"}, &p)
		r := <-done
		lat = append(lat, r.at.Sub(posted))
		if r.w.TimedOut || len(r.w.Events) == 0 || r.w.Events[len(r.w.Events)-1].Seq != p.Seq {
			b.Fatalf("wait after post %d: %+v", p.Seq, r.w)
		}
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	q := func(f float64) float64 { return float64(lat[int(f*float64(len(lat)-1))].Microseconds()) / 1000 }
	b.ReportMetric(q(0.5), "p50-ms")
	b.ReportMetric(q(0.99), "p99-ms")
}
