//go:build e2e

package adpmcp_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/adpnode/adpnode/adpmcp"
	"github.com/adpnode/adpnode/internal/adptest"
	"github.com/adpnode/adpnode/stack"
)

type headers map[string]string

func (h headers) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range h {
		r.Header.Set(k, v)
	}
	return http.DefaultTransport.RoundTrip(r)
}

// Property: the Streamable HTTP endpoint admits a request only with the
// bearer token (when one is set) and from no Origin, a loopback Origin or
// an allowed one (403 otherwise); an admitted client uses the tools.
func TestHTTPEndpointGuards(t *testing.T) {
	h := adptest.StartHost(t, stack.NodeConfig{})
	srv, err := adpmcp.New(adpmcp.Config{Key: newKey(t), Node: h.URL, StateDir: t.TempDir(), Now: h.Clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	ts := httptest.NewServer(srv.HTTPHandler(adpmcp.HTTPOptions{Token: "tok", AllowOrigins: []string{"https://app.example"}}))
	defer ts.Close()
	init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	for _, c := range []struct {
		hdr  headers
		want int
	}{
		{headers{}, http.StatusUnauthorized},
		{headers{"Authorization": "Bearer nope"}, http.StatusUnauthorized},
		{headers{"Authorization": "Bearer tok", "Origin": "https://evil.example"}, http.StatusForbidden},
		{headers{"Authorization": "Bearer tok", "Origin": "null"}, http.StatusForbidden},
		{headers{"Authorization": "Bearer tok", "Origin": "http://127.0.0.1:9999"}, http.StatusOK},
		{headers{"Authorization": "Bearer tok", "Origin": "https://app.example"}, http.StatusOK},
		{headers{"Authorization": "Bearer tok"}, http.StatusOK},
	} {
		req, _ := http.NewRequest(http.MethodPost, ts.URL+"/mcp", strings.NewReader(init))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		for k, v := range c.hdr {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Fatalf("%v: %d, want %d", c.hdr, resp.StatusCode, c.want)
		}
	}
	ctx := context.Background()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t"}, nil).Connect(ctx, &mcp.StreamableClientTransport{Endpoint: ts.URL + "/mcp",
		HTTPClient: &http.Client{Transport: headers{"Authorization": "Bearer tok", "Origin": "https://app.example"}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "create_room", Arguments: map[string]any{"topic": "over http"}})
	if err != nil || res.IsError {
		t.Fatalf("create_room over HTTP: %v %v", err, res)
	}
}
