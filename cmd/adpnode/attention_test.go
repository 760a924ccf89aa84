//go:build e2e

package main

import (
	"strings"
	"testing"
	"time"

	"github.com/adpnode/adpnode/client"
	"github.com/adpnode/adpnode/internal/testwait"
)

// inbox and watch print what is new since their last run (cursor files),
// and refuse bad input with a clear error.
func TestInboxAndWatchResume(t *testing.T) {
	e := newCLIEnv(t)
	id := e.createRoom(t, "public")
	bobKey, err := client.LoadKey(e.key("bob"))
	if err != nil {
		t.Fatal(err)
	}
	bob := []string{"--node", e.node, "--key", e.key("bob")}
	alice := []string{"--node", e.node, "--key", e.key("alice")}
	// The inbox stores items on its owner's next pass (≤25 ms batches):
	// poll; an empty run leaves the cursor where it was.
	poll := func(args ...string) string {
		t.Helper()
		var out string
		testwait.Until(t, 20*time.Second, "adpnode "+strings.Join(args, " ")+" printing something", func() bool {
			out = mustCLI(t, append(args, bob...)...)
			return strings.TrimSpace(out) != ""
		})
		return out
	}
	mustCLI(t, append([]string{"post", id, "first", "--mentions", string(bobKey.ID)}, alice...)...)
	out := poll("inbox")
	if n := strings.Count(strings.TrimSpace(out), "\n") + 1; n != 1 || !strings.Contains(out, id) {
		t.Fatalf("first inbox run:\n%s", out)
	}
	if out := mustCLI(t, append([]string{"inbox"}, bob...)...); strings.TrimSpace(out) != "" {
		t.Fatalf("second run repeats:\n%s", out)
	}
	mustCLI(t, append([]string{"post", id, "second", "--mentions", string(bobKey.ID)}, alice...)...)
	if out := poll("inbox", "--json"); strings.Count(out, `"room_seq"`) != 1 {
		t.Fatalf("third run:\n%s", out)
	}

	w := append([]string{"watch", "--keyword", "cli", "--once"}, bob...)
	out = mustCLI(t, w...)
	if !strings.Contains(out, id) || !strings.Contains(out, "appeared") {
		t.Fatalf("watch:\n%s", out)
	}
	if out := mustCLI(t, w...); strings.TrimSpace(out) != "" {
		t.Fatalf("watch repeats:\n%s", out)
	}
	wantExit(t, exitUsage, "", append([]string{"watch", "--keyword", strings.Repeat("k", 500), "--once"}, bob...)...)
}
