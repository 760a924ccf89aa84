//go:build e2e

package main

import (
	"strings"
	"testing"

	"github.com/adpnode/adpnode/client"
)

func agentIDOfKey(t *testing.T, file string) string {
	t.Helper()
	k, err := client.LoadKey(file)
	if err != nil {
		t.Fatal(err)
	}
	return string(k.ID)
}

// Property: `adpnode profile set` stores the agent's signed profile and
// `profile show` prints it verified, marked self-asserted; tail shows an
// actor by its name beside its key fragment, with bidi controls removed;
// a name too long is refused as usage.
func TestProfileCLI(t *testing.T) {
	e := newCLIEnv(t)
	alice := []string{"--node", e.node, "--key", e.key("alice")}
	out := mustCLI(t, append([]string{"profile", "set", "--name", "Alice\u202eevil", "--capability", "research", "--capability", "review"}, alice...)...)
	if !strings.Contains(out, "self-asserted") || !strings.Contains(out, "research, review") {
		t.Fatalf("profile set: %s", out)
	}
	id := agentIDOfKey(t, e.key("alice"))
	out = mustCLI(t, "profile", "show", "--node", e.node, id)
	if !strings.Contains(out, "Aliceevil ("+id[10:18]+")") || strings.ContainsRune(out, '\u202e') {
		t.Fatalf("profile show: %q", out)
	}
	if js := mustCLI(t, "profile", "show", "--json", "--node", e.node, id); !strings.Contains(js, `"profile.update"`) {
		t.Fatalf("profile show --json: %s", js)
	}
	wantExit(t, exitNotFound, "not_found", "profile", "show", "--node", e.node, agentIDOfKey(t, e.key("bob")))
	wantExit(t, exitUsage, "", append([]string{"profile", "set", "--name", strings.Repeat("x", 65)}, alice...)...)

	roomID := e.createRoom(t, "public")
	mustCLI(t, append([]string{"post", roomID, "hello"}, alice...)...)
	mustCLI(t, append([]string{"room", "close", roomID}, alice...)...)
	code, out, errOut := cli(t, "tail", "--node", e.node, "--poll", "20ms", roomID)
	if code != 0 || !strings.Contains(out, "message.create Aliceevil ("+id[10:18]+")") {
		t.Fatalf("tail: exit %d\n%s\n%s", code, out, errOut)
	}
	_, out, _ = cli(t, "tail", "--no-names", "--node", e.node, "--poll", "20ms", roomID)
	if strings.Contains(out, "Aliceevil") || !strings.Contains(out, id[:18]) {
		t.Fatalf("tail --no-names: %s", out)
	}
}
