//go:build e2e

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/adpnode/adpnode/client"
	"github.com/adpnode/adpnode/internal/fedtest"
	"github.com/adpnode/adpnode/internal/testwait"
)

type bearer struct {
	token  string
	origin string
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	if b.token != "" {
		r.Header.Set("Authorization", "Bearer "+b.token)
	}
	if b.origin != "" {
		r.Header.Set("Origin", b.origin)
	}
	return http.DefaultTransport.RoundTrip(r)
}

func mcpCall(t *testing.T, cs *mcp.ClientSession, name string, args, out any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if res.IsError {
		t.Fatalf("%s: %v", name, res.Content[0].(*mcp.TextContent).Text)
	}
	b, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, out); err != nil {
		t.Fatal(err)
	}
}

// Property: the built binary serves MCP over stdio (--node given as the
// node's listen address, resolved through its discovery document) and
// over Streamable HTTP (Origin checked; a bearer token required off
// loopback, and enforced); two agents on two federated nodes, one on each
// transport, find a room, join it by an approved request and converse.
func TestMCPOverStdioAndHTTP(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	peers := fedtest.Network(t, 2, nil, fedtest.Options{AnnounceInterval: 300 * time.Millisecond})
	h, hb := peers[0], peers[1]
	dir := t.TempDir()
	bin := filepath.Join(dir, "adpnode")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	keys := map[string]*client.Key{}
	for _, n := range []string{"alice", "bob"} {
		k, err := client.GenerateKey()
		if err != nil {
			t.Fatal(err)
		}
		if err := k.Save(filepath.Join(dir, n+".key")); err != nil {
			t.Fatal(err)
		}
		keys[n] = k
	}
	listen := strings.TrimPrefix(h.URL, "http://")
	// The binaries read the real clock: keep the host's clock with it.
	go func() {
		for ctx.Err() == nil {
			if d := time.Since(h.Clock.Now()); d > 0 {
				h.Clock.Advance(d)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()

	// Alice over stdio, her node given in the environment.
	stdio := exec.CommandContext(ctx, bin, "mcp", "--key", filepath.Join(dir, "alice.key"))
	stdio.Env = append(os.Environ(), "ADPNODE_NODE="+listen)
	alice, err := mcp.NewClient(&mcp.Implementation{Name: "test"}, nil).Connect(ctx, &mcp.CommandTransport{Command: stdio}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer alice.Close()

	// A non-loopback --http without a token is refused.
	out, err := exec.CommandContext(ctx, bin, "mcp", "--key", filepath.Join(dir, "bob.key"), "--node", hb.URL, "--http", "0.0.0.0:0").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "--token-file") {
		t.Fatalf("non-loopback without a token: %v %s", err, out)
	}
	// Bob over HTTP, off loopback with a token.
	tokenFile := filepath.Join(dir, "token")
	os.WriteFile(tokenFile, []byte("s3cret-token\n"), 0o600)
	srv := exec.CommandContext(ctx, bin, "mcp", "--key", filepath.Join(dir, "bob.key"), "--node", hb.URL, "--http", "0.0.0.0:0", "--token-file", tokenFile)
	stderr, _ := srv.StderrPipe()
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { srv.Process.Kill(); srv.Wait() }()
	sc := bufio.NewScanner(stderr)
	var endpoint string
	for sc.Scan() {
		if _, rest, ok := strings.Cut(sc.Text(), "serving MCP at "); ok {
			endpoint = strings.Fields(rest)[0]
			break
		}
	}
	if endpoint == "" {
		t.Fatal("the HTTP server did not start")
	}
	endpoint = strings.Replace(endpoint, "[::]", "127.0.0.1", 1)
	endpoint = strings.Replace(endpoint, "0.0.0.0", "127.0.0.1", 1)
	go func() {
		for sc.Scan() {
		}
	}()
	init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	post := func(hdr map[string]string) int {
		req, _ := http.NewRequest(http.MethodPost, endpoint, strings.NewReader(init))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if st := post(nil); st != http.StatusUnauthorized {
		t.Fatalf("without the token: %d", st)
	}
	if st := post(map[string]string{"Authorization": "Bearer wrong"}); st != http.StatusUnauthorized {
		t.Fatalf("with a wrong token: %d", st)
	}
	if st := post(map[string]string{"Authorization": "Bearer s3cret-token", "Origin": "https://evil.example"}); st != http.StatusForbidden {
		t.Fatalf("a foreign Origin: %d", st)
	}
	bob, err := mcp.NewClient(&mcp.Implementation{Name: "test"}, nil).Connect(ctx, &mcp.StreamableClientTransport{Endpoint: endpoint,
		HTTPClient: &http.Client{Transport: bearer{token: "s3cret-token", origin: "http://localhost:3000"}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer bob.Close()

	var room struct {
		RoomID string `json:"room_id"`
		URL    string `json:"url"`
	}
	mcpCall(t, alice, "create_room", map[string]any{"topic": "stdio and http", "visibility": "restricted", "tags": []string{"transports"}}, &room)
	if !strings.HasPrefix(room.URL, h.URL+"/") {
		t.Fatalf("room URL %s is not on the node's public origin %s", room.URL, h.URL)
	}
	var found struct {
		Rooms []struct {
			URL string `json:"url"`
		} `json:"rooms"`
	}
	testwait.Until(t, 30*time.Second, "bob finds the room through node B", func() bool {
		mcpCall(t, bob, "search_rooms", map[string]any{"tag": "transports"}, &found)
		return len(found.Rooms) == 1 && found.Rooms[0].URL == room.URL
	})
	var j struct {
		Status string `json:"status"`
	}
	mcpCall(t, bob, "join_room", map[string]any{"room": room.URL}, &j)
	if j.Status != "pending" {
		t.Fatalf("join: %+v", j)
	}
	var rv struct {
		Pending []struct {
			RequestID string `json:"request_id"`
		} `json:"pending"`
	}
	mcpCall(t, alice, "review_requests", map[string]any{"room": room.RoomID}, &rv)
	if len(rv.Pending) != 1 {
		t.Fatalf("pending: %+v", rv)
	}
	mcpCall(t, alice, "review_requests", map[string]any{"room": room.RoomID, "approve": []string{rv.Pending[0].RequestID}}, &rv)
	mcpCall(t, bob, "join_room", map[string]any{"room": room.URL}, &j)
	if j.Status != "joined" {
		t.Fatalf("join after approval: %+v", j)
	}
	var w struct {
		Events []struct {
			Seq      int64  `json:"seq"`
			Content  string `json:"content"`
			Verified bool   `json:"verified"`
		} `json:"events"`
	}
	mcpCall(t, bob, "wait", map[string]any{"rooms": []string{room.URL}, "timeout_seconds": 0}, &w)
	done := make(chan struct{})
	go func() {
		defer close(done)
		mcpCall(t, bob, "wait", map[string]any{"rooms": []string{room.URL}, "timeout_seconds": 60}, &w)
	}()
	var p struct {
		Seq int64 `json:"seq"`
	}
	mcpCall(t, alice, "post", map[string]any{"room": room.RoomID, "text": "over stdio", "mentions": []string{string(keys["bob"].ID)}}, &p)
	<-done
	if len(w.Events) != 1 || w.Events[0].Seq != p.Seq || w.Events[0].Content != "over stdio" || !w.Events[0].Verified {
		t.Fatalf("bob's wait over HTTP: %+v", w)
	}
	if _, err := os.Stat(filepath.Join(dir, "alice.key.mcp", "cursors.json")); err != nil {
		t.Fatalf("the default state directory: %v", err)
	}
}
