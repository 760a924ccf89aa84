//go:build e2e

package adpmcp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/adpnode/adpnode/internal/adptest"
	"github.com/adpnode/adpnode/stack"
)

// The MCP server as clients we did not write see it: tsclient/drive.mjs
// drives `adpnode mcp` with the official TypeScript SDK client
// (@modelcontextprotocol/sdk, pinned by tsclient/package-lock.json and
// installed by ./test.sh) over stdio and over streamable HTTP. Without
// Node.js or the SDK the test fails, unless ADP_SKIP_NODE=1.

// sdkTools are the tool names the server must list.
var sdkTools = []string{
	"search_rooms", "get_room", "create_room", "join_room", "review_requests",
	"read_room", "post", "react", "wait", "inbox", "subscribe_directory",
	"list_subscriptions", "unsubscribe", "close_room", "export_archive",
}

// sdkSummary is what drive.mjs prints.
type sdkSummary struct {
	OK           bool     `json:"ok"`
	Step         string   `json:"step"`
	Error        string   `json:"error"`
	Transport    string   `json:"transport"`
	Capabilities []string `json:"capabilities"`
	Tools        []string `json:"tools"`
	RoomID       string   `json:"room_id"`
	Post         struct {
		Seq      int64  `json:"seq"`
		Hash     string `json:"hash"`
		Verified bool   `json:"verified"`
	} `json:"post"`
	Read struct {
		Items int `json:"items"`
	} `json:"read"`
	ResourceURI  string `json:"resource_uri"`
	Notification struct {
		URI      string `json:"uri"`
		AfterSeq int64  `json:"after_seq"`
	} `json:"notification"`
	Me   string `json:"me"`
	Wait struct {
		Kind string `json:"kind"`
		Seq  int64  `json:"seq"`
	} `json:"wait"`
	PeerNotification struct {
		URI string `json:"uri"`
	} `json:"peer_notification"`
	Closed struct {
		Seq    int64  `json:"seq"`
		Status string `json:"status"`
	} `json:"closed"`
	Archive struct {
		Path    string `json:"path"`
		LastSeq int64  `json:"last_seq"`
	} `json:"archive"`
	Prompts []string `json:"prompts"`
	Session bool     `json:"session"`
}

// sdkNode returns the node binary, failing (or skipping under
// ADP_SKIP_NODE=1) when it or the SDK is missing.
func sdkNode(t *testing.T) string {
	t.Helper()
	skip := os.Getenv("ADP_SKIP_NODE") == "1"
	node, err := exec.LookPath("node")
	if err == nil {
		_, err = os.Stat(filepath.Join("tsclient", "node_modules", "@modelcontextprotocol", "sdk", "package.json"))
	}
	if err != nil {
		if skip {
			t.Skipf("ADP_SKIP_NODE=1: the MCP TypeScript SDK client test is skipped (%v)", err)
		}
		t.Fatalf("this test needs Node.js and the MCP TypeScript SDK in adpmcp/tsclient/node_modules: ./test.sh installs "+
			"both (or: apt-get install nodejs npm; cd adpmcp/tsclient && npm ci); ADP_SKIP_NODE=1 skips it: %v", err)
	}
	return node
}

// sdkAdpnode builds the adpnode binary.
func sdkAdpnode(ctx context.Context, t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "adpnode")
	if out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, "../cmd/adpnode").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// sdkLog is a buffer a child process writes while the test reads it.
