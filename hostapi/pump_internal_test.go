package hostapi

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/adpnode/adpnode/live"
)

// writeCounter records every Write the SSE pump makes to the connection.
type writeCounter struct {
	*httptest.ResponseRecorder
	writes []int // sizes
}

func (w *writeCounter) Write(b []byte) (int, error) {
	w.writes = append(w.writes, len(b))
	return w.ResponseRecorder.Write(b)
}

func (w *writeCounter) WriteString(s string) (int, error) { return w.Write([]byte(s)) }

func runPump(t *testing.T, interval time.Duration, items []*live.Item) *writeCounter {
	t.Helper()
	gin.SetMode(gin.ReleaseMode)
	w := &writeCounter{ResponseRecorder: httptest.NewRecorder()}
	c, _ := gin.CreateTestContext(w)
	c.Request = httptest.NewRequest(http.MethodGet, "/v1/rooms/r/events/live", nil)
	s := &Server{opts: Options{Heartbeat: time.Hour, SSEFlushInterval: interval, HTTP: HTTPOptions{}.WithDefaults()}}
	ch := make(chan *live.Item, len(items))
	for _, it := range items {
		ch <- it
	}
	close(ch)
	done := make(chan struct{})
	go func() { defer close(done); s.pump(c, "subscribed", ch, func() string { return "room_ended" }) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("pump did not end after its channel closed")
	}
	return w
}

// A burst that is queued when the stream wakes is written in one piece,
// in order, complete, and the close reason follows it.
func TestPumpWritesBurstOnce(t *testing.T) {
	var items []*live.Item
	var want bytes.Buffer
	want.WriteString(": subscribed\n\n")
	for i := range 200 {
		it := live.NewItem("room.event", []byte(fmt.Sprintf(`{"seq":%d}`, i)))
		if i%2 == 1 { // an item without a prebuilt frame is framed from its parts
			it.Frame = nil
		}
		items = append(items, it)
		fmt.Fprintf(&want, "event: room.event\ndata: {\"seq\":%d}\n\n", i)
	}
	want.WriteString(": closed room_ended\n\n")
	w := runPump(t, time.Millisecond, items)
	if got := w.Body.String(); got != want.String() {
		t.Fatalf("stream differs:\n got %q…\nwant %q…", got[:min(len(got), 200)], want.String()[:200])
	}
	// hello, the burst, the close reason: three writes, not one per item.
	if len(w.writes) != 3 {
		t.Fatalf("%d writes for a queued burst of 200 items (sizes %v); want 3", len(w.writes), w.writes)
	}
}

// A hostile burst (large items, many of them) is written as it grows:
// no single write, so no gathered batch, is much over sseBatchBytes.
func TestPumpBoundsBatch(t *testing.T) {
	big := strings.Repeat("x", 20<<10)
	var items []*live.Item
	for range 64 {
		items = append(items, live.NewItem("room.event", []byte(`{"b":"`+big+`"}`)))
	}
	w := runPump(t, time.Millisecond, items)
	frame := len(items[0].Frame)
	total := 0
	for _, n := range w.writes {
		if n > sseBatchBytes+frame {
			t.Fatalf("a write of %d bytes: the batch bound is %d (+ one frame of %d)", n, sseBatchBytes, frame)
		}
		total += n
	}
	if total != w.Body.Len() || !strings.HasSuffix(w.Body.String(), ": closed room_ended\n\n") {
		t.Fatalf("stream incomplete: %d bytes written, %d recorded", total, w.Body.Len())
	}
	if got := strings.Count(w.Body.String(), "event: room.event\n"); got != len(items) {
		t.Fatalf("%d events delivered, want %d", got, len(items))
	}
}

// readBody reads exactly the body, whatever Content-Length claims, and
// never past the limit.
func TestReadBodyIgnoresWrongLength(t *testing.T) {
	body := strings.Repeat("a", 1000)
	for _, declared := range []int64{-1, 0, 1, 999, 1000, 1001, 5000, 1 << 40} {
		got, err := readBody(strings.NewReader(body), declared, 4096)
		if err != nil || string(got) != body {
			t.Fatalf("declared %d: %d bytes, %v", declared, len(got), err)
		}
	}
	// Over the limit: the limited reader's error comes back.
	rec := httptest.NewRecorder()
	_, err := readBody(http.MaxBytesReader(rec, io.NopCloser(strings.NewReader(body)), 100), 1000, 100)
	var mbe *http.MaxBytesError
	if !errors.As(err, &mbe) {
		t.Fatalf("a body over the limit read without MaxBytesError: %v", err)
	}
	_, err = readBody(http.MaxBytesReader(rec, io.NopCloser(strings.NewReader(body)), 100), 50, 100)
	if !errors.As(err, &mbe) {
		t.Fatalf("a body over the limit with a small declared length read without MaxBytesError: %v", err)
	}
}

// A frame larger than a whole batch is written whole, in order, between
// small ones; the buffer it grew is not given back to the pool, so the
// streams' pooled buffers stay at a batch's size.
func TestPumpFrameLargerThanBatch(t *testing.T) {
	big := live.NewItem("room.event", []byte(`{"pad":"`+strings.Repeat("x", 3*sseBatchBytes)+`"}`))
	var items []*live.Item
	var want bytes.Buffer
	want.WriteString(": subscribed\n\n")
	for i := range 5 {
		it := live.NewItem("room.event", []byte(fmt.Sprintf(`{"seq":%d}`, i)))
		items = append(items, it)
		want.Write(it.Frame)
		if i == 2 {
			items = append(items, big)
			want.Write(big.Frame)
		}
	}
	want.WriteString(": closed room_ended\n\n")
	w := runPump(t, time.Millisecond, items)
	if got := w.Body.String(); got != want.String() {
		t.Fatalf("stream differs: got %d bytes, want %d", len(got), want.Len())
	}
	grown := make([]byte, 0, 4*sseBatchBytes)
	putBatchBuffer(&grown)
	for range 8 {
		if b := batchBuffers.Get().(*[]byte); cap(*b) > 2*sseBatchBytes || len(*b) != 0 {
			t.Fatalf("the pool handed out a buffer of len %d, cap %d; want empty and at most %d", len(*b), cap(*b), 2*sseBatchBytes)
		}
	}
}
