//go:build e2e

package main

import (
	"context"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/adpnode/adpnode/client"
	"github.com/adpnode/adpnode/internal/fedtest"
	"github.com/adpnode/adpnode/internal/optoken"
	"github.com/adpnode/adpnode/internal/testwait"
	"github.com/adpnode/adpnode/mirror"
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

// mirror add never implies a target: without one it is refused, naming
// --all, and stores nothing; a target the node would refuse or misread
// says what is wrong with it (a room ID, a host key, a host's origin, not
// a URL, an unknown kind, a host that does not resolve); --all stores the
// rule for every public room.
// Property: a mirror rule is stored only for a target the operator named.
func TestMirrorAddNeedsATarget(t *testing.T) {
	b := fedtest.Network(t, 1, nil, fedtest.Options{Mirror: true})[0]
	op := []string{"--node", b.URL, "--operator-token-file", filepath.Join(b.Dir, optoken.FileName)}
	add := func(args ...string) []string { return append(append([]string{"mirror", "add"}, args...), op...) }
	const id = "d8ftedhpqhsusbg001tg"
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{nil, exitUsage, "mirror add needs a target"},
		{nil, exitUsage, "--all for every public room"},
		{[]string{id}, exitUsage, "is a room ID, not a Room URL"},
		{[]string{"did:agent:_HS0t-9EeBdbAY4Vvek_SzBmfJzNIQeJkczAJvbo-6A"}, exitUsage, "use --kind host"},
		{[]string{"http://127.0.0.1:1/"}, exitUsage, "names a host, not a room"},
		{[]string{"127.0.0.1:1/v1/rooms/" + id}, exitUsage, "is not a Room URL"},
		{[]string{"http://127.0.0.1:1/v1/rooms/nope"}, exitUsage, "names no room"},
		{[]string{"--kind", "everything", "x"}, exitUsage, "target kind must be room, host, tag or all"},
		{[]string{"--all", "http://127.0.0.1:1/v1/rooms/" + id}, exitUsage, "give it without a target"},
		{[]string{"--kind", "tag"}, exitUsage, "needs a target"},
		{[]string{"http://no-such-host.invalid/v1/rooms/" + id}, exitUnavailable, "host_unreachable"},
	} {
		wantExit(t, c.code, c.want, add(c.args...)...)
	}
	if ts := b.Mir.Targets(); len(ts) != 0 {
		t.Fatalf("refused adds stored targets: %+v", ts)
	}
	// A host no announcement named yet: stored (it may come), with a note.
	code, out, errOut := cli(t, add("--kind", "host", "did:agent:_HS0t-9EeBdbAY4Vvek_SzBmfJzNIQeJkczAJvbo-6A")...)
	if code != 0 || !strings.Contains(errOut, "no host did:agent:_HS0t-9EeBdbAY4Vvek_SzBmfJzNIQeJkczAJvbo-6A is known to the node yet") {
		t.Fatalf("mirror add --kind host of an unknown host: exit %d\n%s\n%s", code, out, errOut)
	}
	mustCLI(t, "mirror", "remove", "host:did:agent:_HS0t-9EeBdbAY4Vvek_SzBmfJzNIQeJkczAJvbo-6A", "--node", b.URL, "--operator-token-file", filepath.Join(b.Dir, optoken.FileName))
	if out := mustCLI(t, add("--all")...); !strings.Contains(out, "mirroring all:") {
		t.Fatalf("mirror add --all: %q", out)
	}
	if ts := b.Mir.Targets(); len(ts) != 1 || ts[0].Kind != mirror.TargetAll {
		t.Fatalf("after --all: %+v", ts)
	}
}

// inbox shows what the mention says, not only where it is: each line ends
// with the message's text, read from the room's host and verified; text
// that would drive the terminal (escape sequences) is neutralised.
// Property: an inbox line carries the mentioning record's text.
func TestInboxPrintsMentionText(t *testing.T) {
	e := newCLIEnv(t)
	id := e.createRoom(t, "public")
	bobKey, err := client.LoadKey(e.key("bob"))
	if err != nil {
		t.Fatal(err)
	}
	bob := []string{"--node", e.node, "--key", e.key("bob")}
	alice := []string{"--node", e.node, "--key", e.key("alice")}
	mustCLI(t, append([]string{"post", id, "Bob, can you review **the pricing** section?", "--mentions", string(bobKey.ID)}, alice...)...)
	mustCLI(t, append([]string{"post", id, "red \x1b[31malert\x1b[0m", "--mentions", string(bobKey.ID)}, alice...)...)
	var out string
	testwait.Until(t, 10*time.Second, "both mentions in bob's inbox", func() bool {
		out += mustCLI(t, append([]string{"inbox"}, bob...)...)
		return strings.Count(out, "\n") >= 2
	})
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 || !strings.HasSuffix(lines[0], "\tBob, can you review **the pricing** section?") {
		t.Fatalf("inbox does not print the mention's text:\n%s", out)
	}
	if strings.ContainsRune(out, '\x1b') || !strings.Contains(lines[1], "red \uFFFD[31malert") {
		t.Fatalf("inbox prints control characters as they came:\n%q", out)
	}

	// In a member-only room the host holds ciphertext: bob's inbox opens
	// the mention with his key.
	sealed := strings.Fields(mustCLI(t, append([]string{"room", "create", "--topic", "sealed", "--confidentiality", "member-only"}, alice...)...))[0]
	mustCLI(t, append([]string{"join", sealed}, bob...)...)
	mustCLI(t, append([]string{"post", sealed, "the reserve is 4200", "--mentions", string(bobKey.ID)}, alice...)...)
	out = ""
	testwait.Until(t, 10*time.Second, "the sealed mention in bob's inbox", func() bool {
		out += mustCLI(t, append([]string{"inbox"}, bob...)...)
		return strings.TrimSpace(out) != ""
	})
	if !strings.Contains(out, "[opened] the reserve is 4200") {
		t.Fatalf("inbox does not open a sealed mention for a member:\n%s", out)
	}
}

