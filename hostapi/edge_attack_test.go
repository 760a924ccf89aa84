//go:build e2e

package hostapi_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/adpnode/adpnode/hostapi"
	"github.com/adpnode/adpnode/internal/adptest"
	"github.com/adpnode/adpnode/internal/testwait"
	"github.com/adpnode/adpnode/node"
)

// Adversarial tests of the HTTP edge (docs/threat-model.md): each
// runs the attack against a real node on 127.0.0.1 and asserts the defence
// and a bound on what it costs the victim.

// settleGoroutines waits until the goroutine count is at most limit and
// returns it; within only bounds the wait.
func settleGoroutines(t *testing.T, limit int, within time.Duration, what string) int {
	t.Helper()
	return testwait.Goroutines(t, within, what, limit)
}

func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

// 500 idle keep-alive connections and a client sending its body a
// byte at a time neither starve /healthz nor a write (both are served
// while the attack still holds); the read timeout cuts the slow body;
// idle connections are closed after the idle timeout, and the goroutines
// they held go with them. The waits' deadlines only bound them.
func TestAttackIdleConnsAndSlowBody(t *testing.T) {
	const readTimeout, idle = 2 * time.Second, 3 * time.Second
	h := adptest.StartHostHTTP(t, node.Config{}, hostapi.HTTPOptions{ReadTimeout: readTimeout, ReadHeaderTimeout: time.Second, IdleTimeout: idle})
	alice := adptest.NewAgent("alice")
	base := runtime.NumGoroutine()

	addr := strings.TrimPrefix(h.URL, "http://")
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for i := 0; i < 500; i++ {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: %s\r\n\r\n", addr)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("conn %d: %v", i, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	if n := h.OpenConnections(); n < 500 {
		t.Fatalf("open connections %d, want the 500 idle ones", n)
	}

	// The slow body: headers promise 1000 bytes, one byte arrives.
	slow, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	fmt.Fprintf(slow, "POST /v1/rooms HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{", addr)
	slowStart := time.Now()
	slowCut := make(chan time.Duration, 1)
	go func() {
		b := make([]byte, 4096)
		for {
			if _, err := slow.Read(b); err != nil {
				slowCut <- time.Since(slowStart)
				return
			}
		}
	}()

	// Served while the attack still holds: the slow body not yet cut and
	// the idle connections still open. A server they starved would answer
	// only once its timeouts let go of them.
	underAttack := func(what string) {
		t.Helper()
		select {
		case d := <-slowCut:
			t.Fatalf("%s served only after the slow body was cut (%v)", what, d)
		default:
		}
		if n := h.OpenConnections(); n < 500 {
			t.Fatalf("%s served only after the idle connections went (%d open)", what, n)
		}
	}
	if r := adptest.Do(t, http.MethodGet, h.URL+"/healthz", "", nil); r.Status != 200 {
		t.Fatalf("healthz: %s", r)
	}
	underAttack("/healthz")
	h.CreateRoom(t, alice, h.RoomPayload("public"))
	underAttack("a write")

	select {
	case d := <-slowCut:
		t.Logf("slow body cut after %v (read timeout %v)", d, readTimeout)
	case <-time.After(30 * time.Second):
		t.Fatalf("the slow body was not cut (read timeout %v)", readTimeout)
	}
	// Idle keep-alive connections are closed by the server.
	testwait.Until(t, 30*time.Second, "idle connections closed", func() bool { return h.OpenConnections() <= 2 })
	g := settleGoroutines(t, base+10, 20*time.Second, "after the idle timeout")
	t.Logf("500 idle conns: goroutines back to %d (base %d) after the idle timeout", g, base)
}

