//go:build e2e

package main

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/adpnode/adpnode/internal/buildinfo"
	"github.com/adpnode/adpnode/node"
)

// lockedBuffer is a log sink safe for the server's goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func httpGet(t *testing.T, url, auth string) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	return resp.StatusCode, b
}

// The operator's view: version in discovery and /metrics, readiness with
// storage, and an access log at debug level that never holds a bearer
// token; nothing is logged per request at info level.
func TestOperatorSurface(t *testing.T) {
	for _, level := range []slog.Level{slog.LevelDebug, slog.LevelInfo} {
		var logs lockedBuffer
		log := slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: level}))
		addr := freeAddr(t)
		data := t.TempDir()
		s, err := startStack(node.Config{PublicURL: "http://" + addr, DataDir: data, Log: log}, addr, fedSettings{}, log)
		if err != nil {
			t.Fatal(err)
		}
		base := "http://" + addr
		const secret = "Bearer eyJhbGciOiJFZERTQSJ9.c2VjcmV0LXRva2Vu.c2ln"
		code, body := httpGet(t, base+"/.well-known/agent-discourse", secret)
		var disc struct {
			Software struct{ Name, Version string } `json:"software"`
		}
		json.Unmarshal(body, &disc)
		if code != 200 || disc.Software.Name != "adpnode" || disc.Software.Version != buildinfo.Get().Version {
			t.Errorf("discovery software: %d %+v", code, disc.Software)
		}
		code, body = httpGet(t, base+"/readyz", "")
		if code != 200 || !strings.Contains(string(body), `"storage":"ok"`) {
			t.Errorf("readyz: %d %s", code, body)
		}
		code, body = httpGet(t, base+"/metrics", "")
		if code != 200 || !strings.Contains(string(body), `adp_build_info{goversion="go`) {
			t.Errorf("metrics lack adp_build_info")
		}
		httpGet(t, base+"/v1/rooms/d0000000000000000000?token=viewer-secret", secret)
		if err := s.close(); err != nil {
			t.Fatal(err)
		}
		out := logs.String()
		if strings.Contains(out, "c2VjcmV0LXRva2Vu") || strings.Contains(out, "viewer-secret") {
			t.Errorf("the log holds a token:\n%s", out)
		}
		hasAccess := strings.Contains(out, `"msg":"http","method":"GET","path":"/v1/rooms/d0000000000000000000","status":401`)
		if level == slog.LevelDebug && !hasAccess {
			t.Errorf("no access log line at debug:\n%s", out)
		}
		if level == slog.LevelInfo && strings.Contains(out, `"msg":"http"`) {
			t.Errorf("access log at info level:\n%s", out)
		}
	}
}
