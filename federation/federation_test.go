//go:build e2e

package federation_test

import (
	"context"
	"github.com/adpnode/adpnode/internal/fedtest"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/adpnode/adpnode/adp/room"
	"github.com/adpnode/adpnode/federation"
	"github.com/adpnode/adpnode/internal/adptest"
	"github.com/adpnode/adpnode/internal/testwait"
)

// A public room created on A is listed by B and C within 2 s; closing it
// propagates; a restricted room's metadata appears but none of its records
// leaves A; a private room appears nowhere (ADP §23 extension, DECISIONS 12).
func TestIndexThreeNodes(t *testing.T) {
	peers := network(t, 3, [][2]int{{0, 1}, {1, 2}}) // a line: C hears A only through B
	a, b, c := peers[0], peers[1], peers[2]
	alice := adptest.NewAgent("alice")

	// B follows A's record stream.
	stream := followStream(t, a, b)

	pub := createRoom(t, a, alice, room.Public, "public discussion")
	took := testwait.Until(t, 20*time.Second, "public room listed on B and C", func() bool {
		_, okB := listed(b, pub)
		_, okC := listed(c, pub)
		return okB && okC
	})
	t.Logf("public room reached B and C in %v", took)
	s, _ := listed(c, pub)
	if s.URL != a.Node.RoomURL(pub) || s.Host != a.Node.Host() {
		t.Fatalf("entry on C names %s on %s", s.URL, s.Host)
	}

	restricted := createRoom(t, a, alice, room.Restricted, "restricted discussion")
	private := createRoom(t, a, alice, room.Private, "private discussion")
	for i := 0; i < 3; i++ {
		submit(t, a, alice, "message.create", pub, map[string]any{"content_type": "text/plain", "content": "public words"})
		submit(t, a, alice, "message.create", restricted, map[string]any{"content_type": "text/plain", "content": "restricted words"})
		submit(t, a, alice, "message.create", private, map[string]any{"content_type": "text/plain", "content": "private words"})
	}
	testwait.Until(t, 20*time.Second, "restricted room metadata on C", func() bool { _, ok := listed(c, restricted); return ok })
	testwait.Until(t, 20*time.Second, "public records streamed to B", func() bool { return len(stream.of(pub)) == 4 })
	// Closing propagates.
	submit(t, a, alice, "room.close", pub, map[string]any{})
	testwait.Until(t, 20*time.Second, "closed status on C", func() bool {
		s, ok := listed(c, pub)
		return ok && s.Status == room.StatusEnded
	})
	// The close record is a sentinel: A streams in order, so when it has
	// reached B every record A published before it has too.
	testwait.Until(t, 20*time.Second, "the close record streamed to B", func() bool { return len(stream.of(pub)) == 5 })
	if n := len(stream.of(restricted)) + len(stream.of(private)); n != 0 {
		t.Fatalf("%d records of restricted/private rooms left A", n)
	}
	for _, p := range []*fedtest.Peer{b, c} {
		if _, ok := listed(p, private); ok {
			t.Fatalf("private room listed on %s", p.Name)
		}
		if _, ok := p.Index.Room(private, p.Clock.Ms()); ok {
			t.Fatalf("private room in %s's index", p.Name)
		}
	}
}

// A restarted node rejoins and re-learns the index: entries survive in
// Badger, and re-announcements refresh them.
func TestRestartRelearns(t *testing.T) {
	// Anti-entropy every few seconds: a restarted peer may miss the one
	// gossip of an announcement while its mesh forms again (on a loaded
	// machine CI once waited 15 s for it in vain), and anti-entropy is the
	// node's repair for exactly that; in the field it runs every 2 min.
	o := fedtest.Options{ReconcileInterval: 4 * time.Second}
	peers := networkWith(t, 3, nil, o)
	a, b := peers[0], peers[1]
	alice := adptest.NewAgent("alice")
	id := createRoom(t, a, alice, room.Public, "durable entry")
	testwait.Until(t, 20*time.Second, "listed on B", func() bool { _, ok := listed(b, id); return ok })

	dir, clock, port := b.Dir, b.Clock, b.Port
	b.Stop()
	b2 := fedtest.Start(t, "B'", dir, clock, port, o)
	if _, ok := listed(b2, id); !ok {
		t.Fatal("index entry lost across restart")
	}
	connect(t, b2, a)
	// A announces to the peers it knows subscribe; one that subscribes
	// later gets the announcement by gossip only while it is in A's
	// message cache (3 heartbeats), then by anti-entropy (2 min). Under
	// -race on a loaded 2-core machine the subscriptions took over 3 s:
	// wait for them, then create the room.
	testwait.Until(t, 15*time.Second, "A and B' see each other on the index topic", func() bool {
		return slices.Contains(a.Fed.TopicPeers(federation.IndexTopic), b2.Fed.PeerID()) &&
			slices.Contains(b2.Fed.TopicPeers(federation.IndexTopic), a.Fed.PeerID())
	})
	later := createRoom(t, a, alice, room.Public, "created while B was away")
	testwait.Until(t, 15*time.Second, "new room learned after rejoin", func() bool { _, ok := listed(b2, later); return ok })
}