type sdkLog struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *sdkLog) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *sdkLog) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// sdkDrive runs drive.mjs with args and returns its summary; a failed run
// fails the test with the summary and the server's stderr.
func sdkDrive(ctx context.Context, t *testing.T, node string, args ...string) sdkSummary {
	t.Helper()
	cmd := exec.CommandContext(ctx, node, append([]string{"drive.mjs", "--tools", strings.Join(sdkTools, ",")}, args...)...)
	cmd.Dir = "tsclient"
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	var s sdkSummary
	if err := json.Unmarshal(bytes.TrimSpace(stdout.Bytes()), &s); err != nil {
		t.Fatalf("drive.mjs: %v; no JSON summary (%v)\nstdout:\n%s\nstderr:\n%s", runErr, err, stdout.Bytes(), stderr.Bytes())
	}
	if runErr != nil || !s.OK {
		t.Fatalf("drive.mjs failed at %s: %s (exit: %v)\nsummary: %s\nstderr:\n%s", s.Step, s.Error, runErr, stdout.Bytes(), stderr.Bytes())
	}
	t.Logf("drive.mjs: %s", bytes.TrimSpace(stdout.Bytes()))
	return s
}

// sdkCheck asserts what every transport's run must show.
func sdkCheck(ctx context.Context, t *testing.T, bin string, h *adptest.Host, s sdkSummary, transport string) {
	t.Helper()
	if s.Transport != transport {
		t.Errorf("transport %q, want %q", s.Transport, transport)
	}
	have := map[string]bool{}
	for _, n := range s.Tools {
		have[n] = true
	}
	for _, n := range sdkTools {
		if !have[n] {
			t.Errorf("tools/list lacks %s", n)
		}
	}
	if s.RoomID == "" {
		t.Errorf("no room created")
	}
	if s.Post.Seq <= 0 || s.Post.Hash == "" || !s.Post.Verified {
		t.Errorf("post result %+v: want a positive seq, a hash and verified", s.Post)
	}
	want := "adp://room/" + s.RoomID + "/transcript"
	if s.ResourceURI != want || s.Notification.URI != want {
		t.Errorf("resource %q, notification %q: want both %q", s.ResourceURI, s.Notification.URI, want)
	}
	// The other agent's answer, which mentions this one, woke wait and
	// updated the subscribed transcript.
	if s.Wait.Kind != "mention" || s.Wait.Seq <= s.Notification.AfterSeq {
		t.Errorf("wait returned %+v: want the peer's answer as a mention, after seq %d", s.Wait, s.Notification.AfterSeq)
	}
	if s.PeerNotification.URI != want {
		t.Errorf("no update notification for the peer's answer")
	}
	// What the client saw is what the node holds: the room the client
	// closed is ended there, its head the close record.
	if s.Closed.Status != "ended" {
		t.Errorf("close_room then get_room: status %q, want ended", s.Closed.Status)
	}
	if s.RoomID != "" {
		r := adptest.Do(t, http.MethodGet, h.URL+"/v1/rooms/"+s.RoomID, adptest.NewAgent("sdk-observer").Token(h.URL, time.Now().UnixMilli()), nil)
		var room struct {
			Status string       `json:"status"`
			Head   adptest.Head `json:"head"`
		}
		if r.Status != http.StatusOK || r.JSON(&room) != nil {
			t.Errorf("the node's room %s: %s", s.RoomID, r)
		} else if room.Status != "ended" || room.Head.Seq != s.Closed.Seq {
			t.Errorf("the node's room %s: status %q head %d, want ended at the close record %d", s.RoomID, room.Status, room.Head.Seq, s.Closed.Seq)
		}
	}
	// The archive export_archive saved passes the offline verifier.
	if s.Archive.LastSeq != s.Closed.Seq || s.Archive.Path == "" {
		t.Errorf("export_archive: %+v, want the archive up to the close record %d", s.Archive, s.Closed.Seq)
	} else if out, err := exec.CommandContext(ctx, bin, "verify", s.Archive.Path).CombinedOutput(); err != nil {
		t.Errorf("adpnode verify %s: %v\n%s", s.Archive.Path, err, out)
	}
	if s.Notification.AfterSeq <= s.Post.Seq {
		t.Errorf("the update followed seq %d, want a post after %d", s.Notification.AfterSeq, s.Post.Seq)
	}
}

// The example paths of the README's mcpServers entry.
const (
	sdkREADMEBinary = "/home/me/go/bin/adpnode"
	sdkREADMEKey    = "/home/me/.adp/agent.key"
	sdkREADMENode   = "http://127.0.0.1:8080"
)

