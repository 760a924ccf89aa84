//go:build e2e

package adpmcp_test

import (
	"context"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/adpnode/adpnode/adp/profile"
	"github.com/adpnode/adpnode/client"
	"github.com/adpnode/adpnode/internal/adptest"
	"github.com/adpnode/adpnode/stack"
)

// Property: read_room and wait give each record's author its verified,
// self-asserted profile name (author_name), shown in the summaries beside
// the key fragment with bidi controls removed; an author without a
// profile has none.
func TestToolOutputNamesAuthors(t *testing.T) {
	h := adptest.StartHost(t, stack.NodeConfig{})
	alice := startAgent(t, h.URL, h.Clock, newKey(t), t.TempDir(), nil, agentOpts{})
	bob := startAgent(t, h.URL, h.Clock, newKey(t), t.TempDir(), nil, agentOpts{})
	bc := client.New(h.URL, bob.key)
	bc.Now = h.Clock.Now
	if _, err := bc.SetProfile(context.Background(), "Bob\u202e the Builder", nil, nil); err != nil {
		t.Fatal(err)
	}
	var room createOut
	alice.must("create_room", map[string]any{"topic": "names"}, &room)
	var j joinOut
	bob.must("join_room", map[string]any{"room": room.URL}, &j)
	var p postOut
	bob.must("post", map[string]any{"room": room.RoomID, "text": "hello", "mentions": []string{string(alice.key.ID)}}, &p)

	label := profile.Label(bob.key.ID, "Bob the Builder")
	var w waitOut
	res := alice.must("wait", map[string]any{"rooms": []string{room.URL}, "timeout_seconds": 30}, &w)
	if len(w.Events) == 0 || w.Events[0].AuthorName != "Bob the Builder" || !strings.Contains(textOf(res), label) {
		t.Fatalf("wait: %+v %q", w, textOf(res))
	}
	var r readOut
	res = alice.must("read_room", map[string]any{"room": room.RoomID, "after_seq": 0}, &r)
	var bobItem, aliceItem *item
	for i := range r.Items {
		switch r.Items[i].Author {
		case string(bob.key.ID):
			bobItem = &r.Items[i]
		case string(alice.key.ID):
			aliceItem = &r.Items[i]
		}
	}
	if bobItem == nil || bobItem.AuthorName != "Bob the Builder" || aliceItem == nil || aliceItem.AuthorName != "" {
		t.Fatalf("author names: %+v", r.Items)
	}
	if txt := textOf(res); !strings.Contains(txt, label) || strings.ContainsRune(txt, '\u202e') {
		t.Fatalf("read_room summary: %q (want %q)", txt, label)
	}
}

func textOf(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// Property: set_profile names the agent on its home node, and the other
// agent's tools then show that name.
func TestSetProfileTool(t *testing.T) {
	h := adptest.StartHost(t, stack.NodeConfig{})
	alice := startAgent(t, h.URL, h.Clock, newKey(t), t.TempDir(), nil, agentOpts{})
	bob := startAgent(t, h.URL, h.Clock, newKey(t), t.TempDir(), nil, agentOpts{})
	var set struct {
		AgentID string `json:"agent_id"`
		Label   string `json:"label"`
	}
	alice.must("set_profile", map[string]any{"name": "Alice", "capabilities": []string{"research"}}, &set)
	if set.AgentID != string(alice.key.ID) || set.Label != profile.Label(alice.key.ID, "Alice") {
		t.Fatalf("set_profile: %+v", set)
	}
	var room createOut
	alice.must("create_room", map[string]any{"topic": "named"}, &room)
	var r readOut
	bob.must("read_room", map[string]any{"room": room.URL, "after_seq": 0}, &r)
	if len(r.Items) == 0 || r.Items[0].AuthorName != "Alice" {
		t.Fatalf("read_room after set_profile: %+v", r.Items)
	}
	if res := alice.call("set_profile", map[string]any{"name": strings.Repeat("x", 65)}, nil); !res.IsError {
		t.Fatal("a name too long was accepted")
	}
}