// Relay: a write for a room on A submitted at C is accepted by A, and the
// answer C returns is A's answer byte for byte; rejections come back with
// their data.
func TestRelaySubmit(t *testing.T) {
	peers := network(t, 3, [][2]int{{0, 1}, {1, 2}, {0, 2}})
	a, c := peers[0], peers[2]
	alice := adptest.NewAgent("alice")
	id := createRoom(t, a, alice, room.Public, "relayed")
	testwait.Until(t, 20*time.Second, "listed on C", func() bool { _, ok := listed(c, id); return ok })

	r, _ := a.Node.Room(id, "")
	body := alice.Envelope(a.Clock.Ms(), "message.create", id, r.Head.Seq, r.Head.Hash, map[string]any{"content_type": "text/plain", "content": "via C"})
	ans, ok := c.Fed.Relay(context.Background(), id, body)
	if !ok || ans.Status != http.StatusCreated {
		t.Fatalf("relay: ok=%v %d %s", ok, ans.Status, ans.Body)
	}
	stored, _, err := a.Node.Events(id, "", r.Head.Seq, 1)
	if err != nil || len(stored) != 1 || string(stored[0])+"\n" != string(ans.Body) {
		t.Fatalf("relayed answer differs from A's stored record:\n%s\n%s", ans.Body, stored)
	}
	if ans.Header["Max-Seen-Nonce"] == "" {
		t.Fatal("relayed answer lost Max-Seen-Nonce")
	}
	// The same (stale) head again: A's room_head_mismatch comes back unchanged.
	stale := alice.Envelope(a.Clock.Ms(), "message.create", id, r.Head.Seq, r.Head.Hash, map[string]any{"content_type": "text/plain", "content": "stale"})
	ans, _ = c.Fed.Relay(context.Background(), id, stale)
	direct, err := a.Node.Submit(context.Background(), stale, id)
	if ans.Status != http.StatusConflict || direct != nil || err == nil {
		t.Fatalf("stale write: %d %s", ans.Status, ans.Body)
	}
	if want := `"code":"room_head_mismatch"`; !contains(ans.Body, want) || !contains(ans.Body, `"events_url"`) || !contains(ans.Body, `"current_seq"`) {
		t.Fatalf("rejection data lost: %s", ans.Body)
	}
	// Unknown rooms are not relayed.
	if _, ok := c.Fed.Relay(context.Background(), "d8ftedhpqhsusbg00000", body); ok {
		t.Fatal("relayed a room nobody announced")
	}
}

func contains(b []byte, s string) bool {
	return len(b) >= len(s) && (string(b) != "" && indexOf(string(b), s) >= 0)
}

func indexOf(s, sub string) int {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return i
		}
	}
	return -1
}

// Five nodes in a ring: rooms created on any node reach every other node
// within 2 s, closing propagates, private rooms appear nowhere.
func TestIndexFiveNodes(t *testing.T) {
	peers := network(t, 5, [][2]int{{0, 1}, {1, 2}, {2, 3}, {3, 4}, {4, 0}})
	alice := adptest.NewAgent("alice")
	var ids []string
	for i, p := range []*fedtest.Peer{peers[0], peers[2], peers[4]} {
		ids = append(ids, createRoom(t, p, alice, room.Public, "ring room"))
		_ = i
	}
	priv := createRoom(t, peers[1], alice, room.Private, "private ring room")
	took := testwait.Until(t, 20*time.Second, "every room on every node", func() bool {
		for _, p := range peers {
			for _, id := range ids {
				if _, ok := listed(p, id); !ok {
					return false
				}
			}
		}
		return true
	})
	t.Logf("3 rooms converged on 5 nodes in %v", took)
	submit(t, peers[2], alice, "room.close", ids[1], map[string]any{})
	testwait.Until(t, 20*time.Second, "closed everywhere", func() bool {
		for _, p := range peers {
			if s, ok := listed(p, ids[1]); !ok || s.Status != room.StatusEnded {
				return false
			}
		}
		return true
	})
	for _, p := range peers {
		if p != peers[1] {
			if _, ok := listed(p, priv); ok {
				t.Fatalf("private room listed on %s", p.Name)
			}
		}
	}
}
