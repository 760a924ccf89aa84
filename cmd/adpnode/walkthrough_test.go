//go:build e2e

package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/adpnode/adpnode/node"
)

// docBlock returns the first sh block after heading in a page of the
// repository (a path from its root, e.g. docs/agent.md).
func docBlock(t *testing.T, path, heading string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", path))
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	i := strings.Index(s, heading)
	if i < 0 {
		t.Fatalf("%s has no %q", path, heading)
	}
	s = s[i:]
	start := strings.Index(s, "```sh\n")
	end := strings.Index(s[start+6:], "\n```\n")
	if start < 0 || end < 0 {
		t.Fatalf("no sh block under %q", heading)
	}
	return s[start+6 : start+6+end+1]
}

// freeAddr returns a 127.0.0.1 address with a free port.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func startTestStack(t *testing.T, addr, data string) *stack {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	s, err := startStack(node.Config{PublicURL: "http://" + addr, DataDir: data, Log: log}, addr, fedSettings{}, log)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// The agent guide's curl walkthrough, run word for word with bash against a
// node on a random port: only the NODE line is substituted, and the go
// build line is replaced by a binary built here.
func TestAgentGuideWalkthrough(t *testing.T) {
	for _, tool := range []string{"bash", "curl", "sed", "grep"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("the walkthrough needs %s (./test.sh installs curl): %v", tool, err)
		}
	}
	script := docBlock(t, "docs/agent.md", "## Walkthrough (curl)")
	const nodeLine = "NODE=http://127.0.0.1:8080\n"
	const buildLine = "go build -o adpnode ./cmd/adpnode\n"
	if !strings.HasPrefix(script, nodeLine) || strings.Count(script, "127.0.0.1:8080") != 1 {
		t.Fatalf("the walkthrough must set NODE once, in its first line, and use $NODE everywhere else:\n%s", script)
	}
	if !strings.Contains(script, buildLine) {
		t.Fatalf("the walkthrough no longer builds adpnode with %q", buildLine)
	}
	addr := freeAddr(t)
	data := t.TempDir()
	work := t.TempDir()
	script = strings.Replace(script, nodeLine, "NODE=http://"+addr+"\n", 1)
	script = strings.Replace(script, buildLine, "", 1)

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	build := exec.CommandContext(ctx, "go", "build", "-o", filepath.Join(work, "adpnode"), ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	s := startTestStack(t, addr, data)
	defer func() {
		if s != nil {
			s.close()
		}
	}()

	run := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", script)
	run.Dir = work
	run.WaitDelay = 5 * time.Second
	out, err := run.CombinedOutput()
	if err != nil {
		t.Fatalf("walkthrough failed: %v\n%s", err, out)
	}
	text := string(out)
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`did:agent:`),                            // keygen
		regexp.MustCompile(`"status":"active"`),                     // room created and active
		regexp.MustCompile(`(?m)^\{"room_id":"[^"]+","seq":2,`),     // message accepted
		regexp.MustCompile(`(?m)^\{"room_id":"[^"]+","seq":3,`),     // reaction accepted
		regexp.MustCompile(`"seq":3,.*"head":\{"seq":2,`),           // room resource: seq vs head
		regexp.MustCompile(`event: room.event`),                     // SSE delivered records
		regexp.MustCompile(`(?s)message\.create.*reaction\.create`), // in order
	} {
		if !want.MatchString(text) {
			t.Errorf("walkthrough output lacks %s", want)
		}
	}
	live, _ := os.ReadFile(filepath.Join(work, "live.txt"))
	if n := strings.Count(string(live), "event: room.event"); n != 2 {
		t.Errorf("live.txt has %d room.event records, want 2 (message and reaction):\n%s", n, live)
	}
	if t.Failed() {
		t.Logf("output:\n%s", text)
	}

	// Restart on the same data dir: the room and its three records are there.
	var created struct {
		ID string `json:"id"`
	}
	rj, _ := os.ReadFile(filepath.Join(work, "room.json"))
	if err := json.Unmarshal(rj, &created); err != nil || created.ID == "" {
		t.Fatalf("room.json: %v %s", err, rj)
	}
	if err := s.close(); err != nil {
		t.Fatal(err)
	}
	s = startTestStack(t, addr, data)
	resp, err := http.Get("http://" + addr + "/v1/rooms/" + created.ID)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var room struct {
		Seq  int64 `json:"seq"`
		Head struct {
			Seq int64 `json:"seq"`
		} `json:"head"`
	}
	json.NewDecoder(resp.Body).Decode(&room)
	if room.Seq != 3 || room.Head.Seq != 2 {
		t.Errorf("after restart: seq %d head %d, want 3 and 2", room.Seq, room.Head.Seq)
	}
}
