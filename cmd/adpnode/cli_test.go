//go:build e2e

package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/adpnode/adpnode/adp/identity"
	"github.com/adpnode/adpnode/federation"
)

type cliEnv struct {
	node string
	dir  string
}

func (e cliEnv) key(name string) string { return filepath.Join(e.dir, name+".key") }

func newCLIEnv(t *testing.T) cliEnv {
	addr := freeAddr(t)
	s := startTestStack(t, addr, t.TempDir())
	t.Cleanup(func() { s.close() })
	e := cliEnv{node: "http://" + addr, dir: t.TempDir()}
	for _, n := range []string{"alice", "bob", "carol"} {
		mustCLI(t, "keygen", "--out", e.key(n))
	}
	return e
}

// createRoom creates a room and returns its ID.
func (e cliEnv) createRoom(t *testing.T, visibility string) string {
	out := mustCLI(t, "room", "create", "--node", e.node, "--key", e.key("alice"), "--topic", "CLI "+visibility,
		"--visibility", visibility, "--packs", "adp:reactions/1.0")
	return strings.Fields(out)[0]
}

func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"--version"}, {"version"}} {
		out := mustCLI(t, args...)
		if !strings.HasPrefix(out, "adpnode ") || !strings.Contains(out, runtime.Version()) {
			t.Errorf("adpnode %v printed %q", args, out)
		}
	}
}

func TestExitCodes(t *testing.T) {
	e := newCLIEnv(t)
	wantExit(t, exitUsage, "unknown flag", "room", "show", "x", "--no-such-flag")
	wantExit(t, exitUsage, "accepts 1 arg", "room", "show")
	wantExit(t, exitUsage, "unknown command", "no-such-command")
	wantExit(t, exitNotFound, "room_not_found", "room", "show", "--node", e.node, "d0000000000000000000")
	missing := filepath.Join(e.dir, "missing.key")
	wantExit(t, exitNotFound, "no such file", "post", "--node", e.node, "--key", missing, "x", "hi")
	// Both errors a newcomer meets first say what to do.
	wantExit(t, exitNotFound, "adpnode keygen --out "+missing, "post", "--node", e.node, "--key", missing, "x", "hi")
	wantExit(t, exitUnavailable, "connection refused", "room", "show", "--node", "http://"+freeAddr(t), "d0000000000000000000")
	wantExit(t, exitUnavailable, "start one (adpnode serve), or point --node at a running node", "room", "show", "--node", "http://"+freeAddr(t), "d0000000000000000000")
	wantExit(t, exitUsage, "--node must be the node's origin", "token", "--key", e.key("alice"), "--node", "not a url")
	id := e.createRoom(t, "public")
	// Carol never joined: posting is refused as a permission matter.
	wantExit(t, exitDenied, "", "post", "--node", e.node, "--key", e.key("carol"), id, "hello")
}

// token takes --node; --aud is a deprecated alias; the audience is the
// origin whatever the flag's trailing slash.
func TestTokenNode(t *testing.T) {
	e := cliEnv{dir: t.TempDir()}
	mustCLI(t, "keygen", "--out", e.key("alice"))
	for _, args := range [][]string{{"--node", "http://127.0.0.1:18401/"}, {"--aud", "http://127.0.0.1:18401"}} {
		tok := strings.TrimSpace(mustCLI(t, append([]string{"token", "--key", e.key("alice")}, args...)...))
		part := strings.Split(tok, ".")[1]
		b, err := identity.DecodeB64(part)
		if err != nil {
			t.Fatal(err)
		}
		var claims struct{ Aud string }
		json.Unmarshal(b, &claims)
		if claims.Aud != "http://127.0.0.1:18401" {
			t.Errorf("%v: aud %q", args, claims.Aud)
		}
	}
	wantExit(t, exitUsage, "deprecated alias", "token", "--key", e.key("alice"), "--node", "http://a:1", "--aud", "http://b:2")
}

// A node's own key file is refused as an agent key, with a clear reason.
func TestNodeKeyRefused(t *testing.T) {
	dir := t.TempDir()
	if _, err := federation.LoadOrCreateKey(dir); err != nil {
		t.Fatal(err)
	}
	nk := filepath.Join(dir, federation.KeyFile)
	wantExit(t, exitUsage, "host key (node.key), not an agent key", "token", "--key", nk)
	wantExit(t, exitUsage, "not an agent key", "post", "--key", nk, "x", "hello")
	wantExit(t, exitUsage, "not an agent key", "sign", "--key", nk, "--type", "room.create", "--payload", "{}")
}

