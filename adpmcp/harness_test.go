package adpmcp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/adpnode/adpnode/adpmcp"
	"github.com/adpnode/adpnode/client"
	"github.com/adpnode/adpnode/internal/adptest"
)

// transcript records everything a server said (tool results, resources,
// prompts, notifications, its log) so tests can search all of it.
type transcript struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (tr *transcript) add(v any) {
	b, _ := json.Marshal(v)
	tr.mu.Lock()
	tr.buf.Write(b)
	tr.buf.WriteByte('\n')
	tr.mu.Unlock()
}

func (tr *transcript) Write(p []byte) (int, error) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return tr.buf.Write(p)
}

func (tr *transcript) String() string {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return tr.buf.String()
}

// agent is one MCP session with one adpmcp server.
type agent struct {
	t        testing.TB
	srv      *adpmcp.Server
	cs       *mcp.ClientSession
	key      *client.Key
	out      *transcript
	updates  chan string
	prog     chan string
	cfg      adpmcp.Config
	protocol string
}

type agentOpts struct {
	http       *http.Client
	maxFollows int
	keyPath    string
	maxWaits   int
	// protocol is the MCP version the client asks for ("": the latest,
	// where resources/subscribe is a background subscriptions/listen).
	protocol string
}

// startAgent runs a server for key against node in process (the SDK's
// in-memory transport) and connects a client session to it.
func startAgent(t testing.TB, node string, clock *adptest.Clock, key *client.Key, state string, out *transcript, o agentOpts) *agent {
	t.Helper()
	if out == nil {
		out = &transcript{}
	}
	cfg := adpmcp.Config{Key: key, Node: node, StateDir: state, Now: clock.Now, HTTP: o.http, MaxFollows: o.maxFollows, KeyPath: o.keyPath, MaxWaitsPerSession: o.maxWaits, ProgressInterval: 50 * time.Millisecond,
		Log:           slog.New(slog.NewTextHandler(out, &slog.HandlerOptions{Level: slog.LevelDebug})),
		FollowOptions: client.FollowOptions{MinBackoff: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond}}
	srv, err := adpmcp.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	a := &agent{t: t, srv: srv, key: key, out: out, updates: make(chan string, 64), prog: make(chan string, 64), cfg: cfg}
	st, ct := mcp.NewInMemoryTransports()
	ctx := context.Background()
	ss, err := srv.MCP().Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	_ = ss
	a.protocol = o.protocol
	a.cs = a.connect(ctx, ct)
	t.Cleanup(a.stop)
	return a
}

func (a *agent) connect(ctx context.Context, ct mcp.Transport) *mcp.ClientSession {
	c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, &mcp.ClientOptions{
		ResourceUpdatedHandler: func(_ context.Context, r *mcp.ResourceUpdatedNotificationRequest) {
			a.out.add(r.Params)
			select {
			case a.updates <- r.Params.URI:
			default:
			}
		},
		ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
			a.out.add(r.Params)
			select {
			case a.prog <- fmt.Sprint(r.Params.ProgressToken):
			default:
			}
		},
	})
	cs, err := c.Connect(ctx, ct, &mcp.ClientSessionOptions{ProtocolVersion: a.protocol})
	if err != nil {
		a.t.Fatal(err)
	}
	return cs
}

func (a *agent) stop() {
	if a.cs != nil {
		a.cs.Close()
		a.cs = nil
	}
	if a.srv != nil {
		a.srv.Close()
		a.srv = nil
	}
}

// call calls a tool and decodes its structured result into out; it
// returns the raw result (IsError set for tool errors).
func (a *agent) call(name string, args any, out any) *mcp.CallToolResult {
	a.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	return a.callCtx(ctx, name, args, out, nil)
}

func (a *agent) callCtx(ctx context.Context, name string, args any, out any, meta mcp.Meta) *mcp.CallToolResult {
	a.t.Helper()
	p := &mcp.CallToolParams{Name: name, Arguments: args}
	if meta != nil {
		p.Meta = meta
	}
	res, err := a.cs.CallTool(ctx, p)
	if err != nil {
		a.t.Fatalf("%s: %v", name, err)
	}
	a.out.add(res)
	if out != nil && !res.IsError {
		b, _ := json.Marshal(res.StructuredContent)
		if err := json.Unmarshal(b, out); err != nil {
			a.t.Fatalf("%s: decoding %s: %v", name, b, err)
		}
	}
	return res
}

// must is call that fails the test on a tool error.
func (a *agent) must(name string, args any, out any) *mcp.CallToolResult {
	a.t.Helper()
	res := a.call(name, args, out)
	if res.IsError {
		as, _ := json.Marshal(args)
		a.t.Fatalf("%s(%.300s): %s", name, as, text(res))
	}
	return res
}

func text(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

type item struct {
	Seq        int64    `json:"seq"`
	Author     string   `json:"author"`
	AuthorName string   `json:"author_name"`
	Type       string   `json:"type"`
	Content    string   `json:"content"`
	Mentions   []string `json:"mentions"`
	ReplyTo    *int64   `json:"reply_to"`
	Verified   bool     `json:"verified"`
	Sealed     bool     `json:"sealed"`
	Kind       string   `json:"kind"`
	RoomID     string   `json:"room_id"`
	Note       string   `json:"note"`
}

type readOut struct {
	RoomID       string `json:"room_id"`
	Items        []item `json:"items"`
	NextAfterSeq int64  `json:"next_after_seq"`
	Truncated    bool   `json:"truncated"`
}

type postOut struct {
	RoomID   string `json:"room_id"`
	Seq      int64  `json:"seq"`
	Hash     string `json:"hash"`
	Verified bool   `json:"verified"`
	Replayed bool   `json:"replayed"`
}

type waitOut struct {
	Events   []item `json:"events"`
	Cursor   string `json:"cursor"`
	TimedOut bool   `json:"timed_out"`
}

type createOut struct {
	RoomID string `json:"room_id"`
	URL    string `json:"url"`
}

type joinOut struct {
	Status    string `json:"status"`
	RequestID string `json:"request_id"`
}

// protocols are the MCP versions subscription tests run under: the legacy
// resources/subscribe request and the latest subscriptions/listen.
var protocols = []string{"2025-11-25", ""}
