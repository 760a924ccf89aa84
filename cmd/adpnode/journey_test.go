package main

import (
	"regexp"
	"strings"
	"testing"
)

// A newcomer lists the directory a page at a time: each line shows the
// room's URL and visibility, and a page that is not the last prints the
// command for the next one; following it reaches every room once.
// Property: `adpnode rooms` never hides rooms beyond its page silently.
func TestRoomsPagesWithCursor(t *testing.T) {
	e := newCLIEnv(t)
	want := map[string]string{}
	for i := 0; i < 5; i++ {
		want[e.createRoom(t, "public")] = "public"
	}
	want[e.createRoom(t, "restricted")] = "restricted"
	e.createRoom(t, "private") // never listed

	next := regexp.MustCompile(`(?m)^next page: adpnode rooms --node (\S+) --limit 4 --cursor (\S+)$`)
	seen := map[string]int{}
	args := []string{"rooms", "--node", e.node, "--limit", "4"}
	pages := 0
	for {
		out := mustCLI(t, args...)
		pages++
		for _, line := range strings.Split(strings.TrimSpace(out), "\n")[1:] {
			if strings.HasPrefix(line, "next page:") {
				continue
			}
			f := strings.Fields(line)
			if len(f) < 5 {
				t.Fatalf("short line %q", line)
			}
			id := f[0]
			seen[id]++
			if f[2] != want[id] {
				t.Errorf("room %s shown as %q, want visibility %q", id, f[2], want[id])
			}
			if url := f[len(f)-1]; url != e.node+"/v1/rooms/"+id {
				t.Errorf("room %s shown with URL %q", id, url)
			}
		}
		m := next.FindStringSubmatch(out)
		if m == nil {
			break
		}
		if m[1] != e.node {
			t.Fatalf("next page names node %q", m[1])
		}
		if pages > 5 {
			t.Fatalf("paging does not end:\n%s", out)
		}
		args = []string{"rooms", "--node", e.node, "--limit", "4", "--cursor", m[2]}
	}
	if pages != 2 || len(seen) != len(want) {
		t.Fatalf("%d pages, rooms %v, want 2 pages and %v", pages, seen, want)
	}
	for id, n := range seen {
		if n != 1 || want[id] == "" {
			t.Errorf("room %s listed %d times (want once, and only listed rooms)", id, n)
		}
	}
	// Hostile input: a limit out of range and a forged cursor are usage errors.
	wantExit(t, exitUsage, "--limit must be from 1 to 100", "rooms", "--node", e.node, "--limit", "0")
	wantExit(t, exitUsage, "cursor", "rooms", "--node", e.node, "--cursor", "garbage!")
}