// The agent journeys of a private room: join without reading the room,
// pending after --wait, resumed by re-running join, approved through
// requests approve; a rejected applicant is told so.
func TestJoinPrivateRoomThroughRequests(t *testing.T) {
	e := newCLIEnv(t)
	id := e.createRoom(t, "private")
	bob := []string{"--node", e.node, "--key", e.key("bob")}
	errOut := wantExit(t, exitConflict, "still pending", append([]string{"join", id, "--wait", "0", "--perspective", "tester", "--reason", "let me in"}, bob...)...)
	if !strings.Contains(errOut, "join request jr_") {
		t.Fatalf("join did not report the request: %s", errOut)
	}
	// The resume hint works as printed: it repeats --node and --key.
	_, hint, ok := strings.Cut(strings.TrimSpace(errOut), "resume with: ")
	want := "adpnode join " + id + " --request jr_"
	if !ok || !strings.HasPrefix(hint, want) || !strings.Contains(hint, " --node "+e.node) || !strings.Contains(hint, " --key "+e.key("bob")) {
		t.Fatalf("resume hint %q: want %q… with --node and --key", hint, want)
	}
	wantExit(t, exitConflict, "still pending", append(strings.Fields(hint)[1:], "--wait", "0")...)
	// Re-running join resumes the same pending request.
	errOut = wantExit(t, exitConflict, "--request jr_", append([]string{"join", id, "--wait", "0"}, bob...)...)
	if !strings.Contains(errOut, "resuming your pending join request") {
		t.Fatalf("second join did not resume: %s", errOut)
	}
	alice := []string{"--node", e.node, "--key", e.key("alice")}
	list := mustCLI(t, append([]string{"requests", "list", id}, alice...)...)
	lines := strings.Split(strings.TrimSpace(list), "\n")
	if len(lines) != 2 || !strings.Contains(lines[1], "pending") || !strings.Contains(lines[1], "let me in") {
		t.Fatalf("requests list:\n%s", list)
	}
	reqID := strings.Fields(lines[1])[0]
	// Bob may not review his own request (the private room stays hidden
	// from him until approved).
	wantExit(t, exitNotFound, "room_not_found", append([]string{"requests", "approve", id, reqID}, bob...)...)
	mustCLI(t, append([]string{"requests", "approve", id, reqID, "--role", "observer"}, alice...)...)
	// Re-running join without --request finds the approved request by
	// itself (the host names it) and joins with the approved role.
	out := mustCLI(t, append([]string{"join", id}, bob...)...)
	if !strings.Contains(out, "joined as observer") {
		t.Fatalf("join: %s", out)
	}
	if list := mustCLI(t, append([]string{"requests", "list", id}, alice...)...); strings.Count(list, "\n") != 1 {
		t.Errorf("no request should be pending:\n%s", list)
	}

	carol := []string{"--node", e.node, "--key", e.key("carol")}
	wantExit(t, exitConflict, "still pending", append([]string{"join", id, "--wait", "0"}, carol...)...)
	var reqs struct {
		Result []struct {
			Request struct{ ID string } `json:"request"`
		} `json:"result"`
	}
	json.Unmarshal([]byte(mustCLI(t, append([]string{"requests", "list", id, "--json"}, alice...)...)), &reqs)
	if len(reqs.Result) != 1 {
		t.Fatalf("pending requests: %+v", reqs)
	}
	mustCLI(t, append([]string{"requests", "reject", id, reqs.Result[0].Request.ID, "--reason", "not today"}, alice...)...)
	wantExit(t, exitDenied, "rejected: not today", append([]string{"join", id, "--wait", "1m", "--request", reqs.Result[0].Request.ID}, carol...)...)
	// Hostile input: a made-up request ID.
	wantExit(t, exitNotFound, "", append([]string{"join", id, "--request", "jr_nope"}, carol...)...)
}

// A public room can be shown and tailed without a key or membership; tail
// says why it ended. Then the archive exported from it verifies, and an
// edited copy does not.
func TestPublicRoomWithoutKeyTailAndVerify(t *testing.T) {
	e := newCLIEnv(t)
	id := e.createRoom(t, "public")
	alice := []string{"--node", e.node, "--key", e.key("alice")}
	mustCLI(t, append([]string{"post", id, "hello, **room**"}, alice...)...)
	out := mustCLI(t, "room", "show", "--node", e.node, id) // no key (none in the working directory)
	if !strings.Contains(out, `"topic": "CLI public"`) {
		t.Fatalf("room show: %s", out)
	}
	mustCLI(t, append([]string{"room", "close", id}, alice...)...)

	code, out, errOut := cli(t, "tail", "--node", e.node, "--poll", "20ms", id)
	if code != 0 || strings.Count(out, "\n") != 3 || !strings.Contains(out, "message.create") {
		t.Fatalf("tail: exit %d\n%s\n%s", code, out, errOut)
	}
	if !strings.Contains(errOut, "tail: room ended at seq 3") {
		t.Errorf("tail did not say why it ended: %q", errOut)
	}
	// Bob has a key but is not a member: tail falls back to reading events.
	code, out, errOut = cli(t, "tail", "--node", e.node, "--key", e.key("bob"), "--poll", "20ms", id)
	if code != 0 || strings.Count(out, "\n") != 3 || !strings.Contains(errOut, "room ended") {
		t.Fatalf("tail as a non-member: exit %d\n%s\n%s", code, out, errOut)
	}

	file := filepath.Join(e.dir, "room.json")
	mustCLI(t, "export", "--node", e.node, id, "--format", "json", "-o", file)
	if out := mustCLI(t, "verify", file); !strings.HasPrefix(out, "OK room "+id) || !strings.Contains(out, "host-asserted") {
		t.Fatalf("verify: %s", out)
	}
	b, _ := os.ReadFile(file)
	tampered := filepath.Join(e.dir, "tampered.json")
	os.WriteFile(tampered, []byte(strings.Replace(string(b), `"topic":"CLI public"`, `"topic":"CLI edited"`, 1)), 0o644)
	if string(b) == strings.Replace(string(b), `"topic":"CLI public"`, "", 1) {
		t.Fatal("exported archive does not carry the topic as expected")
	}
	wantExit(t, exitVerifyFailed, "room.topic", "verify", tampered)

	md := filepath.Join(e.dir, "room.md")
	mustCLI(t, "export", "--node", e.node, id, "--format", "md", "-o", md)
	wantExit(t, exitVerifyFailed, "Markdown transcripts are not verifiable; use the json or jsonl archive", "verify", md)
}