// The connection cap. When every connection is busy (each in the
// middle of a request, a body arriving a byte at a time), a connection
// beyond the cap is closed at once (the file descriptor is not held), and
// the node serves again as soon as the hoarder lets go. (Idle connections
// make room instead: TestConnectionCapsLeaveRoomForNewClients.)
func TestAttackConnectionCap(t *testing.T) {
	h := adptest.StartHostHTTP(t, node.Config{}, hostapi.HTTPOptions{MaxConnections: 20})
	addr := strings.TrimPrefix(h.URL, "http://")
	var hoard []net.Conn
	for i := 0; i < 20; i++ {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(c, "POST /v1/rooms HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{", addr)
		hoard = append(hoard, c)
	}
	testwait.Until(t, 20*time.Second, "20 busy connections held", func() bool {
		st := h.ConnStats()
		return st.Open == 20 && st.Waiting == 0
	})
	extra, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	extra.SetReadDeadline(time.Now().Add(2 * time.Second))
	if _, err := extra.Read(make([]byte, 1)); err == nil || isTimeout(err) {
		t.Fatalf("a connection over the cap was kept open: %v", err)
	}
	extra.Close()
	if st := h.ConnStats(); st.Refused != 1 || st.Evicted != 0 {
		t.Fatalf("listener %+v: want the one over the cap refused and no busy one closed", st)
	}
	for _, c := range hoard {
		c.Close()
	}
	testwait.Until(t, 20*time.Second, "slots released", func() bool { return h.OpenConnections() == 0 })
	if r := adptest.Do(t, http.MethodGet, h.URL+"/healthz", "", nil); r.Status != 200 {
		t.Fatalf("healthz after the hoard: %s", r)
	}
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

// The request read timeout must not cut a long-lived SSE stream: the
// stream carries three heartbeats and lives three read timeouts, then
// still delivers a record. (The clock only says when enough has passed;
// each read's deadline only bounds the wait.)
func TestSSEOutlivesReadTimeout(t *testing.T) {
	h := adptest.StartHostHTTP(t, node.Config{}, hostapi.HTTPOptions{ReadTimeout: 500 * time.Millisecond, ReadHeaderTimeout: 500 * time.Millisecond})
	alice := adptest.NewAgent("alice")
	id := createRoom(t, h, alice, h.RoomPayload("public"))
	s := openSSE(t, h, alice, id)
	start := time.Now()
	beats := 0
	for beats < 3 || time.Since(start) < 3*500*time.Millisecond {
		it, ok := s.nextAny(20 * time.Second)
		if !ok {
			t.Fatalf("stream ended or went silent after %v and %d heartbeats (read timeout 500ms)", time.Since(start), beats)
		}
		if it.Comment == "heartbeat" {
			beats++
		}
	}
	h.MustPost(t, alice, id, "message.create", msg("still here"))
	if rec := s.nextRecord(); rec.Seq != 2 {
		t.Fatalf("got seq %d", rec.Seq)
	}
}

// dialNoRead opens GET url with a tiny receive buffer and never reads the
// body after the status line.
func dialNoRead(t *testing.T, addr, path, token string) net.Conn {
	t.Helper()
	d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		rc.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
		return serr
	}}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nAccept: text/event-stream\r\n\r\n", path, addr, token)
	b := make([]byte, 12)
	if _, err := io.ReadFull(c, b); err != nil || string(b) != "HTTP/1.1 200" {
		t.Fatalf("stream: %q %v", b, err)
	}
	return c
}

// Streams that never read, while large records are written. The
// hub drops them, and the write deadline (at least SSEWriteTimeout ahead
// of every write, renewed at most every quarter of it) frees each handler
// goroutine though the clients hold their connections: goroutines and heap
// come back down, and every honest write succeeds meanwhile (the hub
// drops a full queue and never blocks its publisher: live's
// TestSlowSubscriberDroppedWithReason; the slowest write is logged, a
// figure, not an assertion).
func TestAttackSSENeverReads(t *testing.T) {
	const streams = 40
	rates := highRates()
	h := adptest.StartHostHTTP(t, node.Config{Rates: rates, SSEBuffer: 64}, hostapi.HTTPOptions{SSEWriteTimeout: time.Second})
	alice := adptest.NewAgent("alice")
	id := createRoom(t, h, alice, h.RoomPayload("public"))
	var readers []*adptest.Agent
	for i := 0; i < streams; i++ {
		a := adptest.NewAgent(fmt.Sprint("mute", i))
		joinRoom(t, h, a, id, "observer")
		readers = append(readers, a)
	}
	runtime.GC()
	baseG, baseHeap := runtime.NumGoroutine(), heapInUse()
	addr := strings.TrimPrefix(h.URL, "http://")
	var conns []net.Conn
	for _, a := range readers {
		conns = append(conns, dialNoRead(t, addr, "/v1/rooms/"+id+"/events/live", tok(h, a)))
	}
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	testwait.Until(t, 20*time.Second, "streams subscribed", func() bool { return h.Node.Subscribers() == streams })
	big := strings.Repeat("x", 48<<10)
	var worst time.Duration
	for i := 0; i < 150 && h.Node.Subscribers() > 0; i++ {
		start := time.Now()
		h.MustPost(t, alice, id, "message.create", msg(big))
		worst = max(worst, time.Since(start))
	}
	testwait.Until(t, 20*time.Second, "stalled streams dropped", func() bool { return h.Node.Subscribers() == 0 })
	// Every handler goroutine is freed within the write deadline, though
	// the clients still hold their connections open.
	freed := time.Now()
	g := settleGoroutines(t, baseG+streams/4, 20*time.Second, "stalled stream handlers")
	hp := heapInUse()
	if hp > baseHeap+64<<20 {
		t.Fatalf("heap in use %d MiB after the streams were dropped (base %d MiB)", hp>>20, baseHeap>>20)
	}
	t.Logf("%d stalled streams: worst honest write %v; goroutines %d -> %d (settled %v after the drop); heap in use %d -> %d MiB",
		streams, worst, baseG, g, time.Since(freed), baseHeap>>20, hp>>20)
}