// devnet's progress report prints a line only when something changed, and
// once the room has ended and both mirrors hold its last record it says so
// once and falls silent, however long devnet keeps running.
// Property: an idle devnet does not repeat itself.
func TestDevnetProgressStopsRepeating(t *testing.T) {
	steps := []devnetProgress{
		{HostSeq: 1, Mirrors: []int64{-1, -1}},
		{HostSeq: 1, Mirrors: []int64{-1, -1}}, // unchanged: not printed
		{HostSeq: 3, Mirrors: []int64{1, 3}},
		{HostSeq: 3, Mirrors: []int64{3, 3}},
		{HostSeq: 3, Mirrors: []int64{3, 3}}, // quiet room: not printed
		{HostSeq: 4, Ended: true, Mirrors: []int64{3, 4}},
		{HostSeq: 4, Ended: true, Mirrors: []int64{4, 4}}, // settled
	}
	samples := 0
	sample := func() devnetProgress {
		p := steps[min(samples, len(steps)-1)]
		samples++
		return p
	}
	var out strings.Builder
	ctx, cancel := context.WithCancel(context.Background())
	tick := make(chan time.Time) // unbuffered: a send returns once the loop took the tick
	done := make(chan struct{})
	go func() { defer close(done); reportProgress(ctx, tick, sample, &out) }()
	for i := 0; i < len(steps)+20; i++ {
		tick <- time.Time{}
	}
	tick <- time.Time{} // the previous tick is fully handled once this one is taken
	cancel()
	<-done
	want := "host seq 1 | node 2 waiting | node 3 waiting\n" +
		"host seq 3 | node 2 verified 1 | node 3 verified 3\n" +
		"host seq 3 | node 2 verified 3 | node 3 verified 3\n" +
		"host seq 4 | node 2 verified 3 | node 3 verified 4\n" +
		"host seq 4 | node 2 verified 4 | node 3 verified 4\n" +
		"room ended at seq 4 and every mirror holds it; Ctrl-C stops devnet\n"
	if out.String() != want {
		t.Fatalf("progress report:\n%s\nwant:\n%s", out.String(), want)
	}
	if samples != len(steps) {
		t.Errorf("sampled %d times after settling, want %d", samples, len(steps))
	}
}

// A room found in node B's directory is joined and posted to with the
// CLI pointed at B: B says the room is hosted by A (404 hosted_elsewhere
// with its URL) and the CLI talks to A, saying so; the message lands in
// A's room. A room no one lists stays a plain 404 (exit 3).
// Property: `--node B` works for every room B's directory lists.
func TestJoinAndPostThroughAnotherNode(t *testing.T) {
	dir := t.TempDir()
	na := recipeNode(t, dir, "a", "", "--allow-private-peers")
	nb := recipeNode(t, dir, "b", na.fed.Addrs()[0], "--allow-private-peers")
	a, b := struct{ URL string }{"http://" + na.addr}, struct{ URL string }{"http://" + nb.addr}
	alice, bob := filepath.Join(dir, "alice.key"), filepath.Join(dir, "bob.key")
	mustCLI(t, "keygen", "--out", alice)
	mustCLI(t, "keygen", "--out", bob)
	id := strings.Fields(mustCLI(t, "room", "create", "--node", a.URL, "--key", alice, "--topic", "found on B", "--visibility", "public"))[0]
	testwait.Until(t, 20*time.Second, "B's directory lists A's room", func() bool { return listed(t, b.URL, id) })

	code, out, errOut := cli(t, "join", id, "--node", b.URL, "--key", bob, "--wait", "10s", "--poll", "100ms")
	if code != 0 || !strings.Contains(out, "joined as speaker") || !strings.Contains(errOut, "hosted by "+a.URL) {
		t.Fatalf("join --node B: exit %d\n%s\n%s", code, out, errOut)
	}
	code, out, errOut = cli(t, "post", id, "hello from B's directory", "--node", b.URL, "--key", bob)
	if code != 0 || !strings.HasPrefix(out, "seq ") {
		t.Fatalf("post --node B: exit %d\n%s\n%s", code, out, errOut)
	}
	if evs, err := callAs("GET", a.URL+"/v1/rooms/"+id+"/events", "", nil); err != nil || !strings.Contains(string(evs), "hello from B's directory") {
		t.Fatalf("the message is not in A's room: %v\n%s", err, evs)
	}
	// Reads through B find the room too.
	if out := mustCLI(t, "room", "show", id, "--node", b.URL); !strings.Contains(out, "found on B") {
		t.Fatalf("room show --node B:\n%s", out)
	}
	// A room B's directory does not list: B's own 404, exit 3.
	wantExit(t, exitNotFound, "room_not_found", "post", "d8ftedhpqhsusbg001tg", "x", "--node", b.URL, "--key", bob)
}