// The exit code table of docs/errors.md is the one in code.
func TestDocsExitCodes(t *testing.T) {
	b, err := os.ReadFile("../../docs/errors.md")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	s = s[strings.Index(s, "\n## Exit codes\n"):]
	s = s[:strings.Index(s, "\n## Exit codes of verify\n")]
	rows := regexp.MustCompile(`(?m)^\| (\d) \| ([a-z]+)`).FindAllStringSubmatch(s, -1)
	want := map[int]string{exitOK: "done", exitFailure: "any", exitUsage: "usage", exitNotFound: "not",
		exitDenied: "refused", exitConflict: "conflict", exitUnavailable: "unavailable"}
	if len(rows) != len(want) {
		t.Fatalf("docs/errors.md lists %d exit codes, code has %d", len(rows), len(want))
	}
	for _, r := range rows {
		n, _ := strconv.Atoi(r[1])
		if want[n] != r[2] {
			t.Errorf("docs/errors.md: exit code %d is %q; code says %q", n, r[2], want[n])
		}
	}
}

// A pending join request survives a node restart: re-running join after
// the restart resumes it, and approval then lets the applicant in.
func TestJoinResumesAcrossRestart(t *testing.T) {
	addr := freeAddr(t)
	data := t.TempDir()
	s := startTestStack(t, addr, data)
	defer func() { s.close() }()
	e := cliEnv{node: "http://" + addr, dir: t.TempDir()}
	for _, n := range []string{"alice", "bob"} {
		mustCLI(t, "keygen", "--out", e.key(n))
	}
	id := e.createRoom(t, "restricted")
	bob := []string{"--node", e.node, "--key", e.key("bob")}
	wantExit(t, exitConflict, "still pending", append([]string{"join", id, "--wait", "0"}, bob...)...)
	if err := s.close(); err != nil {
		t.Fatal(err)
	}
	s = startTestStack(t, addr, data)
	errOut := wantExit(t, exitConflict, "still pending", append([]string{"join", id, "--wait", "0"}, bob...)...)
	if !strings.Contains(errOut, "resuming your pending join request") {
		t.Fatalf("join after restart did not resume: %s", errOut)
	}
	alice := []string{"--node", e.node, "--key", e.key("alice")}
	var reqs struct {
		Result []struct {
			Request struct{ ID string } `json:"request"`
		} `json:"result"`
	}
	json.Unmarshal([]byte(mustCLI(t, append([]string{"requests", "list", id, "--json"}, alice...)...)), &reqs)
	if len(reqs.Result) != 1 {
		t.Fatalf("pending after restart: %+v", reqs)
	}
	mustCLI(t, append([]string{"requests", "approve", id, reqs.Result[0].Request.ID}, alice...)...)
	if out := mustCLI(t, append([]string{"join", id, "--wait", "5s", "--request", reqs.Result[0].Request.ID}, bob...)...); !strings.Contains(out, "joined as speaker") {
		t.Fatalf("join: %s", out)
	}
}

// A management command pointed at the wrong data dir says which token it
// needs and how to give it, before it contacts any node.
func TestOperatorTokenMissingSaysWhatToDo(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "not-the-nodes-data")
	errOut := wantExit(t, exitNotFound, "pass that node's --data DIR, or --operator-token-file FILE",
		"mirror", "add", "http://127.0.0.1:1/v1/rooms/d8ftedhpqhsusbg001tg", "--node", "http://127.0.0.1:1", "--data", dir)
	if !strings.Contains(errOut, filepath.Join(dir, "operator.token")) {
		t.Fatalf("the error does not name the file it looked for: %s", errOut)
	}
}

// export of a room that has not ended says how to end it; a bad --format
// is a usage error, refused before any request.
func TestExportBeforeEndSaysWhatToDo(t *testing.T) {
	e := newCLIEnv(t)
	id := e.createRoom(t, "public")
	out := filepath.Join(e.dir, "a.json")
	wantExit(t, exitConflict, "close it with adpnode room close", "export", id, "--node", e.node, "-o", out)
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Fatalf("a refused export left %s behind: %v", out, err)
	}
	wantExit(t, exitUsage, "--format must be json, jsonl or md", "export", id, "--node", "http://"+freeAddr(t), "--format", "pdf")
}
