//go:build e2e

package hostapi_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/adpnode/adpnode/adp"
	"github.com/adpnode/adpnode/hostapi"
	"github.com/adpnode/adpnode/internal/adptest"
	"github.com/adpnode/adpnode/internal/testwait"
	"github.com/adpnode/adpnode/node"
)

// openAgentStream dials GET /v1/me/stream for a and answers the open
// stream, or the error answer. Safe off the test goroutine.
func openAgentStream(h *adptest.Host, a *adptest.Agent) (*http.Response, *adptest.Response, error) {
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, h.URL+"/v1/me/stream", nil)
	if err != nil {
		return nil, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+tok(h, a))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, nil, err
	}
	if resp.StatusCode == http.StatusOK {
		return resp, nil, nil
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return nil, &adptest.Response{Status: resp.StatusCode, Header: resp.Header, Body: b}, err
}

// Agent streams over HTTP, attacked. Eight opens racing for one agent get
// exactly its four streams; the others get rate_limited (stream_cap, with
// the limit) in the spec's error shape, and slots come back when streams
// close. Four streams of another agent never read (a tiny receive buffer;
// the write deadline is a minute, so their handlers block in Write) while
// mentions keep coming: the writer is never refused and an honest stream
// receives every mention. Their slow_consumer drop is TestWatchNeverReads
// (attention): here the server's socket buffers (up to 4 MiB a connection)
// would take some 10,000 mentions per stream. Once the clients leave their
// handlers return and the slots come back, goroutines return to their
// base, draining the service ends a stream with ": closed shutdown", and
// after a restart on the same data dir a stream carries new mentions.
func TestAgentStreamCapAndNeverReads(t *testing.T) {
	h := adptest.StartHostHTTP(t, node.Config{DataDir: filepath.Join(t.TempDir(), "db"), Rates: highRates()}, hostapi.HTTPOptions{SSEWriteTimeout: time.Minute})
	alice, bob, carol, writer := adptest.NewAgent("alice"), adptest.NewAgent("bob"), adptest.NewAgent("carol"), adptest.NewAgent("writer")
	roomID := createRoom(t, h, writer, h.RoomPayload("public"))
	runtime.GC()
	base := runtime.NumGoroutine()

	// Racing opens.
	var mu sync.Mutex
	var opened []*http.Response
	var refused []*adptest.Response
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			resp, r, err := openAgentStream(h, carol)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				t.Error(err)
			case resp != nil:
				opened = append(opened, resp)
			default:
				refused = append(refused, r)
			}
		})
	}
	wg.Wait()
	if len(opened) != 4 || len(refused) != 4 {
		t.Fatalf("8 racing opens: %d streams, %d refused; want 4 and 4", len(opened), len(refused))
	}
	for _, r := range refused {
		expectCode(t, r, adp.CodeRateLimited)
		if d := r.ErrorData(); d["reason"] != "stream_cap" || d["limit"] != float64(4) {
			t.Fatalf("over the cap: %s", r.Body)
		}
	}
	for _, resp := range opened {
		resp.Body.Close()
	}
	testwait.Until(t, 10*time.Second, "closed streams' slots back", func() bool { return h.Att.Watchers() == 0 })
	if resp, r, err := openAgentStream(h, carol); err != nil || resp == nil {
		t.Fatalf("a stream after the closes: %v %s", err, short(r))
	} else {
		resp.Body.Close()
	}
	testwait.Until(t, 10*time.Second, "carol's stream closed", func() bool { return h.Att.Watchers() == 0 })

	// Streams that never read, and one that does.
	honest, r := dialStream(t, h.URL+"/v1/me/stream", tok(h, alice), 1<<14)
	if honest == nil {
		t.Fatalf("alice's stream: %s", r)
	}
	addr := strings.TrimPrefix(h.URL, "http://")
	var stuck []net.Conn
	for range 4 {
		stuck = append(stuck, dialNoRead(t, addr, "/v1/me/stream", tok(h, bob)))
	}
	defer func() {
		for _, c := range stuck {
			c.Close()
		}
	}()
	testwait.Until(t, 10*time.Second, "streams open", func() bool { return h.Att.Watchers() == 5 })
	if _, r, _ := openAgentStream(h, bob); r == nil || r.ErrorCode() != string(adp.CodeRateLimited) {
		t.Fatalf("bob's fifth stream: %s", short(r))
	}
	const posts = 64
	for range posts {
		mention(t, h, writer, roomID, alice, bob)
	}
	for got := 0; got < posts; {
		it, ok := honest.next(10 * time.Second)
		if !ok {
			t.Fatalf("alice's stream ended or stalled after %d of %d mentions", got, posts)
		}
		if it.Event == "mention" {
			got++
		}
	}
	// Bound: once the clients leave, every handler returns and its slot
	// comes back.
	for _, c := range stuck {
		c.Close()
	}
	testwait.Until(t, 10*time.Second, "bob's streams closed", func() bool { return h.Att.Watchers() == 1 })
	fresh, r := dialStream(t, h.URL+"/v1/me/stream", tok(h, bob), 64)
	if fresh == nil {
		t.Fatalf("bob's stream after his clients left: %s", r)
	}
	if c, ok := fresh.nextAny(20 * time.Second); !ok || c.Comment != "subscribed" {
		t.Fatalf("bob's new stream opened with %+v", c)
	}
	fresh.Close()
	testwait.Until(t, 10*time.Second, "bob's new stream closed", func() bool { return h.Att.Watchers() == 1 })
	// The owner's Close ends the last stream with shutdown.
	h.Att.DrainStreams()
	if reason, _ := honest.waitEnd(10 * time.Second); reason != "shutdown" {
		t.Fatalf("alice's stream ended with %q, want shutdown", reason)
	}
	honest.Close()
	settleGoroutines(t, base+4, 10*time.Second, "agent stream handlers")

	// Restart on the same data dir: the inbox kept every mention, and a
	// stream carries new ones.
	h = h.Restart(t)
	again, r := dialStream(t, h.URL+"/v1/me/stream", tok(h, alice), 64)
	if again == nil {
		t.Fatalf("after restart: %s", r)
	}
	if c, ok := again.nextAny(20 * time.Second); !ok || c.Comment != "subscribed" {
		t.Fatalf("stream after restart opened with %+v", c)
	}
	mention(t, h, writer, roomID, alice)
	again.mustNext("mention")
	var inbox feedPage
	testwait.Until(t, 10*time.Second, "every mention stored", func() bool {
		inbox = readPage(t, h, alice, "/v1/me/mentions?limit=500")
		return len(inbox.Items) == posts+1 || len(inbox.Items) == 500
	})
	if want := min(posts+1, 500); len(inbox.Items) != want {
		t.Fatalf("alice's inbox: %d items, want %d", len(inbox.Items), want)
	}
}
