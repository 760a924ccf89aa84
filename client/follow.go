package client

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/adpnode/adpnode/adp/record"
)

// Chain verifies records client-side as they are delivered: each record
// verifies on its own (envelope hash and signature, record hash) and links
// to the previous one.
type Chain struct {
	last *record.Record
}

// NewChain starts a chain after a verified record (nil: from seq 1).
func NewChain(after *record.Record) *Chain { return &Chain{last: after} }

// Last returns the last verified record (nil if none).
func (c *Chain) Last() *record.Record { return c.last }

// Seq returns the last verified seq.
func (c *Chain) Seq() int64 {
	if c.last == nil {
		return 0
	}
	return c.last.Seq
}

// Add verifies that rec continues the chain and extends it.
func (c *Chain) Add(rec *record.Record) error {
	if c.last == nil && rec.Seq != 1 {
		return fmt.Errorf("chain must start at seq 1, got %d", rec.Seq)
	}
	if c.last != nil {
		if err := record.Link(c.last, rec); err != nil {
			return err
		}
	}
	c.last = rec
	return nil
}

// FollowOptions tune FollowWith. The zero value is usable.
type FollowOptions struct {
	// MinBackoff and MaxBackoff bound the wait before reconnecting; it
	// doubles after each attempt that delivered nothing (defaults 250 ms
	// and 30 s), with jitter.
	MinBackoff, MaxBackoff time.Duration
	// HeartbeatTimeout ends a connection that has been silent this long
	// (no record, no heartbeat) and reconnects. Default 45 s: three of the
	// host's 15 s heartbeats. Negative disables it.
	HeartbeatTimeout time.Duration
	// MaxRetries gives up after this many consecutive reconnects that
	// delivered nothing (0: never give up while ctx lasts).
	MaxRetries int
	// OnReconnect, if set, is told each reconnect: the attempt number
	// (1 for the first after a working stream), why the last connection
	// ended and any error.
	OnReconnect func(attempt int, reason string, err error)
}

func (o *FollowOptions) defaults() {
	if o.MinBackoff <= 0 {
		o.MinBackoff = 250 * time.Millisecond
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = 30 * time.Second
	}
	if o.HeartbeatTimeout == 0 {
		o.HeartbeatTimeout = 45 * time.Second
	}
}

// Follow is FollowWith with the default options.
func (c *Client) Follow(ctx context.Context, roomID string, after int64, fn func(*record.Record) error) error {
	return c.FollowWith(ctx, roomID, after, FollowOptions{}, fn)
}

// FollowWith delivers every record of a room after `after`, in seq order,
// verified from seq 1, then live ones. Each connection uses the §17.3
// bootstrap: subscribe first, then read history after the last verified
// record, then de-duplicate by seq; a gap in the live stream is filled
// from history. When a connection drops, goes silent past the heartbeat
// timeout, or the host sheds or restarts, it reconnects with backoff and
// resumes after the last delivered seq, so nothing is missed or repeated.
//
// It returns ctx's error when ctx ends; a *StreamEnd when the room ended
// or was cancelled, the follower stopped being a member, or MaxRetries
// ran out (Reason says which); the host's *Error when it refuses the
// subscription (for example membership_required: the caller must be an
// active member); or fn's error, or a verification failure, as they are.
func (c *Client) FollowWith(ctx context.Context, roomID string, after int64, opt FollowOptions, fn func(*record.Record) error) error {
	opt.defaults()
	chain := NewChain(nil)
	failures := 0
	for {
		before := chain.Seq()
		opened := false
		reason, err, retry := c.followOnce(ctx, roomID, chain, after, opt.HeartbeatTimeout, fn, &opened)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if !retry {
			if err != nil {
				return err
			}
			return &StreamEnd{Reason: reason}
		}
		if chain.Seq() > before || (opened && reason != "heartbeat_timeout") {
			failures = 0 // that connection worked
		}
		failures++
		if opt.MaxRetries > 0 && failures > opt.MaxRetries {
			return &StreamEnd{Reason: reason, Err: err}
		}
		if opt.OnReconnect != nil {
			opt.OnReconnect(failures, reason, err)
		}
		wait := opt.MinBackoff << min(failures-1, 16)
		if wait > opt.MaxBackoff || wait <= 0 {
			wait = opt.MaxBackoff
		}
		wait = wait/2 + time.Duration(rand.Int64N(int64(wait/2)+1))
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
	}
}

// terminalReasons end a follow for good: the stream cannot come back.
var terminalReasons = map[string]bool{"room_ended": true, "room_cancelled": true, "membership_ended": true}

