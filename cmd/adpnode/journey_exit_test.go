//go:build e2e

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Property: every way a newcomer gets a key file, a payload or --node
// wrong ends with the documented exit code (README, CLI, "Exit codes")
// and a message naming the fix, before anything is sent.
func TestExitCodesOfBadInput(t *testing.T) {
	e := newCLIEnv(t)
	id := e.createRoom(t, "public")
	mustCLI(t, "join", id, "--node", e.node, "--key", e.key("bob"))

	malformed := filepath.Join(e.dir, "malformed.key")
	os.WriteFile(malformed, []byte("not a key file\n"), 0o600)
	badSeed := filepath.Join(e.dir, "badseed.key")
	os.WriteFile(badSeed, []byte(`{"agent_id":"did:agent:x","seed":"AAAA"}`), 0o600)
	open := filepath.Join(e.dir, "open.key")
	b, _ := os.ReadFile(e.key("alice"))
	os.WriteFile(open, b, 0o600)
	os.Chmod(open, 0o644) // whatever the umask
	missing := filepath.Join(e.dir, "missing.key")
	bareNode := strings.TrimPrefix(e.node, "http://")

	for _, c := range []struct {
		name string
		code int
		want string
		args []string
	}{
		{"missing key file", exitNotFound, "adpnode keygen --out " + missing,
			[]string{"post", "--node", e.node, "--key", missing, id, "hi"}},
		{"malformed key file", exitUsage, "key file",
			[]string{"post", "--node", e.node, "--key", malformed, id, "hi"}},
		{"key file with a bad seed", exitUsage, "bad seed",
			[]string{"room", "create", "--node", e.node, "--key", badSeed, "--topic", "x"}},
		{"key file others can read", exitUsage, "chmod 600 " + open,
			[]string{"post", "--node", e.node, "--key", open, id, "hi"}},
		{"key file others can read, offline", exitUsage, "can be read by others",
			[]string{"token", "--node", e.node, "--key", open}},
		{"payload that is not JSON", exitUsage, "payload is not valid JSON",
			[]string{"room", "create", "--node", e.node, "--key", e.key("alice"), "--payload", `{"topic": "x"`}},
		{"payload file that is not JSON", exitUsage, "payload is not valid JSON",
			[]string{"sign", "--key", e.key("alice"), "--type", "room.create", "--payload", "@" + malformed}},
		{"payload file missing", exitNotFound, "no such file",
			[]string{"sign", "--key", e.key("alice"), "--type", "room.create", "--payload", "@" + missing}},
		{"payload the schema refuses", exitUsage, "",
			[]string{"post", "--node", e.node, "--key", e.key("bob"), id, "--type", "message.create", "--payload", `{"content_type":"text/plain"}`}},
		{"room.create payload the schema refuses", exitUsage, "",
			[]string{"room", "create", "--node", e.node, "--key", e.key("alice"), "--payload", `{"topic": 5}`}},
		{"--node without a scheme", exitUsage, "write --node http://" + bareNode,
			[]string{"room", "show", "--node", bareNode, id}},
		{"--node without a scheme, posting", exitUsage, "has no scheme",
			[]string{"post", "--node", bareNode, "--key", e.key("bob"), id, "hi"}},
		{"--node without a scheme, export", exitUsage, "has no scheme",
			[]string{"export", "--node", bareNode, id, "-o", filepath.Join(e.dir, "x.json")}},
		{"--node with a path", exitUsage, "must be the node's origin",
			[]string{"rooms", "--node", e.node + "/v1/rooms"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			wantExit(t, c.code, c.want, c.args...)
		})
	}
	// Nothing of the refused posts reached the room: its head is the
	// room.create and bob's join.
	if out := mustCLI(t, "room", "show", "--node", e.node, id); !strings.Contains(out, `"seq": 2`) {
		t.Fatalf("a refused command wrote to the room:\n%s", out)
	}
}
