package adpmcp_test

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/adpnode/adpnode/internal/adptest"
	"github.com/adpnode/adpnode/internal/stack"
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
// included).
func BenchmarkWaitWakeup(b *testing.B) {
	h := adptest.StartHost(b, stack.NodeConfig{Rates: benchRates()})
	alice := startAgent(b, h.URL, h.Clock, newKey(b), b.TempDir(), nil, agentOpts{})
	bob := startAgent(b, h.URL, h.Clock, newKey(b), b.TempDir(), nil, agentOpts{})
	var room createOut
	alice.must("create_room", map[string]any{"topic": "wakeup"}, &room)
	var j joinOut
	bob.must("join_room", map[string]any{"room": room.RoomID}, &j)
	var w waitOut
	bob.must("wait", map[string]any{"rooms": []string{room.RoomID}, "mentions": false, "timeout_seconds": 0}, &w)
	var lat []time.Duration
	for i := 0; b.Loop(); i++ {
		token := fmt.Sprintf("w%d", i)
		done := make(chan time.Time, 1)
		go func() {
			var w waitOut
			bob.callCtx(context.Background(), "wait", map[string]any{"rooms": []string{room.RoomID}, "mentions": false, "timeout_seconds": 60},
				&w, mcp.Meta{"progressToken": token})
			done <- time.Now()
		}()
		for got := ""; got != token; {
			got = <-bob.prog
		}
		var p postOut
		posted := time.Now() // includes the post's own write
		alice.must("post", map[string]any{"room": room.RoomID, "text": "ping"}, &p)
		lat = append(lat, (<-done).Sub(posted))
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	q := func(f float64) float64 { return float64(lat[int(f*float64(len(lat)-1))].Microseconds()) / 1000 }
	b.ReportMetric(q(0.5), "p50-ms")
	b.ReportMetric(q(0.99), "p99-ms")
}
