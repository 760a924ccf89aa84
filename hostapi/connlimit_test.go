//go:build e2e

package hostapi_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/adpnode/adpnode/hostapi"
	"github.com/adpnode/adpnode/internal/adptest"
	"github.com/adpnode/adpnode/internal/testwait"
	"github.com/adpnode/adpnode/node"
)

// keepAlive is one HTTP/1.1 keep-alive connection of a client that asks
// for /healthz.
type keepAlive struct {
	c  net.Conn
	br *bufio.Reader
}

// dialFrom connects to addr from the local IP from (127.0.0.0/8 is all
// loopback on Linux: 127.0.0.2 is another client address).
func dialFrom(from, addr string, timeout time.Duration) (*keepAlive, error) {
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: timeout}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	return &keepAlive{c: c, br: bufio.NewReaderSize(c, 1024)}, nil
}

// healthz asks for /healthz on the connection, keeping it open, and waits
// for the answer until the deadline.
func (k *keepAlive) healthz(deadline time.Time) error {
	k.c.SetDeadline(deadline)
	if _, err := io.WriteString(k.c, "GET /healthz HTTP/1.1\r\nHost: adp\r\n\r\n"); err != nil {
		return err
	}
	resp, err := http.ReadResponse(k.br, nil)
	if err != nil {
		return err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Close {
		return fmt.Errorf("healthz: HTTP %d (close %v)", resp.StatusCode, resp.Close)
	}
	return nil
}

// hoard is one client address holding many idle keep-alive connections,
// each asked for /healthz every refresh so that the server's idle timeout
// never closes it: they are alive, and idle between requests. With redial
// a connection the server closes is opened again at once (the hoarder
// wants them all); without, it is dropped.
type hoard struct {
	from, addr string
	redial     bool
	parts      [][]*keepAlive // one per worker, owned by it
	lost       atomic.Int64   // connections the server closed
	live       atomic.Int64
	passes     [hoardWorkers]atomic.Int64 // refreshes each worker finished
	stop       context.CancelFunc
	wg         sync.WaitGroup
}

const hoardWorkers = 8

// openHoard opens n connections from from, each answered once, then
// refreshes them every refresh until close.
func openHoard(t *testing.T, from, addr string, n int, refresh time.Duration, redial bool) *hoard {
	t.Helper()
	h := &hoard{from: from, addr: addr, redial: redial, parts: make([][]*keepAlive, hoardWorkers)}
	errs := make(chan error, hoardWorkers)
	var wg sync.WaitGroup
	for w := range hoardWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += hoardWorkers {
				k, err := h.open()
				if err != nil {
					errs <- fmt.Errorf("hoard connection %d: %w", i, err)
					return
				}
				h.parts[w] = append(h.parts[w], k)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		h.close()
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	h.stop = cancel
	for w := range hoardWorkers {
		h.wg.Add(1)
		go func() {
			defer h.wg.Done()
			tick := time.NewTicker(refresh)
			defer tick.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
				}
				h.refresh(ctx, w)
				h.passes[w].Add(1)
			}
		}()
	}
	t.Cleanup(h.close)
	return h
}

func (h *hoard) open() (*keepAlive, error) {
	k, err := dialFrom(h.from, h.addr, 10*time.Second)
	if err != nil {
		return nil, err
	}
	if err := k.healthz(time.Now().Add(10 * time.Second)); err != nil {
		k.c.Close()
		return nil, err
	}
	h.live.Add(1)
	return k, nil
}

// refresh asks every connection of worker w for /healthz once.
func (h *hoard) refresh(ctx context.Context, w int) {
	for i, k := range h.parts[w] {
		if ctx.Err() != nil {
			return
		}
		if k == nil {
			continue
		}
		if err := k.healthz(time.Now().Add(10 * time.Second)); err == nil {
			continue
		}
		k.c.Close()
		h.parts[w][i] = nil
		h.live.Add(-1)
		h.lost.Add(1)
		if h.redial {
			if k, err := h.open(); err == nil {
				h.parts[w][i] = k
			}
		}
	}
}

// refreshed waits until every worker has refreshed all its connections
// twice more.
func (h *hoard) refreshed(t *testing.T) {
	t.Helper()
	var want [hoardWorkers]int64
	for w := range want {
		want[w] = h.passes[w].Load() + 2
	}
	testwait.Until(t, time.Minute, "two refreshes of the hoard", func() bool {
		for w := range want {
			if h.passes[w].Load() < want[w] {
				return false
			}
		}
		return true
	})
}

// close stops the refreshing and closes every connection; idempotent.
func (h *hoard) close() {
	if h.stop != nil {
		h.stop()
	}
	h.wg.Wait()
	for _, p := range h.parts {
		for i, k := range p {
			if k != nil {
				k.c.Close()
				p[i] = nil
			}
		}
	}
}

