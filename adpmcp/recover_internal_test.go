package adpmcp

import (
	"context"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/adpnode/adpnode/client"
)

// Property: a handler that panics answers an error result (tools) or an
// error (other methods); the panic does not escape to the session.
func TestRecoverMiddlewareContainsPanics(t *testing.T) {
	k, err := client.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(Config{Key: k, Node: "http://127.0.0.1:1", StateDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	h := s.recoverMiddleware(func(context.Context, string, mcp.Request) (mcp.Result, error) { panic("boom") })
	res, err := h(context.Background(), "tools/call", nil)
	if err != nil {
		t.Fatal(err)
	}
	if r, ok := res.(*mcp.CallToolResult); !ok || !r.IsError {
		t.Fatalf("tools/call after a panic: %#v", res)
	}
	if _, err := h(context.Background(), "resources/read", nil); err == nil {
		t.Fatal("resources/read after a panic: no error")
	}
}