// sdkREADMEEntry returns the command line and environment of the README's
// mcpServers entry for adp (section "Use it from an AI agent"), with its
// example values replaced.
func sdkREADMEEntry(t *testing.T, replace map[string]string) (argv []string, env map[string]string) {
	t.Helper()
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	sec := string(b)
	i := strings.Index(sec, "## Use it from an AI agent")
	if i < 0 {
		t.Fatal("README has no section \"Use it from an AI agent\"")
	}
	sec = sec[i:]
	j := strings.Index(sec, "```json\n")
	if j < 0 {
		t.Fatal("README's agent section has no mcpServers JSON block")
	}
	block := sec[j+len("```json\n"):]
	block = block[:strings.Index(block, "```")]
	var cfg struct {
		MCPServers map[string]struct {
			Command string            `json:"command"`
			Args    []string          `json:"args"`
			Env     map[string]string `json:"env"`
		} `json:"mcpServers"`
	}
	if err := json.Unmarshal([]byte(block), &cfg); err != nil {
		t.Fatalf("README's mcpServers block is not JSON: %v\n%s", err, block)
	}
	e, ok := cfg.MCPServers["adp"]
	if !ok || len(e.Args) == 0 || e.Args[0] != "mcp" {
		t.Fatalf("README's mcpServers entry is not adp: adpnode mcp ...:\n%s", block)
	}
	sub := func(v string) string {
		if r, ok := replace[v]; ok {
			delete(replace, v)
			return r
		}
		return v
	}
	argv = append([]string{sub(e.Command)}, e.Args...)
	for k, a := range argv {
		argv[k] = sub(a)
	}
	env = map[string]string{}
	for k, v := range e.Env {
		env[k] = sub(v)
	}
	if len(replace) != 0 {
		t.Fatalf("README's mcpServers entry lacks %v:\n%s", replace, block)
	}
	return argv, env
}

// sdkPeerArgs is the --peer argument of drive.mjs: a second agent's server.
func sdkPeerArgs(ctx context.Context, t *testing.T, bin, node string) []string {
	t.Helper()
	dir := t.TempDir()
	key := sdkKeygen(ctx, t, bin, dir)
	argv, _ := json.Marshal([]string{bin, "mcp", "--key", key, "--node", node, "--state", filepath.Join(dir, "state")})
	return []string{"--peer", string(argv)}
}

// sdkKeygen makes an agent key with adpnode keygen, as the README says.
func sdkKeygen(ctx context.Context, t *testing.T, bin, dir string) string {
	t.Helper()
	key := filepath.Join(dir, "agent.key")
	if out, err := exec.CommandContext(ctx, bin, "keygen", "--out", key).CombinedOutput(); err != nil {
		t.Fatalf("keygen: %v\n%s", err, out)
	}
	return key
}

