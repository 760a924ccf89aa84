//go:build e2e

package client_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/adpnode/adpnode/adp/record"
	"github.com/adpnode/adpnode/client"
	"github.com/adpnode/adpnode/internal/adptest"
	"github.com/adpnode/adpnode/internal/testwait"
	"github.com/adpnode/adpnode/node"
)

// cutProxy forwards TCP to a host and can cut or freeze every connection.
type cutProxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	conns  []net.Conn
	frozen bool
	wg     sync.WaitGroup
}

func startProxy(t *testing.T, target string) *cutProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{ln: ln, target: target}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, up)
			frozen := p.frozen
			p.mu.Unlock()
			p.wg.Add(2)
			go func() { defer p.wg.Done(); io.Copy(up, c); up.Close() }()
			go func() {
				defer p.wg.Done()
				if frozen {
					io.Copy(io.Discard, up) // swallow everything: a silent stream
				} else {
					io.Copy(c, up)
				}
				c.Close()
			}()
		}
	}()
	t.Cleanup(func() { ln.Close(); p.cut(); p.wg.Wait() })
	return p
}

// cut closes every open connection.
func (p *cutProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

func (p *cutProxy) freeze(on bool) {
	p.mu.Lock()
	p.frozen = on
	p.mu.Unlock()
}

// viaProxy makes c dial the proxy while keeping the host's origin (the
// JWT audience).
func viaProxy(c *client.Client, p *cutProxy) {
	c.HTTP = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "tcp", p.ln.Addr().String())
		}}}
}

type collector struct {
	mu   sync.Mutex
	recs []*record.Record
}

func (c *collector) add(r *record.Record) error {
	c.mu.Lock()
	c.recs = append(c.recs, r)
	c.mu.Unlock()
	return nil
}

func (c *collector) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.recs)
}

// A follower survives dropped connections and a silent stream: it
// reconnects with backoff, resumes after its last seq (the §17.3
// bootstrap), delivers every record once and in order, and says why the
// stream ended when the room ends.
func TestFollowReconnects(t *testing.T) {
	h := adptest.StartHost(t, node.Config{Rates: highRates()})
	ctx := context.Background()
	owner := newClient(t, h, "owner")
	now := h.Clock.Ms()
	created, err := owner.CreateRoom(ctx, map[string]any{"topic": "flaky", "visibility": "public", "start_time": now, "end_time": now + 3_600_000})
	if err != nil {
		t.Fatal(err)
	}
	id := created.ID
	p := startProxy(t, strings.TrimPrefix(h.URL, "http://"))
	follower := newClient(t, h, "owner")
	viaProxy(follower, p)

	var got collector
	var mu sync.Mutex
	var reasons []string
	done := make(chan error, 1)
	go func() {
		done <- follower.FollowWith(ctx, id, 0, client.FollowOptions{MinBackoff: time.Millisecond, MaxBackoff: 20 * time.Millisecond,
			HeartbeatTimeout: 300 * time.Millisecond,
			OnReconnect:      func(_ int, reason string, _ error) { mu.Lock(); reasons = append(reasons, reason); mu.Unlock() }}, got.add)
	}()
	post := func(n int) {
		for i := 0; i < n; i++ {
			if _, err := owner.Message(ctx, id, "text/plain", "hello"); err != nil {
				t.Fatal(err)
			}
		}
	}
	testwait.Until(t, 20*time.Second, "history", func() bool { return got.len() == 1 })
	for round := 0; round < 3; round++ {
		post(3)
		p.cut()
	}
	post(2)
	testwait.Until(t, 20*time.Second, "records after cuts", func() bool { return got.len() == 1+11 })

	// A stream that stays open but says nothing is given up after the
	// heartbeat timeout; records posted meanwhile arrive after reconnect.
	p.freeze(true)
	p.cut()
	testwait.Until(t, 20*time.Second, "a frozen connection", func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, r := range reasons {
			if r == "heartbeat_timeout" {
				return true
			}
		}
		return false
	})
	p.freeze(false)
	post(2)
	testwait.Until(t, 20*time.Second, "records after the silence", func() bool { return got.len() == 1+13 })

	if _, err := owner.Post(ctx, id, 5, func(*client.Room, []*record.Record) (string, any, error) { return "room.close", map[string]any{}, nil }); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		var end *client.StreamEnd
		if !errors.As(err, &end) || end.Reason != "room_ended" {
			t.Fatalf("Follow ended with %v, want room_ended", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Follow did not end with the room")
	}
	got.mu.Lock()
	defer got.mu.Unlock()
	for i, r := range got.recs {
		if r.Seq != int64(i+1) {
			t.Fatalf("record %d has seq %d: lost or repeated", i, r.Seq)
		}
	}
	if n := len(got.recs); n != 15 {
		t.Errorf("delivered %d records, want 15", n)
	}
}

// A subscription the host refuses is not retried: the caller learns why.
func TestFollowRefusedIsFinal(t *testing.T) {
	h := adptest.StartHost(t, node.Config{})
	ctx := context.Background()
	owner := newClient(t, h, "owner")
	now := h.Clock.Ms()
	created, err := owner.CreateRoom(ctx, map[string]any{"topic": "t", "visibility": "public", "start_time": now, "end_time": now + 3_600_000})
	if err != nil {
		t.Fatal(err)
	}
	stranger := newClient(t, h, "stranger")
	err = stranger.FollowWith(ctx, created.ID, 0, client.FollowOptions{MinBackoff: time.Millisecond}, func(*record.Record) error { return nil })
	if client.CodeOf(err) != "membership_required" {
		t.Fatalf("got %v, want membership_required", err)
	}
	// An unreachable host is retried at most MaxRetries times.
	gone := client.New("http://127.0.0.1:1", stranger.Key)
	err = gone.FollowWith(ctx, created.ID, 0, client.FollowOptions{MinBackoff: time.Millisecond, MaxBackoff: time.Millisecond, MaxRetries: 3},
		func(*record.Record) error { return nil })
	var end *client.StreamEnd
	if !errors.As(err, &end) || end.Reason != "unreachable" {
		t.Fatalf("got %v, want a StreamEnd after retries", err)
	}
}

func highRates() node.Rates {
	r := node.DefaultRates()
	r.Message, r.Signal, r.Control = 10000, 10000, 10000
	return r
}
