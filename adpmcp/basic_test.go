//go:build e2e

package adpmcp_test

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/adpnode/adpnode/client"
	"github.com/adpnode/adpnode/internal/adptest"
	"github.com/adpnode/adpnode/internal/testwait"
	"github.com/adpnode/adpnode/stack"
)

func newKey(t testing.TB) *client.Key {
	k, err := client.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// Property: through the MCP tools an agent creates a room, posts with a
// mention and a reply, and reads back verified records in order; another
// agent joins the public room and is woken by wait.
func TestToolsConverseOnOneHost(t *testing.T) {
	h := adptest.StartHost(t, stack.NodeConfig{})
	alice := startAgent(t, h.URL, h.Clock, newKey(t), t.TempDir(), nil, agentOpts{})
	bob := startAgent(t, h.URL, h.Clock, newKey(t), t.TempDir(), nil, agentOpts{})

	var room createOut
	alice.must("create_room", map[string]any{"topic": "lunch plans", "tags": []string{"food"}}, &room)
	var j joinOut
	bob.must("join_room", map[string]any{"room": room.URL}, &j)
	if j.Status != "joined" {
		t.Fatalf("join: %+v", j)
	}
	var p1 postOut
	alice.must("post", map[string]any{"room": room.RoomID, "text": "pizza?", "mentions": []string{string(bob.key.ID)}}, &p1)
	var w waitOut
	bob.must("wait", map[string]any{"rooms": []string{room.URL}, "timeout_seconds": 30}, &w)
	if w.TimedOut || len(w.Events) != 1 || w.Events[0].Content != "pizza?" || !w.Events[0].Verified || w.Events[0].Kind != "mention" {
		t.Fatalf("bob's wait: %+v", w)
	}
	var p2 postOut
	bob.must("post", map[string]any{"room": room.URL, "text": "yes", "reply_to": p1.Seq}, &p2)
	var r readOut
	alice.must("read_room", map[string]any{"room": room.RoomID, "after_seq": 0}, &r)
	last := r.Items[len(r.Items)-1]
	if last.Content != "yes" || last.ReplyTo == nil || *last.ReplyTo != p1.Seq || !last.Verified {
		t.Fatalf("read: %+v", r.Items)
	}
	for _, it := range r.Items {
		if !it.Verified {
			t.Fatalf("unverified %+v", it)
		}
	}
}

// Property: close_room ends a room and export_archive saves its archive,
// verified offline and proven complete by the host log (it waits for the
// log's proof of the last record), in the state directory; before the end
// it says how to get one. On a host without a log the archive is saved,
// its chain verified, and it is reported not proven complete at once.
func TestCloseAndExportArchive(t *testing.T) {
	for _, logged := range []bool{true, false} {
		h := adptest.StartHost(t, stack.NodeConfig{})
		if logged {
			h = adptest.StartHostLogged(t, stack.NodeConfig{})
		}
		alice := startAgent(t, h.URL, h.Clock, newKey(t), t.TempDir(), nil, agentOpts{})
		var room createOut
		alice.must("create_room", map[string]any{"topic": "to archive"}, &room)
		var p postOut
		alice.must("post", map[string]any{"room": room.RoomID, "text": "the only message"}, &p)
		res := alice.call("export_archive", map[string]any{"room": room.RoomID}, nil)
		if !res.IsError || !strings.Contains(text(res), "close_room") {
			t.Fatalf("archive of an active room: %s", text(res))
		}
		alice.must("close_room", map[string]any{"room": room.RoomID}, &p)
		for _, f := range []string{"", "jsonl", "md"} {
			var out struct {
				Path     string   `json:"path"`
				Records  int64    `json:"records"`
				LastSeq  int64    `json:"last_seq"`
				Verified bool     `json:"verified"`
				Complete bool     `json:"complete"`
				Unproven []string `json:"unproven"`
			}
			alice.must("export_archive", map[string]any{"room": room.URL, "format": f}, &out)
			b, err := os.ReadFile(out.Path)
			if err != nil || !out.Verified || out.LastSeq != p.Seq || !strings.Contains(string(b), "the only message") {
				t.Fatalf("archive %q (host log %v): %+v %v", f, logged, out, err)
			}
			if out.Complete != logged || (!logged && len(out.Unproven) == 0) {
				t.Fatalf("archive %q (host log %v): complete %v, unproven %q", f, logged, out.Complete, out.Unproven)
			}
		}
	}
}

// Property: wait wakes on a mention in a room it does not watch (through
// the inbox), returns it verified, once; inbox with peek shows without
// consuming, and without peek consumes.
func TestWaitWakesOnMentionElsewhere(t *testing.T) {
	h := adptest.StartHost(t, stack.NodeConfig{})
	alice := startAgent(t, h.URL, h.Clock, newKey(t), t.TempDir(), nil, agentOpts{})
	bob := startAgent(t, h.URL, h.Clock, newKey(t), t.TempDir(), nil, agentOpts{})
	var r1, r2 createOut
	alice.must("create_room", map[string]any{"topic": "watched"}, &r1)
	alice.must("create_room", map[string]any{"topic": "elsewhere"}, &r2)
	var j joinOut
	bob.must("join_room", map[string]any{"room": r1.RoomID}, &j)
	bob.must("join_room", map[string]any{"room": r2.RoomID}, &j)
	var in struct {
		Items []item `json:"items"`
	}
	bob.must("inbox", map[string]any{}, &in)
	done := make(chan waitOut, 1)
	go func() {
		var w waitOut
		bob.must("wait", map[string]any{"rooms": []string{r1.RoomID}, "timeout_seconds": 60}, &w)
		done <- w
	}()
	var p postOut
	alice.must("post", map[string]any{"room": r2.RoomID, "text": "bob, over here", "mentions": []string{string(bob.key.ID)}}, &p)
	w := <-done
	if len(w.Events) != 1 || w.Events[0].Kind != "mention" || w.Events[0].RoomID != r2.RoomID || w.Events[0].Seq != p.Seq || !w.Events[0].Verified {
		t.Fatalf("wait: %+v", w)
	}
	alice.must("post", map[string]any{"room": r2.RoomID, "text": "and again", "mentions": []string{string(bob.key.ID)}}, &p)
	testwait.Until(t, 30*time.Second, "the inbox shows the second mention", func() bool {
		bob.must("inbox", map[string]any{"peek": true}, &in)
		return len(in.Items) == 1
	})
	bob.must("inbox", map[string]any{}, &in)
	if len(in.Items) != 1 || in.Items[0].Content != "and again" {
		t.Fatalf("inbox: %+v", in.Items)
	}
	bob.must("inbox", map[string]any{}, &in)
	if len(in.Items) != 0 {
		t.Fatalf("inbox repeats: %+v", in.Items)
	}
}