// Property: an agent host using the official MCP TypeScript SDK client can
// drive adpnode mcp over stdio: initialize, list every tool, create a room,
// post and read it back verified, subscribe to the room's transcript
// resource and receive notifications/resources/updated for a later post.
// The server is started as hosts start it, from the README's mcpServers
// entry: its settings in the entry's env, with almost nothing else.
func TestOfficialTypeScriptClientOverStdio(t *testing.T) {
	node := sdkNode(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	bin := sdkAdpnode(ctx, t)
	h := adptest.StartHostLogged(t, stack.NodeConfig{Now: time.Now})
	dir := t.TempDir()
	key := sdkKeygen(ctx, t, bin, dir)
	// The server is started as the README's mcpServers entry says, with
	// this test's binary, key and node in place of the example's.
	argv, env := sdkREADMEEntry(t, map[string]string{sdkREADMEBinary: bin, sdkREADMEKey: key, sdkREADMENode: h.URL})
	envJSON, _ := json.Marshal(env)
	entry := append([]string{"--env", string(envJSON), "--stdio", "--"}, argv...)

	peer := sdkPeerArgs(ctx, t, bin, h.URL)
	s := sdkDrive(ctx, t, node, append(peer, entry...)...)
	sdkCheck(ctx, t, bin, h, s, "stdio")

	// A second host session on the same state directories (both agents'),
	// as after the host restarts the servers, works the same way.
	// This session calls wait before it awaits the room's update
	// notification: a head that wait saw first still notifies.
	s2 := sdkDrive(ctx, t, node, append(append([]string{"--wait-first"}, peer...), entry...)...)
	sdkCheck(ctx, t, bin, h, s2, "stdio")
	if s2.RoomID == s.RoomID {
		t.Errorf("the second session created room %s again", s2.RoomID)
	}
}

// Property: the same holds over streamable HTTP at /mcp on a loopback
// address, with the client's session and the server's push stream; a
// request from a foreign web origin, or without the bearer token, is refused.
func TestOfficialTypeScriptClientOverStreamableHTTP(t *testing.T) {
	node := sdkNode(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	bin := sdkAdpnode(ctx, t)
	h := adptest.StartHostLogged(t, stack.NodeConfig{Now: time.Now})
	dir := t.TempDir()
	key := sdkKeygen(ctx, t, bin, dir)

	// A bearer token, as off-loopback use needs; the SDK client sends it.
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte("test-token-"+filepath.Base(dir)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := exec.CommandContext(ctx, bin, "mcp", "--key", key, "--node", h.URL, "--state", filepath.Join(dir, "state"),
		"--http", "127.0.0.1:0", "--token-file", tokenFile)
	var srvLog sdkLog
	srv.Stdout, srv.Stderr = &srvLog, &srvLog
	srv.WaitDelay = 5 * time.Second
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() {
		srv.Wait()
		close(exited)
	}()
	stop := func() {
		srv.Process.Signal(os.Interrupt)
		<-exited
	}
	defer stop()
	url := sdkServingURL(ctx, t, &srvLog, exited)

	s := sdkDrive(ctx, t, node, append(sdkPeerArgs(ctx, t, bin, h.URL), "--http", url, "--token-file", tokenFile)...)
	sdkCheck(ctx, t, bin, h, s, "http")
	if !s.Session {
		t.Errorf("the server gave the HTTP client no session")
	}

	// Hostile input: a page on another origin must not reach the server
	// through the user's browser (DNS rebinding, cross-site requests), and
	// a client without the token is refused.
	body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"evil","version":"1"}}}`
	token, _ := os.ReadFile(tokenFile)
	for _, c := range []struct {
		name, origin, token string
		want                int
	}{
		{"foreign origin", "http://evil.example", strings.TrimSpace(string(token)), http.StatusForbidden},
		{"no token", "", "", http.StatusUnauthorized},
		{"wrong token", "", "not-the-token", http.StatusUnauthorized},
	} {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if c.origin != "" {
			req.Header.Set("Origin", c.origin)
		}
		if c.token != "" {
			req.Header.Set("Authorization", "Bearer "+c.token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("initialize with %s: %d, want %d", c.name, resp.StatusCode, c.want)
		}
	}

	stop()
	if t.Failed() {
		t.Logf("adpnode mcp --http log:\n%s", srvLog.String())
	}
}

// sdkServingURL waits for adpnode mcp --http to say where it serves.
func sdkServingURL(ctx context.Context, t *testing.T, log *sdkLog, exited <-chan struct{}) string {
	t.Helper()
	re := regexp.MustCompile(`serving MCP at (http://\S+/mcp)`)
	for {
		if m := re.FindStringSubmatch(log.String()); m != nil {
			return m[1]
		}
		select {
		case <-exited:
			t.Fatalf("adpnode mcp --http exited before serving:\n%s", log.String())
		case <-ctx.Done():
			t.Fatalf("adpnode mcp --http never said where it serves:\n%s", log.String())
		case <-time.After(50 * time.Millisecond):
		}
	}
}
