//go:build e2e

package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Property: a member exports a restricted or private room with its key
// (export --key), and the archive verifies offline; a key of an agent that
// is not a member, or no key at all, is refused with an error that says
// why, and no file is written.
func TestExportRestrictedRoomWithKey(t *testing.T) {
	e := newCLIEnv(t)
	for _, vis := range []string{"restricted", "private"} {
		t.Run(vis, func(t *testing.T) {
			id := e.createRoom(t, vis)
			alice := []string{"--node", e.node, "--key", e.key("alice")}
			bob := []string{"--node", e.node, "--key", e.key("bob")}
			wantExit(t, exitConflict, "still pending", append([]string{"join", id, "--wait", "0"}, bob...)...)
			var reqs struct {
				Result []struct {
					Request struct{ ID string } `json:"request"`
				} `json:"result"`
			}
			json.Unmarshal([]byte(mustCLI(t, append([]string{"requests", "list", id, "--json"}, alice...)...)), &reqs)
			if len(reqs.Result) != 1 {
				t.Fatalf("pending requests: %+v", reqs)
			}
			mustCLI(t, append([]string{"requests", "approve", id, reqs.Result[0].Request.ID}, alice...)...)
			mustCLI(t, append([]string{"join", id}, bob...)...)
			mustCLI(t, append([]string{"post", id, "members only"}, bob...)...)
			mustCLI(t, append([]string{"room", "close", id}, alice...)...)

			for _, form := range []string{"json", "jsonl"} {
				file := filepath.Join(e.dir, vis+"."+form)
				mustCLI(t, append([]string{"export", id, "--format", form, "-o", file}, bob...)...)
				if out := mustCLI(t, "verify", file); !strings.HasPrefix(out, "OK room "+id) {
					t.Fatalf("verify %s: %s", form, out)
				}
			}
			// The Room URL form takes the origin from the URL.
			file := filepath.Join(e.dir, vis+"-url.json")
			mustCLI(t, "export", e.node+"/v1/rooms/"+id, "--key", e.key("bob"), "-o", file)
			mustCLI(t, "verify", file)

			// A restricted room is listed: reading it is a permission
			// matter. A private room is hidden from non-members.
			want := map[string]int{"restricted": exitDenied, "private": exitNotFound}[vis]
			refused := filepath.Join(e.dir, vis+"-refused.json")
			code, _, errOut := cli(t, "export", id, "--node", e.node, "--key", e.key("carol"), "-o", refused)
			if code != want || !strings.Contains(errOut, "only its members can export it") {
				t.Fatalf("export with a non-member's key: exit %d: %s", code, errOut)
			}
			code, _, errOut = cli(t, "export", id, "--node", e.node, "-o", refused)
			if code != want || !strings.Contains(errOut, "pass --key FILE with a member's key") {
				t.Fatalf("export without a key: exit %d: %s", code, errOut)
			}
			if _, err := os.Stat(refused); !os.IsNotExist(err) {
				t.Fatalf("a refused export left %s: %v", refused, err)
			}
		})
	}
}
