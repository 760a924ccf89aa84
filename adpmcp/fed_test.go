//go:build e2e

package adpmcp_test

import (
	"testing"
	"time"

	"github.com/adpnode/adpnode/internal/fedtest"
	"github.com/adpnode/adpnode/internal/testwait"
)

type searchOut struct {
	Rooms []struct {
		RoomID string `json:"room_id"`
		URL    string `json:"url"`
		Topic  string `json:"topic"`
	} `json:"rooms"`
}

type reviewOut struct {
	Pending []struct {
		RequestID string `json:"request_id"`
		Agent     string `json:"agent"`
	} `json:"pending"`
	Decided []struct {
		RequestID string `json:"request_id"`
		Seq       int64  `json:"seq"`
		Error     string `json:"error"`
	} `json:"decided"`
}

// Property: two agents on two federated nodes, each through its own MCP
// server, find a room in the federated directory, join it by a request
// the creator approves, and converse with mentions; wait returns each
// one's post to the other, verified.
func TestTwoAgentsOnFederatedNodes(t *testing.T) {
	peers := fedtest.Network(t, 2, nil, fedtest.Options{AnnounceInterval: 300 * time.Millisecond})
	a, b := peers[0], peers[1]
	alice := startAgent(t, a.URL, a.Clock, newKey(t), t.TempDir(), nil, agentOpts{})
	bob := startAgent(t, b.URL, b.Clock, newKey(t), t.TempDir(), nil, agentOpts{})

	var room createOut
	alice.must("create_room", map[string]any{"topic": "federated tea tasting", "visibility": "restricted", "tags": []string{"tea"}}, &room)

	var found searchOut
	testwait.Until(t, 30*time.Second, "bob finds the room through node B's directory", func() bool {
		bob.must("search_rooms", map[string]any{"tag": "tea"}, &found)
		return len(found.Rooms) == 1
	})
	if found.Rooms[0].RoomID != room.RoomID || found.Rooms[0].URL != room.URL {
		t.Fatalf("found %+v, want %s", found.Rooms, room.URL)
	}
	var j joinOut
	bob.must("join_room", map[string]any{"room": found.Rooms[0].URL, "reason": "I know oolongs"}, &j)
	if j.Status != "pending" {
		t.Fatalf("join of a restricted room: %+v", j)
	}
	// Before approval bob may not post: the error says how to join.
	res := bob.call("post", map[string]any{"room": room.URL, "text": "hello?"}, nil)
	if !res.IsError || !contains(text(res), "join_room") {
		t.Fatalf("post before joining: %s", text(res))
	}
	var rv reviewOut
	alice.must("review_requests", map[string]any{"room": room.RoomID}, &rv)
	if len(rv.Pending) != 1 || rv.Pending[0].Agent != string(bob.key.ID) {
		t.Fatalf("pending: %+v", rv)
	}
	alice.must("review_requests", map[string]any{"room": room.RoomID, "approve": []string{rv.Pending[0].RequestID}}, &rv)
	if len(rv.Decided) != 1 || rv.Decided[0].Error != "" || len(rv.Pending) != 0 {
		t.Fatalf("review: %+v", rv)
	}
	bob.must("join_room", map[string]any{"room": room.URL}, &j)
	if j.Status != "joined" {
		t.Fatalf("join after approval: %+v", j)
	}

	// Bob waits; alice posts mentioning him.
	done := make(chan waitOut, 1)
	go func() {
		var w waitOut
		bob.must("wait", map[string]any{"rooms": []string{room.URL}, "timeout_seconds": 60}, &w)
		done <- w
	}()
	var p1 postOut
	alice.must("post", map[string]any{"room": room.RoomID, "text": "Bob, which oolong first?", "mentions": []string{string(bob.key.ID)}}, &p1)
	w := <-done
	if w.TimedOut || len(w.Events) != 1 || w.Events[0].Seq != p1.Seq || w.Events[0].Kind != "mention" || !w.Events[0].Verified {
		t.Fatalf("bob's wait: %+v", w)
	}
	var p2 postOut
	bob.must("post", map[string]any{"room": room.URL, "text": "Tieguanyin, then Dancong.", "reply_to": p1.Seq,
		"mentions": []string{string(alice.key.ID)}}, &p2)
	// Alice's default wait watches the rooms she works in and her inbox.
	alice.must("wait", map[string]any{"timeout_seconds": 60}, &w)
	if len(w.Events) != 1 || w.Events[0].Seq != p2.Seq || w.Events[0].Content != "Tieguanyin, then Dancong." || !w.Events[0].Verified ||
		w.Events[0].ReplyTo == nil || *w.Events[0].ReplyTo != p1.Seq {
		t.Fatalf("alice's wait: %+v", w)
	}
	// Nothing is returned twice: the next wait times out.
	alice.must("wait", map[string]any{"timeout_seconds": 1}, &w)
	if !w.TimedOut || len(w.Events) != 0 {
		t.Fatalf("a second wait repeated: %+v", w)
	}
	var r readOut
	bob.must("read_room", map[string]any{"room": room.URL, "after_seq": 0}, &r)
	for _, it := range r.Items {
		if !it.Verified {
			t.Fatalf("unverified record on an honest host: %+v", it)
		}
	}
}

func contains(s, sub string) bool {
	return len(sub) == 0 || (len(s) >= len(sub) && indexOf(s, sub) >= 0)
}

func indexOf(s, sub string) int {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return i
		}
	}
	return -1
}
