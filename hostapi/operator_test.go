//go:build e2e

package hostapi_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/adpnode/adpnode/internal/fedtest"
	"github.com/adpnode/adpnode/internal/optoken"
)

// Operator endpoints behind a proxy: a reverse proxy on the node's own machine makes
// every client's request arrive from 127.0.0.1. Operator endpoints judge
// the operator token, never the address: through the proxy, no token (or
// a wrong one) is 403 permission_denied with data.reason
// "operator_token_required"; the token from the data dir is accepted
// (scheme case-insensitive). The token file is 0600 and survives a
// restart unchanged. Cost: a refused request is answered at once.
func TestOperatorTokenBehindProxy(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a libp2p peer")
	}
	p := fedtest.Network(t, 1, nil, fedtest.Options{Mirror: true})[0]
	target, _ := url.Parse(p.URL)
	proxy := httptest.NewServer(httputil.NewSingleHostReverseProxy(target))
	defer proxy.Close()

	st, err := os.Stat(filepath.Join(p.Dir, optoken.FileName))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("token file: %v %v", err, st)
	}
	do := func(method, path, auth string, body string) (int, map[string]any) {
		t.Helper()
		req, _ := http.NewRequest(method, proxy.URL+path, bytes.NewReader([]byte(body)))
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		json.NewDecoder(resp.Body).Decode(&out)
		return resp.StatusCode, out
	}
	refused := func(status int, out map[string]any) {
		t.Helper()
		e, _ := out["error"].(map[string]any)
		data, _ := e["data"].(map[string]any)
		if status != http.StatusForbidden || e["code"] != "permission_denied" || data["reason"] != "operator_token_required" {
			t.Fatalf("want 403 operator_token_required, got %d %v", status, out)
		}
	}
	all := `{"kind":"all"}`
	refused(do("POST", "/v1/mirrors", "", all))
	refused(do("POST", "/v1/mirrors", "Bearer not-the-token-at-all-xxxxxxxx", all))
	refused(do("POST", "/v1/mirrors", "Basic "+p.OperatorToken, all))
	refused(do("POST", "/v1/mirrors", "Bearer "+p.OperatorToken+"x", all))
	refused(do("DELETE", "/v1/mirrors/targets/all:?purge=true", "", ""))
	if len(p.Mir.Targets()) != 0 {
		t.Fatal("a refused request added a target")
	}
	if s, _ := do("POST", "/v1/mirrors", "bearer "+p.OperatorToken, all); s != http.StatusCreated {
		t.Fatalf("with the token: %d", s)
	}
	if s, _ := do("DELETE", "/v1/mirrors/targets/all:", "Bearer "+p.OperatorToken, ""); s != http.StatusNoContent {
		t.Fatalf("remove with the token: %d", s)
	}
	// Reading the mirror list stays public.
	if s, _ := do("GET", "/v1/mirrors", "", ""); s != http.StatusOK {
		t.Fatalf("mirror list: %d", s)
	}

	tok := p.OperatorToken
	p = p.Restart(t)
	if p.OperatorToken != tok || strings.TrimSpace(tok) == "" {
		t.Fatal("operator token changed across restart")
	}
}
