package hostapi

import (
	"context"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/adpnode/adpnode/live"
)

// The one SSE writer of the host: agent room streams (§17), viewer
// streams, mirror streams and agent streams (/v1/me/stream) are all
// written by writeSSE. It sends
//
//	": <hello>"            once, flushed, when the stream opens;
//	"event: E\ndata: D"    per item, one flush per burst, bursts at most
//	                       every SSEFlushInterval;
//	": heartbeat"          every Heartbeat while idle;
//	": closed <reason>"    last, when the stream's subscription ended
//	                       (slow_consumer, membership_ended, room_ended,
//	                       mirror_frozen, shutdown, …);
//
// and stops when the client goes away or a write fails. The request's read
// deadline is lifted (the request is read; the stream is long-lived), and
// every write has a deadline between SSEWriteTimeout and 5/4 of it ahead:
// the deadline is set to now + 5/4 × SSEWriteTimeout and renewed by the
// first write at least a quarter of the timeout after the last renewal.
// Renewing per burst cost a timer update per subscriber per flush, which
// at 1,000 subscribers of one busy room is work paid a thousand times per
// interval for no gain. So a client that keeps reading is never cut sooner
// than before (every write still has the full timeout), and one that
// stops reading is cut within 5/4 of the timeout of the write that blocks,
// freeing its handler goroutine and buffers instead of blocking in Write.

// sseConfig is what the writer needs of the server's options.
type sseConfig struct {
	heartbeat     time.Duration
	flushInterval time.Duration // least time between two flushes; <= 0: every burst at once
	writeTimeout  time.Duration // least time every write has before its deadline
}

func (s *Server) sseConfig() sseConfig {
	return sseConfig{heartbeat: s.opts.Heartbeat, flushInterval: s.opts.SSEFlushInterval, writeTimeout: s.opts.HTTP.SSEWriteTimeout}
}

// pump serves a subscription's channel as an SSE stream until it closes
// (reason, if set, names why), the client goes away, or a write fails.
func (s *Server) pump(c *gin.Context, hello string, ch <-chan *live.Item, reason func() string) {
	writeSSE(c.Request.Context(), ginHeaderWriter{unwrap(c.Writer), c.Writer}, s.sseConfig(), hello, ch, reason)
}

// ginHeaderWriter writes the stream's body to the net/http writer (whose
// FlushError and deadlines the SSE writer uses, through Unwrap) and its
// header through gin's, so that gin knows the header is written and does
// not write it again when the handler returns ("superfluous
// response.WriteHeader call").
type ginHeaderWriter struct {
	http.ResponseWriter
	g gin.ResponseWriter
}

func (w ginHeaderWriter) WriteHeader(code int) {
	w.g.WriteHeader(code)
	w.g.WriteHeaderNow()
}

