package stack_test

import (
	"net"
	"net/http"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/adpnode/adpnode/federation"
	"github.com/adpnode/adpnode/internal/adptest"
	"github.com/adpnode/adpnode/internal/stack"
	"github.com/adpnode/adpnode/mirror"
	"github.com/adpnode/adpnode/node"
)

// open runs a full stack (federation and mirror) on dir, serving on a
// fresh 127.0.0.1 port.
func open(t *testing.T, dir string, clock *adptest.Clock) (*stack.Stack, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String()
	s, err := stack.Open(stack.Config{
		Node:       node.Config{PublicURL: url, DataDir: filepath.Join(dir, "db"), Now: clock.Now, Rates: node.NoRates()},
		Federation: &federation.Config{ListenAddrs: []string{"/ip4/127.0.0.1/tcp/0"}, AllowPrivateOrigins: true},
		Mirror:     &mirror.Config{},
		KeyDir:     dir, TokenDir: dir, ShutdownTimeout: time.Second,
	})
	if err != nil {
		ln.Close()
		t.Fatal(err)
	}
	s.Serve(ln)
	return s, url
}

// The composition root builds the whole process with the production
// wiring, answers hostile input with the spec's error shape, keeps its
// state, federation key and operator token across a restart on the same
// directory, and leaves no goroutine behind once closed.
func TestStackServesRestartsAndCloses(t *testing.T) {
	dir, clock := t.TempDir(), adptest.NewClock()
	warm, _ := open(t, t.TempDir(), clock) // libp2p starts some process-wide goroutines once
	warm.Close()
	before := runtime.NumGoroutine()

	s, url := open(t, dir, clock)
	if s.Server.ReadHeaderTimeout <= 0 || s.Server.IdleTimeout <= 0 {
		t.Fatalf("HTTP server without the edge's timeouts: %+v", s.Server)
	}
	if s.Fed == nil || s.Mir == nil || s.Att == nil || s.Met == nil || s.Index == nil || s.OperatorToken == "" {
		t.Fatalf("stack missing parts: %+v", s)
	}
	r := adptest.Do(t, http.MethodPost, url+"/v1/rooms", "", []byte(`{"event":`+strings.Repeat("[", 1000)))
	if r.Status != http.StatusBadRequest || r.ErrorCode() == "" {
		t.Fatalf("hostile body: %s", r)
	}
	alice := adptest.NewAgent("alice")
	now := clock.Ms()
	r = adptest.Do(t, http.MethodPost, url+"/v1/rooms", "", alice.Envelope(now, "room.create", "", 0, "",
		map[string]any{"topic": "kept", "visibility": "public", "start_time": now, "end_time": now + 3_600_000}))
	if r.Status != http.StatusCreated {
		t.Fatalf("room.create: %s", r)
	}
	ids := s.Node.Summaries()
	key, tok := s.Fed.HostKey(), s.OperatorToken
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil { // idempotent
		t.Fatal(err)
	}

	s2, url2 := open(t, dir, clock)
	if got := s2.Node.Summaries(); len(got) != 1 || len(ids) != 1 || got[0].ID != ids[0].ID {
		t.Fatalf("after restart the rooms are %v, were %v", got, ids)
	}
	if s2.Fed.HostKey() != key || s2.OperatorToken != tok {
		t.Fatal("the federation key or the operator token changed across a restart")
	}
	if r := adptest.Do(t, http.MethodGet, url2+"/v1/rooms/"+ids[0].ID, "", nil); r.Status != http.StatusOK {
		t.Fatalf("room after restart: %s", r)
	}
	s2.Close()

	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > before+5 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond) // polling a condition, not synchronising
	}
	if n := runtime.NumGoroutine(); n > before+5 {
		buf := make([]byte, 1<<20)
		t.Fatalf("%d goroutines after Close, %d before:\n%s", n, before, buf[:runtime.Stack(buf, true)])
	}
}

// A mirror needs a federation: the stack refuses the configuration
// before it opens anything.
func TestStackRefusesMirrorWithoutFederation(t *testing.T) {
	dir := t.TempDir()
	_, err := stack.Open(stack.Config{Node: node.Config{PublicURL: "http://127.0.0.1:1", DataDir: dir}, Mirror: &mirror.Config{}})
	if err == nil || !strings.Contains(err.Error(), "federation") {
		t.Fatalf("Open = %v", err)
	}
}