// followOnce runs one connection. It returns why the stream ended (the
// host's reason, "dropped", or "heartbeat_timeout"), an error, and whether
// reconnecting may help.
func (c *Client) followOnce(ctx context.Context, roomID string, chain *Chain, after int64, hbTimeout time.Duration,
	fn func(*record.Record) error, opened *bool) (reason string, err error, retry bool) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	tok, err := c.Token()
	if err != nil {
		return "", err, false
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.Origin+"/v1/rooms/"+roomID+"/events/live", nil)
	if err != nil {
		return "", err, false
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Accept", "text/event-stream")
	// The watchdog ends a silent connection (also one that never
	// answers the subscription).
	var lastSeen atomic.Int64
	lastSeen.Store(time.Now().UnixNano())
	var silent atomic.Bool
	if hbTimeout > 0 {
		wd := time.NewTicker(max(hbTimeout/4, time.Millisecond))
		defer wd.Stop()
		go func() {
			for {
				select {
				case <-ctx.Done():
					return
				case <-wd.C:
					if time.Since(time.Unix(0, lastSeen.Load())) > hbTimeout {
						silent.Store(true)
						cancel()
						return
					}
				}
			}
		}()
	}

	hc := *c.HTTP
	hc.Timeout = 0 // streams are long-lived
	resp, err := hc.Do(req)
	if err != nil {
		if silent.Load() {
			return "heartbeat_timeout", err, true
		}
		return "unreachable", err, true
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		var e Error
		e.Status = resp.StatusCode
		var body struct {
			Error Error `json:"error"`
		}
		_ = json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&body)
		e.Code, e.Message, e.Data = body.Error.Code, body.Error.Message, body.Error.Data
		return string(e.Code), &e, e.Status >= 500 || e.Status == http.StatusTooManyRequests
	}
	*opened = true

	live := make(chan *record.Record, 4096)
	streamErr := make(chan error, 1)
	var closed string // written before live is closed, read after
	go func() {
		defer close(live)
		streamErr <- readSSE(resp, func(event, data string) error {
			lastSeen.Store(time.Now().UnixNano())
			if event == "comment" {
				if r, ok := strings.CutPrefix(data, "closed "); ok {
					closed = r
				}
				return nil
			}
			if event != "room.event" {
				return nil
			}
			rec, _, err := record.Parse([]byte(data))
			if err != nil {
				return &verifyError{fmt.Errorf("live record does not verify: %w", err)}
			}
			select {
			case live <- rec:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
	}()

	deliver := func(rec *record.Record) error {
		if rec.Seq <= chain.Seq() {
			return nil // overlap: already delivered
		}
		if rec.Seq > chain.Seq()+1 {
			// A gap (or the start): fill it from history.
			hist, err := c.History(ctx, roomID, chain.Seq())
			if err != nil {
				return err
			}
			for _, h := range hist {
				if h.Seq >= rec.Seq {
					break
				}
				if err := c.deliverOne(chain, h, after, fn); err != nil {
					return err
				}
			}
		}
		return c.deliverOne(chain, rec, after, fn)
	}
	// History after subscribing: nothing accepted after the subscription
	// can be missed, and overlaps are dropped by seq.
	hist, err := c.History(ctx, roomID, chain.Seq())
	if err != nil {
		return c.endReason(&silent, "history", err)
	}
	for _, h := range hist {
		if err := deliver(h); err != nil {
			return c.endReason(&silent, "history", err)
		}
	}
	for rec := range live {
		if err := deliver(rec); err != nil {
			return c.endReason(&silent, "history", err)
		}
	}
	err = <-streamErr
	if silent.Load() {
		return "heartbeat_timeout", nil, true
	}
	var ve *verifyError
	if errors.As(err, &ve) {
		return "", ve.err, false
	}
	if closed != "" {
		return closed, nil, !terminalReasons[closed]
	}
	return "dropped", err, true
}

// endReason classifies an error met while delivering: the caller's and
// verification errors are final; transport and 5xx errors are retried.
func (c *Client) endReason(silent *atomic.Bool, what string, err error) (string, error, bool) {
	if silent.Load() {
		return "heartbeat_timeout", nil, true
	}
	var de *deliverError
	if errors.As(err, &de) {
		return "", de.err, false
	}
	var ce *Error
	if errors.As(err, &ce) {
		return string(ce.Code), err, ce.Status >= 500 || ce.Status == http.StatusTooManyRequests
	}
	if strings.Contains(err.Error(), "does not verify") {
		return "", err, false
	}
	return "dropped", fmt.Errorf("%s: %w", what, err), true
}

// verifyError marks a record that failed verification on the stream.
type verifyError struct{ err error }

func (e *verifyError) Error() string { return e.err.Error() }

// deliverError marks an error from verification of the chain or from the
// caller's function: never retried.
type deliverError struct{ err error }

func (e *deliverError) Error() string { return e.err.Error() }
func (e *deliverError) Unwrap() error { return e.err }

// StreamEnd is returned by Follow when the stream ended for good. Reason
// is what the host said (": closed <reason>": room_ended, room_cancelled,
// membership_ended), or, when MaxRetries ran out, why the last connection
// ended ("dropped", "heartbeat_timeout", "shutdown", "slow_consumer", an
// error code); Err is that connection's error, if any.
type StreamEnd struct {
	Reason string
	Err    error
}

func (e *StreamEnd) Error() string {
	if e.Err != nil {
		return "the stream ended: " + e.Reason + ": " + e.Err.Error()
	}
	return "the stream ended: " + e.Reason
}

func (e *StreamEnd) Unwrap() error { return e.Err }

// deliverOne verifies rec against the chain and passes it on when it is
// past the caller's starting point. Records before it are still verified:
// the chain is checked from seq 1.
func (c *Client) deliverOne(chain *Chain, rec *record.Record, after int64, fn func(*record.Record) error) error {
	if err := chain.Add(rec); err != nil {
		return &deliverError{fmt.Errorf("chain verification failed: %w", err)}
	}
	if rec.Seq > after {
		if err := fn(rec); err != nil {
			return &deliverError{err}
		}
	}
	return nil
}

// readSSE parses a text/event-stream body and calls fn per event.
func readSSE(resp *http.Response, fn func(event, data string) error) error {
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	var event string
	var data strings.Builder
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if data.Len() > 0 {
				if err := fn(event, data.String()); err != nil {
					return err
				}
			}
			event = ""
			data.Reset()
		case strings.HasPrefix(line, ":"):
			if err := fn("comment", strings.TrimSpace(line[1:])); err != nil {
				return err
			}
		case strings.HasPrefix(line, "event:"):
			event = strings.TrimSpace(line[len("event:"):])
		case strings.HasPrefix(line, "data:"):
			if data.Len() > 0 {
				data.WriteByte('\n')
			}
			data.WriteString(strings.TrimPrefix(line[len("data:"):], " "))
		}
	}
	return sc.Err()
}