// One client cannot take every viewer stream: the 17th from one
// address is refused, and a slot frees when a stream ends.
func TestViewerStreamsPerClient(t *testing.T) {
	h := adptest.StartHost(t, node.Config{})
	alice := adptest.NewAgent("alice")
	id := createRoom(t, h, alice, h.RoomPayload("public"))
	token := func() string {
		r := sendJSON(t, h, nil, http.MethodPost, "/v1/viewer-tokens", map[string]any{"room_id": id})
		return decode[struct {
			Token string `json:"token"`
		}](t, r).Token
	}
	url := h.URL + "/v1/rooms/" + id + "/events/view?token="
	var open []*sseStream
	for i := 0; i < hostapi.DefaultViewerStreamsPerClient; i++ {
		s, r := dialStream(t, url+token(), "", 16)
		if s == nil {
			t.Fatalf("viewer stream %d: %s", i, r)
		}
		open = append(open, s)
	}
	before := runtime.NumGoroutine()
	s, r := dialStream(t, url+token(), "", 16)
	if s != nil || r.Status != http.StatusTooManyRequests || r.ErrorCode() != "rate_limited" {
		t.Fatalf("17th viewer stream from one client: %v", r)
	}
	if g := runtime.NumGoroutine(); g > before+5 {
		t.Fatalf("a refused stream left goroutines: %d -> %d", before, g)
	}
	open[0].Close()
	var again *sseStream
	testwait.Until(t, 20*time.Second, "a freed slot", func() bool {
		again, _ = dialStream(t, url+token(), "", 16)
		return again != nil
	})
	// Discovery says what the cap is.
	d := decode[map[string]any](t, get(t, h, nil, "/.well-known/agent-discourse"))
	if v := d["limits"].(map[string]any)["viewer_streams_per_client"]; v != float64(hostapi.DefaultViewerStreamsPerClient) {
		t.Fatalf("discovery viewer_streams_per_client = %v", v)
	}
}

// Small edge cases: a null agent status, bad query numbers, auth schemes
// other than Bearer, and a Content-Length over the cap.
func TestEdgeSmallOnes(t *testing.T) {
	h := adptest.StartHost(t, node.Config{})
	alice := adptest.NewAgent("alice")
	id := createRoom(t, h, alice, h.RoomPayload("public"))

	r := adptest.Do(t, http.MethodPut, h.URL+"/v1/rooms/"+id+"/agent-status", tok(h, alice), []byte("null"))
	if r.Status != http.StatusBadRequest || r.ErrorCode() != "invalid_request" {
		t.Errorf("agent-status null: %s", r)
	}
	for _, q := range []string{"cursor=garbage", "cursor=%00", "limit=+5", "limit=-1", "limit=%205", "limit=5x"} {
		if r := get(t, h, alice, "/v1/me/rooms?"+q); r.Status != http.StatusBadRequest || r.ErrorCode() != "invalid_request" {
			t.Errorf("me/rooms?%s: %s", q, r)
		}
	}
	if r := get(t, h, nil, "/v1/rooms/"+id+"/events?after_seq=+1"); r.Status != http.StatusBadRequest {
		t.Errorf("after_seq=+1: %s", r)
	}
	if r := get(t, h, alice, "/v1/me/rooms?limit=5"); r.Status != http.StatusOK {
		t.Errorf("limit=5: %s", r)
	}
	for _, scheme := range []string{"bearer", "BEARER", "Bearer", "bEaReR"} {
		req, _ := http.NewRequest(http.MethodGet, h.URL+"/v1/me/rooms", nil)
		req.Header.Set("Authorization", scheme+" "+tok(h, alice))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("scheme %q: %d", scheme, resp.StatusCode)
		}
	}
	req, _ := http.NewRequest(http.MethodGet, h.URL+"/v1/me/rooms", nil)
	req.Header.Set("Authorization", "Basic "+tok(h, alice))
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("Basic scheme accepted: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}

	// Content-Length over the cap: 413 before a byte of the body is read
	// (the client sends none and still gets the answer at once).
	addr := strings.TrimPrefix(h.URL, "http://")
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "POST /v1/rooms HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: 999999999\r\n\r\n", addr)
	c.SetReadDeadline(time.Now().Add(2 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no up-front answer to a huge Content-Length: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(string(b), `"payload_too_large"`) {
		t.Fatalf("huge Content-Length: %d %s", resp.StatusCode, b)
	}
}

var _ = sync.Mutex{}