func (w ginHeaderWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// unwrap returns the net/http writer under gin's, whose FlushError reports
// a failed flush (gin's Flush drops the error).
func unwrap(w gin.ResponseWriter) http.ResponseWriter {
	if u, ok := w.(interface{ Unwrap() http.ResponseWriter }); ok {
		return u.Unwrap()
	}
	return w
}

// writeSSE is the SSE writer (see above). w must support flushing (through
// http.NewResponseController); deadlines are set where w supports them.
func writeSSE(ctx context.Context, w http.ResponseWriter, cfg sseConfig, hello string, ch <-chan *live.Item, reason func() string) {
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Time{})
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("Connection", "keep-alive")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	// A write or flush error means the client is gone or too slow.
	var werr error
	// armed is when the write deadline was last set; arm renews it once a
	// quarter of the timeout has passed since (see the top of the file).
	var armed time.Time
	arm := func(now time.Time) {
		if cfg.writeTimeout > 0 && (armed.IsZero() || now.Sub(armed) >= cfg.writeTimeout/4) {
			armed = now
			_ = rc.SetWriteDeadline(now.Add(cfg.writeTimeout + cfg.writeTimeout/4))
		}
	}
	put := func(str string) {
		if werr == nil {
			_, werr = io.WriteString(w, str)
		}
	}
	flush := func() bool {
		if werr == nil {
			werr = rc.Flush()
		}
		return werr == nil
	}
	closed := func() {
		msg := "closed"
		if reason != nil {
			if r := reason(); r != "" {
				msg += " " + r
			}
		}
		put(": " + msg + "\n\n")
		flush()
	}
	arm(time.Now())
	put(": " + hello + "\n\n")
	if !flush() {
		return
	}
	heartbeat := cfg.heartbeat
	if heartbeat <= 0 {
		heartbeat = 15 * time.Second
	}
	beat := time.NewTicker(heartbeat)
	defer beat.Stop()
	coalesce := time.NewTimer(time.Hour)
	coalesce.Stop()
	defer coalesce.Stop()
	var lastFlush time.Time
	// A burst is gathered into batch and handed to the connection in one
	// Write (one chunk, and one write syscall when it fits the connection
	// buffer). A batch over sseBatchBytes is written as it grows, so a
	// stream never holds more than that beyond the connection's buffers.
	// The batch buffer is borrowed from batchBuffers only to gather and
	// write a burst, and given back at once: a stream holds none while it
	// waits, between bursts or for its flush interval (the burst waits in
	// the channel, as pointers), and the buffers are not grown again at
	// every burst.
	var batch *[]byte
	reset := func() {
		if batch != nil {
			putBatchBuffer(batch)
			batch = nil
		}
	}
	defer reset()
	add := func(it *live.Item) {
		if batch == nil {
			batch = getBatchBuffer()
		}
		*batch = appendItem(*batch, it)
		if len(*batch) >= sseBatchBytes {
			werr = writeBatch(w, *batch, werr)
			reset()
		}
	}
	// drain adds what is queued without waiting; false if ch closed.
	drain := func() bool {
		for werr == nil {
			select {
			case it, ok := <-ch:
				if !ok {
					return false
				}
				add(it)
			default:
				return true
			}
		}
		return true
	}
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-beat.C:
			arm(now)
			put(": heartbeat\n\n")
			if !flush() {
				return
			}
		case it, ok := <-ch:
			now := time.Now()
			arm(now)
			if !ok {
				closed()
				return
			}
			// One flush per burst, and bursts at most every
			// flushInterval: items arriving sooner after the last flush
			// wait in the channel (this goroutine sleeps, it is not woken
			// per item) and are taken together when it is due. An idle
			// stream (lastFlush zero, or more than flushInterval ago:
			// hello and heartbeats do not count) writes its first item
			// at once, so the interval only delays a busy stream. The
			// wait comes before the burst is gathered, so that nothing
			// is buffered while it lasts.
			if wait := cfg.flushInterval - now.Sub(lastFlush); wait > 0 {
				coalesce.Reset(wait)
				select {
				case <-ctx.Done():
					return
				case now = <-coalesce.C:
				}
				arm(now) // the wait may have passed a renewal
			}
			add(it)
			open := drain()
			if batch != nil {
				werr = writeBatch(w, *batch, werr)
			}
			reset()
			if !open {
				closed()
				return
			}
			if !flush() {
				return
			}
			lastFlush = time.Now()
		}
	}
}

// sseBatchBytes bounds the frames a stream gathers before writing them.
const sseBatchBytes = 64 << 10

// batchBuffers holds the streams' batch buffers between bursts. Only a
// stream gathering and writing a burst holds one, so at a thousand
// subscribers of a busy room the buffers number the bursts being written,
// not the subscribers; batchBuffersOut counts those lent out.
var (
	batchBuffers = sync.Pool{New: func() any {
		b := make([]byte, 0, sseBatchBytes+8<<10)
		return &b
	}}
	batchBuffersOut atomic.Int64
)

func getBatchBuffer() *[]byte {
	batchBuffersOut.Add(1)
	return batchBuffers.Get().(*[]byte)
}

// putBatchBuffer gives a batch buffer back, unless a frame larger than a
// batch grew it: that one is left to the collector.
func putBatchBuffer(b *[]byte) {
	batchBuffersOut.Add(-1)
	if cap(*b) > 2*sseBatchBytes {
		return
	}
	*b = (*b)[:0]
	batchBuffers.Put(b)
}

// appendItem appends one SSE item's frame: the shared frame when one was
// built, else the frame from its parts.
func appendItem(b []byte, it *live.Item) []byte {
	if it.Frame != nil {
		return append(b, it.Frame...)
	}
	b = append(b, "event: "...)
	b = append(b, it.Event...)
	b = append(b, "\ndata: "...)
	b = append(b, it.Data...)
	return append(b, "\n\n"...)
}

// writeBatch writes gathered frames unless an earlier write failed.
func writeBatch(w http.ResponseWriter, b []byte, err error) error {
	if err != nil || len(b) == 0 {
		return err
	}
	_, err = w.Write(b)
	return err
}
