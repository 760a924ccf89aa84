//go:build e2e

package stack_test

import (
	"context"
	"net"
	"net/http"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/adpnode/adpnode/adp/tlogproof"
	"github.com/adpnode/adpnode/federation"
	"github.com/adpnode/adpnode/internal/adptest"
	"github.com/adpnode/adpnode/internal/testwait"
	"github.com/adpnode/adpnode/mirror"
	"github.com/adpnode/adpnode/node"
	"github.com/adpnode/adpnode/stack"
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
		HostLog:    &stack.HostLogConfig{Discover: true, CheckpointInterval: 100 * time.Millisecond},
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
	if s.Fed == nil || s.Mir == nil || s.Att == nil || s.Met == nil || s.Index == nil || s.OperatorToken == "" || s.HostLog == nil || s.Witness == nil {
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

	testwait.Goroutines(t, 20*time.Second, "goroutines back after Close", before+5)
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

// openLogged runs a stack with the host log and nothing else of the
// optional parts on dir, under one public URL (so one log origin) across
// restarts, serving on a fresh port.
func openLogged(t *testing.T, dir string, clock *adptest.Clock) (*stack.Stack, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s, err := stack.Open(stack.Config{
		Node:    node.Config{PublicURL: "http://adp.test", DataDir: filepath.Join(dir, "db"), Now: clock.Now, Rates: node.NoRates()},
		HostLog: &stack.HostLogConfig{CheckpointInterval: 100 * time.Millisecond},
		KeyDir:  dir, TokenDir: dir, ShutdownTimeout: time.Second,
	})
	if err != nil {
		ln.Close()
		t.Fatal(err)
	}
	s.Serve(ln)
	return s, "http://" + ln.Addr().String()
}

// The stack keeps the host log: records accepted before and after a
// restart on the same data dir are each in it once, provable against the
// signed checkpoint the API serves; Close stops the log and the
// submitter with everything else.
func TestStackHostLogAcrossRestart(t *testing.T) {
	dir, clock := t.TempDir(), adptest.NewClock()
	alice := adptest.NewAgent("alice")
	ctx := context.Background()
	before := runtime.NumGoroutine()

	s, _ := openLogged(t, dir, clock)
	now := clock.Ms()
	res, err := s.Node.Submit(ctx, alice.Envelope(now, "room.create", "", 0, "",
		map[string]any{"topic": "logged", "visibility": "private", "start_time": now, "end_time": now + 3_600_000}), "")
	if err != nil {
		t.Fatal(err)
	}
	room, head, hash := res.Record.RoomID, res.Record.Seq, res.Record.Hash
	post := func(s *stack.Stack, k int) {
		for range k {
			r, err := s.Node.Submit(ctx, alice.Envelope(clock.Ms(), "message.create", room, head, hash,
				map[string]any{"content_type": "text/plain", "content": "hi"}), room)
			if err != nil {
				t.Fatal(err)
			}
			head, hash = r.Record.Seq, r.Record.Hash
		}
	}
	post(s, 9)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s, url := openLogged(t, dir, clock)
	defer s.Close()
	post(s, 10)
	const total = 20
	var cp tlogproof.Checkpoint
	testwait.Until(t, 60*time.Second, "a checkpoint covering every record", func() bool {
		_, cp, err = s.HostLog.Checkpoint(ctx)
		return err == nil && cp.Size >= total
	})
	if cp.Size != total {
		t.Fatalf("checkpoint covers %d leaves, want %d (%v)", cp.Size, total, err)
	}
	r := adptest.Do(t, http.MethodGet, url+"/tlog/checkpoint", "", nil)
	if c, _, err := tlogproof.Open(r.Body, s.HostLog.Verifier()); r.Status != http.StatusOK || err != nil || c.Size < total {
		t.Fatalf("GET /tlog/checkpoint: %s (%v)", r, err)
	}
	hashes, err := s.Node.RecordHashes(room, 0, 100)
	if err != nil || len(hashes) != total {
		t.Fatalf("%d record hashes, %v", len(hashes), err)
	}
	seen := map[uint64]bool{}
	for i, h := range hashes {
		rp, err := s.HostLog.Inclusion(ctx, h, cp.Size)
		if err != nil {
			t.Fatalf("seq %d: %v", i+1, err)
		}
		if err := tlogproof.VerifyInclusion(rp.Inclusion, h, cp.Hash); err != nil || seen[rp.Inclusion.LeafIndex] {
			t.Fatalf("seq %d at leaf %d: %v (seen %v)", i+1, rp.Inclusion.LeafIndex, err, seen[rp.Inclusion.LeafIndex])
		}
		seen[rp.Inclusion.LeafIndex] = true
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	testwait.Goroutines(t, 20*time.Second, "goroutines back after Close", before+2)
}

// An in-memory node has nowhere to keep a host log: the stack says so
// before it opens anything.
func TestStackHostLogNeedsDataDir(t *testing.T) {
	for _, nc := range []node.Config{
		{PublicURL: "http://127.0.0.1:1", InMemory: true},
		{PublicURL: "http://127.0.0.1:1", InMemory: true, DataDir: t.TempDir()},
	} {
		s, err := stack.Open(stack.Config{Node: nc, HostLog: &stack.HostLogConfig{}})
		if err == nil {
			s.Close()
			t.Fatalf("Open(%+v) with a host log succeeded", nc)
		}
		if !strings.Contains(err.Error(), "host log needs a data directory") {
			t.Fatalf("Open = %v", err)
		}
	}
}