// probe is a new client from from: it must get /healthz. A client locked
// out is never served (the hoard's connections never idle out), so the
// deadline only bounds the wait and is generous. Its connection stays open
// (idle) until the caller closes it.
func probe(t *testing.T, from, addr string) net.Conn {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	k, err := dialFrom(from, addr, 20*time.Second)
	if err != nil {
		t.Fatalf("a new connection from %s: %v", from, err)
	}
	if err := k.healthz(deadline); err != nil {
		k.c.Close()
		t.Fatalf("a new connection from %s was not served /healthz: %v", from, err)
	}
	return k.c
}

// Property: one client address cannot lock everyone out, nor itself.
// 4,096 idle keep-alive connections from 127.0.0.1, each refreshed well
// within the idle timeout so that none times out, and still a new client
// (127.0.0.2) and a new connection from 127.0.0.1 both get /healthz:
// at the total cap the longest-idle connection is closed to
// make room (with the per-address cap lifted to the total), and under the
// default per-address cap the address holds at most its cap, its own
// longest-idle connection making room for its new one. The tracking costs
// no goroutine per connection and is empty once the clients are gone.
func TestConnectionCapsLeaveRoomForNewClients(t *testing.T) {
	const held = 4096
	// Both ends of every connection live in this process.
	if need := uint64(2*held + 1024); !raiseFileLimit(need) {
		t.Skipf("needs %d open files (both ends of %d connections); the hard RLIMIT_NOFILE is lower", need, held)
	}
	// The hoard refreshes every idle/4: the idle timeout never closes
	// one of its connections, which stay alive and idle.
	const idle = 8 * time.Second
	const refresh = idle / 4
	settle := func(t *testing.T, h *adptest.Host, base int) {
		t.Helper()
		testwait.Until(t, 10*time.Second, "every connection released", func() bool {
			st := h.ConnStats()
			return st.Open == 0 && st.Waiting == 0 && st.Addresses == 0
		})
		settleGoroutines(t, base+10, 10*time.Second, "after the hoard left")
	}

	t.Run("total cap", func(t *testing.T) {
		h := adptest.StartHostHTTP(t, node.Config{}, hostapi.HTTPOptions{IdleTimeout: idle,
			MaxConnections: held, MaxConnectionsPerAddress: held})
		addr := strings.TrimPrefix(h.URL, "http://")
		base := runtime.NumGoroutine()
		t0 := time.Now()
		hd := openHoard(t, "127.0.0.1", addr, held, refresh, true)
		// Two refreshes: every connection answered again, none lost.
		hd.refreshed(t)
		st := h.ConnStats()
		if st.Open != held || hd.lost.Load() != 0 || hd.live.Load() != held {
			t.Fatalf("the hoard holds %d live connections (lost %d), the listener %+v; want all %d kept alive",
				hd.live.Load(), hd.lost.Load(), st, held)
		}
		if st.Waiting < held-hoardWorkers {
			t.Fatalf("listener %+v: want the hoard's connections idle", st)
		}
		// One server goroutine per connection, none of the tracking.
		if g := runtime.NumGoroutine(); g > base+held+2*hoardWorkers+10 {
			t.Fatalf("%d goroutines holding %d connections (base %d)", g, held, base)
		}
		other := probe(t, "127.0.0.2", addr)
		defer other.Close()
		same := probe(t, "127.0.0.1", addr)
		defer same.Close()
		st = h.ConnStats()
		if st.Open > held || st.Evicted < 2 || st.Refused != 0 {
			t.Fatalf("after the probes: %+v; want at most %d open, at least 2 idle ones closed, none refused", st, held)
		}
		t.Logf("probes done after %v", time.Since(t0))
		hd.close()
		other.Close()
		same.Close()
		settle(t, h, base)
	})

	t.Run("per-address cap", func(t *testing.T) {
		h := adptest.StartHostHTTP(t, node.Config{}, hostapi.HTTPOptions{IdleTimeout: idle})
		addr := strings.TrimPrefix(h.URL, "http://")
		per := hostapi.HTTPOptions{}.WithDefaults().MaxConnectionsPerAddress
		base := runtime.NumGoroutine()
		t0 := time.Now()
		// The hoarder opens 4,096 but holds its cap: its own longest-idle
		// connections made room for the later ones.
		hd := openHoard(t, "127.0.0.1", addr, held, refresh, false)
		hd.refreshed(t)
		if st := h.ConnStats(); st.Open != per || st.Addresses != 1 || hd.live.Load() != int64(per) {
			t.Fatalf("one address holds %d live connections, the listener %+v; want its cap %d", hd.live.Load(), st, per)
		}
		other := probe(t, "127.0.0.2", addr)
		defer other.Close()
		same := probe(t, "127.0.0.1", addr)
		defer same.Close()
		st := h.ConnStats()
		if st.Open > per+1 || st.Refused != 0 {
			t.Fatalf("after the probes: %+v; want at most %d open, none refused", st, per+1)
		}
		t.Logf("probes done after %v", time.Since(t0))
		hd.close()
		other.Close()
		same.Close()
		settle(t, h, base)
	})
}
