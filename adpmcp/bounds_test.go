//go:build e2e

package adpmcp_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/adpnode/adpnode/internal/adptest"
	"github.com/adpnode/adpnode/internal/testwait"
	"github.com/adpnode/adpnode/stack"
)

// Property: waits are bounded per session (one more is refused), do not
// block the session's other calls, report progress when asked, stop on
// cancellation, and return at the first event.
func TestWaitBoundedConcurrentCancellable(t *testing.T) {
	h := adptest.StartHost(t, stack.NodeConfig{})
	alice := startAgent(t, h.URL, h.Clock, newKey(t), t.TempDir(), nil, agentOpts{})
	bob := startAgent(t, h.URL, h.Clock, newKey(t), t.TempDir(), nil, agentOpts{maxWaits: 2})
	var room createOut
	alice.must("create_room", map[string]any{"topic": "bounds"}, &room)
	var j joinOut
	bob.must("join_room", map[string]any{"room": room.RoomID}, &j)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	progressOf := func(token string) {
		t.Helper()
		for {
			select {
			case got := <-bob.prog:
				if got == token {
					return
				}
			case <-time.After(30 * time.Second):
				t.Fatalf("no progress notification for the wait with token %s", token)
			}
		}
	}
	first := make(chan waitOut, 1)
	go func() {
		var w waitOut
		bob.callCtx(context.Background(), "wait", map[string]any{"rooms": []string{room.RoomID}, "timeout_seconds": 60}, &w, mcp.Meta{"progressToken": "p1"})
		first <- w
	}()
	progressOf("p1") // the first wait is blocked
	cancelled := make(chan error, 1)
	go func() {
		_, err := bob.cs.CallTool(ctx, &mcp.CallToolParams{Name: "wait", Meta: mcp.Meta{"progressToken": "p2"},
			Arguments: map[string]any{"rooms": []string{room.RoomID}, "timeout_seconds": 60}})
		cancelled <- err
	}()
	progressOf("p2") // and the second
	res := bob.call("wait", map[string]any{"rooms": []string{room.RoomID}, "timeout_seconds": 0}, nil)
	if !res.IsError || !strings.Contains(text(res), "too_many_waits") {
		t.Fatalf("a third wait: %s", text(res))
	}
	// Other calls go on while two waits block.
	var r readOut
	bob.must("read_room", map[string]any{"room": room.RoomID}, &r)
	cancel()
	select {
	case err := <-cancelled:
		if err == nil {
			t.Fatal("a cancelled wait answered")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("a cancelled wait did not stop")
	}
	var p postOut
	alice.must("post", map[string]any{"room": room.RoomID, "text": "wake up"}, &p)
	select {
	case w := <-first:
		if w.TimedOut || len(w.Events) != 1 || w.Events[0].Seq != p.Seq {
			t.Fatalf("wait: %+v", w)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the wait did not return at the post")
	}
}

// Property: the server's live room connections are bounded: a wait on
// more rooms than the bound is refused, and so is a new room once the
// bound is held (connections linger after a wait, to be shared).
func TestLiveRoomsBounded(t *testing.T) {
	h := adptest.StartHost(t, stack.NodeConfig{})
	alice := startAgent(t, h.URL, h.Clock, newKey(t), t.TempDir(), nil, agentOpts{maxFollows: 2})
	var ids []string
	for i := 0; i < 3; i++ {
		var room createOut
		alice.must("create_room", map[string]any{"topic": "room"}, &room)
		ids = append(ids, room.RoomID)
	}
	res := alice.call("wait", map[string]any{"rooms": ids, "timeout_seconds": 0}, nil)
	if !res.IsError {
		t.Fatal("a wait on more rooms than the bound was accepted")
	}
	var w waitOut
	alice.must("wait", map[string]any{"rooms": ids[:2], "timeout_seconds": 0}, &w)
	res = alice.call("wait", map[string]any{"rooms": ids[2:], "timeout_seconds": 0}, nil)
	if !res.IsError || !strings.Contains(text(res), "too_many_rooms") {
		t.Fatalf("a third live room: %s", text(res))
	}
	// A room already live is shared, not counted again.
	alice.must("wait", map[string]any{"rooms": ids[:1], "timeout_seconds": 0}, &w)
}

// Property: every answer is bounded: read_room pages and marks truncation
// when the content budget of one answer is spent.
func TestReadRoomAnswerBounded(t *testing.T) {
	h := adptest.StartHost(t, stack.NodeConfig{Rates: stack.Rates{Message: 1000, Signal: 1000, Control: 1000, Create: 1000,
		MessageCeiling: 1000, SignalCeiling: 1000, ControlCeiling: 1000, AgentStatus: 1000, JoinRequests: 1000}})
	alice := startAgent(t, h.URL, h.Clock, newKey(t), t.TempDir(), nil, agentOpts{})
	var room createOut
	alice.must("create_room", map[string]any{"topic": "big"}, &room)
	big := strings.Repeat("long text ", 3000)
	for i := 0; i < 16; i++ {
		var p postOut
		alice.must("post", map[string]any{"room": room.RoomID, "text": big}, &p)
	}
	var r readOut
	res := alice.must("read_room", map[string]any{"room": room.RoomID, "after_seq": 0, "limit": 200}, &r)
	if !r.Truncated || len(r.Items) >= 17 {
		t.Fatalf("read of 17 records, 16 of 30 kB: %d items, truncated %v", len(r.Items), r.Truncated)
	}
	size := 0
	for _, c := range res.Content {
		size += len(c.(*mcp.TextContent).Text)
	}
	if size > 200<<10 {
		t.Fatalf("one answer is %d bytes", size)
	}
	for _, it := range r.Items {
		if it.Type == "message.create" && len(it.Content) > 8<<10 {
			t.Fatalf("an item of %d bytes", len(it.Content))
		}
	}
	next := r.NextAfterSeq
	alice.must("read_room", map[string]any{"room": room.RoomID, "after_seq": next, "limit": 200}, &r)
	if len(r.Items) == 0 || r.Items[0].Seq != next+1 {
		t.Fatalf("the next page starts at %+v, want seq %d", r.Items, next+1)
	}
}

// Property: resources/subscribe on a room transcript pushes
// notifications/resources/updated when the room gets a record, and on
// adp://me/inbox when the agent is mentioned.
func TestResourceSubscriptionsNotify(t *testing.T) {
	for _, proto := range protocols {
		t.Run("protocol="+proto, func(t *testing.T) { testResourceSubscriptionsNotify(t, proto) })
	}
}

func testResourceSubscriptionsNotify(t *testing.T, proto string) {
	h := adptest.StartHost(t, stack.NodeConfig{})
	alice := startAgent(t, h.URL, h.Clock, newKey(t), t.TempDir(), nil, agentOpts{})
	bob := startAgent(t, h.URL, h.Clock, newKey(t), t.TempDir(), nil, agentOpts{protocol: proto})
	var room createOut
	alice.must("create_room", map[string]any{"topic": "subs"}, &room)
	var j joinOut
	bob.must("join_room", map[string]any{"room": room.RoomID}, &j)
	ctx := context.Background()
	uri := "adp://room/" + room.RoomID + "/transcript"
	if err := bob.cs.Subscribe(ctx, &mcp.SubscribeParams{URI: uri}); err != nil {
		t.Fatal(err)
	}
	if err := bob.cs.Subscribe(ctx, &mcp.SubscribeParams{URI: "adp://me/inbox"}); err != nil {
		t.Fatal(err)
	}
	// Under subscriptions/listen the subscription is taken in the
	// background: wait until the room is live.
	testwait.Until(t, 30*time.Second, "the subscription is live", func() bool { return bob.srv.LiveRooms() == 1 })
	var p postOut
	alice.must("post", map[string]any{"room": room.RoomID, "text": "hi bob", "mentions": []string{string(bob.key.ID)}}, &p)
	got := map[string]bool{}
	deadline := time.After(30 * time.Second)
	for !got[uri] || !got["adp://me/inbox"] {
		select {
		case u := <-bob.updates:
			got[u] = true
		case <-deadline:
			t.Fatalf("updates: %v\n%s", got, bob.out.String())
		}
	}
	res, err := bob.cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(res.Contents[0].Text, "hi bob") {
		t.Fatalf("transcript: %s", res.Contents[0].Text)
	}
	res, err = bob.cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri + ".json"})
	if err != nil {
		t.Fatal(err)
	}
	var tr readOut
	if err := json.Unmarshal([]byte(res.Contents[0].Text), &tr); err != nil || len(tr.Items) == 0 || tr.Items[len(tr.Items)-1].Content != "hi bob" {
		t.Fatalf("JSON transcript: %s", res.Contents[0].Text)
	}
	if err := bob.cs.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: uri}); err != nil {
		t.Fatal(err)
	}
}

