package hostapi

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/adpnode/adpnode/internal/testwait"
	"github.com/adpnode/adpnode/live"
)

// sseRecorder is a response writer that counts flushes, can block writes
// (a client that stopped reading) and can fail them (a client gone).
type sseRecorder struct {
	mu      sync.Mutex
	h       http.Header
	buf     bytes.Buffer
	flushes int
	fail    error
	blocked chan struct{} // when set, Write waits until it is closed
	inWrite chan struct{} // signalled when a Write starts blocking
	// deadlines are the write deadlines set, with when each was set.
	deadlines []deadlineSet
}

type deadlineSet struct{ at, deadline time.Time }

func newSSERecorder() *sseRecorder {
	return &sseRecorder{h: http.Header{}, inWrite: make(chan struct{}, 1)}
}

func (r *sseRecorder) Header() http.Header { return r.h }
func (r *sseRecorder) WriteHeader(int)     {}
func (r *sseRecorder) Write(p []byte) (int, error) {
	r.mu.Lock()
	block := r.blocked
	r.mu.Unlock()
	if block != nil {
		select {
		case r.inWrite <- struct{}{}:
		default:
		}
		<-block
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fail != nil {
		return 0, r.fail
	}
	return r.buf.Write(p)
}
func (r *sseRecorder) FlushError() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fail != nil {
		return r.fail
	}
	r.flushes++
	return nil
}
func (r *sseRecorder) SetWriteDeadline(d time.Time) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.deadlines = append(r.deadlines, deadlineSet{time.Now(), d})
	return nil
}
func (r *sseRecorder) state() (string, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.buf.String(), r.flushes
}

func frame(i int) *live.Item { return live.NewItem("room.event", fmt.Appendf(nil, `{"seq":%d}`, i)) }

// A burst queued on a mirror-style stream is written with one flush, and
// the stream ends with its close reason as the last thing written.
func TestSSEBurstIsOneFlushAndCloseReasonIsLast(t *testing.T) {
	h := live.NewHub[struct{}](64)
	sub := h.Subscribe("room", struct{}{})
	var want strings.Builder
	want.WriteString(": subscribed (mirror)\n\n")
	for i := range 50 {
		h.Publish("room", frame(i), nil)
		want.Write(frame(i).Frame)
	}
	h.CloseTopic("room", "mirror_frozen")
	want.WriteString(": closed mirror_frozen\n\n")
	w := newSSERecorder()
	writeSSE(context.Background(), w, sseConfig{heartbeat: time.Hour, flushInterval: 5 * time.Millisecond, writeTimeout: time.Second},
		"subscribed (mirror)", sub.C, sub.Reason)
	out, flushes := w.state()
	if out != want.String() {
		t.Fatalf("stream:\n%q\nwant:\n%q", out, want.String())
	}
	if flushes != 2 { // the hello, then the burst with the close reason
		t.Fatalf("%d flushes for a hello, a 50-item burst and the end; want 2", flushes)
	}
	if ct := w.h.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type %q", ct)
	}
}

// streamSSE subscribes to "room" on a new hub queueing up to buffer items
// per subscriber and runs writeSSE for it on a goroutine; done closes when
// the writer returns.
func streamSSE(buffer int, cfg sseConfig) (*live.Hub[struct{}], *live.Subscription[struct{}], *sseRecorder, chan struct{}) {
	h := live.NewHub[struct{}](buffer)
	sub := h.Subscribe("room", struct{}{})
	w := newSSERecorder()
	done := make(chan struct{})
	go func() {
		defer close(done)
		writeSSE(context.Background(), w, cfg, "subscribed", sub.C, sub.Reason)
	}()
	return h, sub, w, done
}

// Items arriving while the stream is live are flushed (at once when the
// stream was idle, and at most SSEFlushInterval later otherwise); an idle
// stream gets heartbeats.
func TestSSELiveItemsAndHeartbeat(t *testing.T) {
	h, _, w, done := streamSSE(64, sseConfig{heartbeat: 20 * time.Millisecond, flushInterval: 5 * time.Millisecond, writeTimeout: time.Second})
	testwait.Until(t, 10*time.Second, "a heartbeat", func() bool { out, _ := w.state(); return strings.Contains(out, ": heartbeat\n\n") })
	for i := range 20 {
		h.Publish("room", frame(i), nil)
	}
	testwait.Until(t, 10*time.Second, "the items flushed", func() bool {
		out, _ := w.state()
		return strings.Count(out, "event: room.event\n") == 20
	})
	h.Close(live.ReasonShutdown)
	<-done
	if out, _ := w.state(); !strings.HasSuffix(out, ": closed shutdown\n\n") {
		t.Fatalf("stream does not end with the close reason: %q", out)
	}
}

// A client that stops reading (its writes block) is dropped by the hub with
// slow_consumer once its queue is full, without blocking the publisher; the
// writer ends the stream with that reason when the client reads again.
func TestSSESlowSubscriberDroppedWithReason(t *testing.T) {
	h, sub, w, done := streamSSE(2, sseConfig{heartbeat: time.Hour, flushInterval: -1, writeTimeout: time.Second})
	testwait.Until(t, 10*time.Second, "the hello", func() bool { _, f := w.state(); return f == 1 })
	release := make(chan struct{})
	w.mu.Lock()
	w.blocked = release
	w.mu.Unlock()
	h.Publish("room", frame(0), nil)
	<-w.inWrite // the writer holds item 0, stuck in Write
	for i := 1; i <= 10; i++ {
		h.Publish("room", frame(i), nil) // never blocks: 1 and 2 queue, 3 drops the stream
	}
	if sub.Reason() != live.ReasonSlow || h.Count() != 0 {
		t.Fatalf("stuck stream: reason %q, %d subscribers left", sub.Reason(), h.Count())
	}
	w.mu.Lock()
	w.blocked = nil
	w.mu.Unlock()
	close(release)
	<-done
	out, _ := w.state()
	if strings.Count(out, "event: room.event\n") != 3 || !strings.HasSuffix(out, ": closed slow_consumer\n\n") {
		t.Fatalf("slow stream wrote %q; want items 0-2 then the close reason", out)
	}
}

