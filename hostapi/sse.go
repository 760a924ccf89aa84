package hostapi

import (
	"context"
	"io"
	"net/http"
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
// every burst of writes gets its own write deadline of SSEWriteTimeout: a
// client that stops reading is cut within it, so its handler goroutine and
// buffers are freed instead of blocking in Write (issue 11, row 5).

// sseConfig is what the writer needs of the server's options.
type sseConfig struct {
	heartbeat     time.Duration
	flushInterval time.Duration // least time between two flushes; <= 0: every burst at once
	writeTimeout  time.Duration // deadline of each burst of writes
}

func (s *Server) sseConfig() sseConfig {
	return sseConfig{heartbeat: s.opts.Heartbeat, flushInterval: s.opts.SSEFlushInterval, writeTimeout: s.opts.HTTP.SSEWriteTimeout}
}

// pump serves a subscription's channel as an SSE stream until it closes
// (reason, if set, names why), the client goes away, or a write fails.
func (s *Server) pump(c *gin.Context, hello string, ch <-chan live.Item, reason func() string) {
	writeSSE(c.Request.Context(), unwrap(c.Writer), s.sseConfig(), hello, ch, reason)
}

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
func writeSSE(ctx context.Context, w http.ResponseWriter, cfg sseConfig, hello string, ch <-chan live.Item, reason func() string) {
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
	arm := func() {
		if cfg.writeTimeout > 0 {
			_ = rc.SetWriteDeadline(time.Now().Add(cfg.writeTimeout))
		}
	}
	put := func(str string) {
		if werr == nil {
			_, werr = io.WriteString(w, str)
		}
	}
	write := func(it live.Item) {
		if werr == nil {
			werr = writeItem(w, it)
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
	arm()
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
	// drain writes what is queued without waiting; false if ch closed.
	drain := func() bool {
		for werr == nil {
			select {
			case it, ok := <-ch:
				if !ok {
					return false
				}
				write(it)
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
		case <-beat.C:
			arm()
			put(": heartbeat\n\n")
			if !flush() {
				return
			}
		case it, ok := <-ch:
			arm()
			if !ok {
				closed()
				return
			}
			// Drain what is queued before flushing: one flush per burst,
			// and bursts at most every flushInterval.
			write(it)
			if !drain() {
				closed()
				return
			}
			if wait := cfg.flushInterval - time.Since(lastFlush); wait > 0 && werr == nil {
				coalesce.Reset(wait)
			gather:
				for {
					select {
					case <-ctx.Done():
						return
					case it, ok := <-ch:
						if !ok {
							closed()
							return
						}
						write(it)
					case <-coalesce.C:
						break gather
					}
				}
			}
			if !flush() {
				return
			}
			lastFlush = time.Now()
		}
	}
}

// writeItem writes one SSE item: its shared frame when one was built (one
// copy into the connection's buffer), else the frame in parts.
func writeItem(w http.ResponseWriter, it live.Item) error {
	if it.Frame != nil {
		_, err := w.Write(it.Frame)
		return err
	}
	var err error
	for _, part := range [][]byte{[]byte("event: "), []byte(it.Event), []byte("\ndata: "), it.Data, []byte("\n\n")} {
		if _, err = w.Write(part); err != nil {
			return err
		}
	}
	return err
}