// Property: resource subscriptions cost one live connection per room,
// however many sessions subscribe; rooms beyond the server's bound are
// refused; a session that ends gives its subscriptions back.
func TestSubscriptionsShareBoundedLiveRooms(t *testing.T) {
	for _, proto := range protocols {
		t.Run("protocol="+proto, func(t *testing.T) { testSubscriptionsShareBoundedLiveRooms(t, proto) })
	}
}

func testSubscriptionsShareBoundedLiveRooms(t *testing.T, proto string) {
	h := adptest.StartHost(t, stack.NodeConfig{})
	alice := startAgent(t, h.URL, h.Clock, newKey(t), t.TempDir(), nil, agentOpts{maxFollows: 2, protocol: proto})
	var ids []string
	for i := 0; i < 3; i++ {
		var room createOut
		alice.must("create_room", map[string]any{"topic": "shared"}, &room)
		ids = append(ids, room.RoomID)
	}
	ctx := context.Background()
	var sessions []*mcp.ClientSession
	for i := 0; i < 5; i++ {
		st, ct := mcp.NewInMemoryTransports()
		if _, err := alice.srv.MCP().Connect(ctx, st, nil); err != nil {
			t.Fatal(err)
		}
		cs := alice.connect(ctx, ct)
		sessions = append(sessions, cs)
		if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: "adp://room/" + ids[0] + "/transcript"}); err != nil {
			t.Fatal(err)
		}
	}
	testwait.Until(t, 30*time.Second, "the subscriptions are taken", func() bool { return alice.srv.Subscriptions() == 5 })
	if n := alice.srv.LiveRooms(); n != 1 {
		t.Fatalf("5 subscriptions to one room hold %d live rooms", n)
	}
	if err := sessions[0].Subscribe(ctx, &mcp.SubscribeParams{URI: "adp://room/" + ids[1] + "/transcript"}); err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, 30*time.Second, "the second room is live", func() bool { return alice.srv.LiveRooms() == 2 })
	err := sessions[0].Subscribe(ctx, &mcp.SubscribeParams{URI: "adp://room/" + ids[2] + "/transcript"})
	if proto != "" && err == nil {
		t.Fatal("a third live room was accepted past the bound of 2")
	}
	// Under subscriptions/listen the refusal ends the listen: the
	// subscription is never taken.
	testwait.Until(t, 30*time.Second, "the third subscription is refused", func() bool { return alice.srv.Refused() >= 1 })
	if n, subs := alice.srv.LiveRooms(), alice.srv.Subscriptions(); n != 2 || subs != 6 {
		t.Fatalf("live rooms %d (want 2), subscriptions %d (want 6)", n, subs)
	}
	// A burst of records is delivered as notifications without backing up.
	for i := 0; i < 3; i++ {
		var p postOut
		alice.must("post", map[string]any{"room": ids[0], "text": "burst"}, &p)
	}
	select {
	case <-alice.updates:
	case <-time.After(30 * time.Second):
		t.Fatal("no notification")
	}
	for _, cs := range sessions {
		cs.Close()
	}
	testwait.Until(t, 30*time.Second, "ended sessions give their subscriptions back", func() bool { return alice.srv.Subscriptions() == 0 })
}