// The writer returns when the client goes away (context) or a write fails,
// and leaves no goroutine behind: 200 streams come and go, and the
// goroutine count returns to its baseline.
func TestSSEWriterReturnsAndLeavesNoGoroutines(t *testing.T) {
	base := runtime.NumGoroutine()
	h := live.NewHub[struct{}](4)
	var wg sync.WaitGroup
	cancels := make([]context.CancelFunc, 0, 100)
	var failing []*sseRecorder
	for i := range 200 {
		sub := h.Subscribe("room", struct{}{})
		w := newSSERecorder()
		ctx, cancel := context.WithCancel(context.Background())
		cancels = append(cancels, cancel)
		if i%2 == 1 {
			failing = append(failing, w)
		}
		wg.Go(func() {
			defer sub.Close()
			writeSSE(ctx, w, sseConfig{heartbeat: time.Hour, flushInterval: -1, writeTimeout: time.Second}, "subscribed", sub.C, sub.Reason)
		})
	}
	testwait.Until(t, 10*time.Second, "every stream subscribed", func() bool { return h.Count() == 200 })
	for _, w := range failing {
		w.mu.Lock()
		w.fail = errors.New("broken pipe")
		w.mu.Unlock()
	}
	h.Publish("room", frame(1), nil) // the failing half return on this write
	for i, cancel := range cancels {
		if i%2 == 0 {
			cancel()
		}
	}
	wg.Wait()
	for _, cancel := range cancels {
		cancel()
	}
	if h.Count() != 0 {
		t.Fatalf("%d subscriptions left", h.Count())
	}
	testwait.Until(t, 10*time.Second, "goroutines back to the baseline", func() bool { return runtime.NumGoroutine() <= base })
}

// An idle stream's first item is written at once, however long the flush
// interval: the interval only spaces the flushes of a busy stream. (With
// an hour's interval, holding the item would time the test out.)
func TestSSEIdleStreamWritesFirstItemAtOnce(t *testing.T) {
	h, _, w, done := streamSSE(64, sseConfig{heartbeat: time.Hour, flushInterval: time.Hour, writeTimeout: time.Second})
	testwait.Until(t, 10*time.Second, "the hello", func() bool { _, f := w.state(); return f == 1 })
	h.Publish("room", frame(0), nil)
	testwait.Until(t, 10*time.Second, "the first item flushed", func() bool {
		out, f := w.state()
		return f == 2 && strings.Contains(out, string(frame(0).Frame))
	})
	h.Close(live.ReasonShutdown)
	<-done
}

// The write deadline is not renewed per burst but at most every quarter
// of the timeout, and each time to 5/4 of it ahead: a stream of many
// bursts within a quarter of an hour's timeout sets it once, with at least
// the full timeout left for every write.
func TestSSEWriteDeadlineRenewedPerQuarter(t *testing.T) {
	const timeout = time.Hour
	h, _, w, done := streamSSE(64, sseConfig{heartbeat: time.Hour, flushInterval: -1, writeTimeout: timeout})
	for i := range 20 {
		h.Publish("room", frame(i), nil)
		testwait.Until(t, 10*time.Second, "the item flushed", func() bool {
			out, _ := w.state()
			return strings.Count(out, "event: room.event\n") == i+1
		})
	}
	h.Close(live.ReasonShutdown)
	<-done
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.deadlines) != 1 {
		t.Fatalf("%d write deadlines set for 20 bursts within a quarter of the timeout; want 1", len(w.deadlines))
	}
	if d := w.deadlines[0]; d.deadline.Sub(d.at) < timeout {
		t.Fatalf("deadline %v ahead; want at least the timeout %v", d.deadline.Sub(d.at), timeout)
	}
}

// A busy stream waiting out its flush interval holds no batch buffer: the
// burst waits in its queue as pointers, and a buffer is lent only while
// the burst is gathered and written, then given back.
func TestSSEWaitingStreamHoldsNoBuffer(t *testing.T) {
	const interval = 300 * time.Millisecond
	h, sub, w, done := streamSSE(64, sseConfig{heartbeat: time.Hour, flushInterval: interval, writeTimeout: time.Second})
	before := batchBuffersOut.Load()
	h.Publish("room", frame(0), nil) // an idle stream writes at once
	testwait.Until(t, 10*time.Second, "the first item", func() bool { out, _ := w.state(); return strings.Contains(out, `{"seq":0}`) })
	sent := time.Now()
	for i := 1; i <= 20; i++ {
		h.Publish("room", frame(i), nil)
	}
	time.Sleep(interval / 3)
	out, _ := w.state()
	if time.Since(sent) < interval && strings.Contains(out, `{"seq":1}`) {
		t.Fatal("the burst was written before the flush interval passed")
	}
	if n := batchBuffersOut.Load() - before; n != 0 {
		t.Fatalf("a stream waiting for its flush interval holds %d batch buffers; want 0", n)
	}
	testwait.Until(t, 10*time.Second, "the burst", func() bool { out, _ := w.state(); return strings.Contains(out, `{"seq":20}`) })
	sub.Close()
	<-done
	if n := batchBuffersOut.Load() - before; n != 0 {
		t.Fatalf("%d batch buffers still lent out after the stream ended", n)
	}
}