// Property: a room's live connection comes back after its host restarts
// (the client's Follow reconnects with backoff): a subscribed transcript
// is still notified, and a wait still wakes.
func TestLiveRoomSurvivesHostRestart(t *testing.T) {
	h := adptest.StartHost(t, stack.NodeConfig{DataDir: t.TempDir()})
	alice := startAgent(t, h.URL, h.Clock, newKey(t), t.TempDir(), nil, agentOpts{})
	bob := startAgent(t, h.URL, h.Clock, newKey(t), t.TempDir(), nil, agentOpts{protocol: "2025-11-25"})
	var room createOut
	alice.must("create_room", map[string]any{"topic": "restarts"}, &room)
	var j joinOut
	bob.must("join_room", map[string]any{"room": room.RoomID}, &j)
	uri := "adp://room/" + room.RoomID + "/transcript"
	if err := bob.cs.Subscribe(context.Background(), &mcp.SubscribeParams{URI: uri}); err != nil {
		t.Fatal(err)
	}
	h.Restart(t)
	var p postOut
	alice.must("post", map[string]any{"room": room.RoomID, "text": "after the restart"}, &p)
	deadline := time.After(60 * time.Second)
	for got := ""; got != uri; {
		select {
		case got = <-bob.updates:
		case <-deadline:
			t.Fatal("no notification after the host restarted")
		}
	}
	var w waitOut
	bob.must("wait", map[string]any{"rooms": []string{room.RoomID}, "mentions": false, "timeout_seconds": 60}, &w)
	if len(w.Events) != 1 || w.Events[0].Seq != p.Seq {
		t.Fatalf("wait after the restart: %+v", w)
	}
}
