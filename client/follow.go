package client

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

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

// Follow delivers every record of a room after `after`, in seq order,
// verified, and then live ones until ctx ends or the stream ends. It uses
// the §17.3 bootstrap: subscribe first, then read history after the last
// verified record, then de-duplicate overlapping records by seq. A gap in
// the live stream is filled from history. The caller must be an active
// member (the host requires it for SSE).
func (c *Client) Follow(ctx context.Context, roomID string, after int64, fn func(*record.Record) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	tok, err := c.Token()
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.Origin+"/v1/rooms/"+roomID+"/events/live", nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Accept", "text/event-stream")
	hc := *c.HTTP
	hc.Timeout = 0 // streams are long-lived
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		var e Error
		e.Status = resp.StatusCode
		var body struct {
			Error Error `json:"error"`
		}
		json.NewDecoder(resp.Body).Decode(&body)
		e.Code, e.Message, e.Data = body.Error.Code, body.Error.Message, body.Error.Data
		return &e
	}
	live := make(chan *record.Record, 4096)
	streamErr := make(chan error, 1)
	var closed string // written before live is closed, read after
	go func() {
		defer close(live)
		streamErr <- readSSE(resp, func(event, data string) error {
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
				return fmt.Errorf("live record does not verify: %w", err)
			}
			select {
			case live <- rec:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
	}()

	chain := NewChain(nil)
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
	hist, err := c.History(ctx, roomID, 0)
	if err != nil {
		return err
	}
	for _, h := range hist {
		if err := deliver(h); err != nil {
			return err
		}
	}
	for rec := range live {
		if err := deliver(rec); err != nil {
			return err
		}
	}
	closedAt := &closed
	if err := <-streamErr; err != nil && ctx.Err() == nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return &StreamEnd{Reason: closedReason(closedAt)}
}

// StreamEnd is returned by Follow when the host ended the stream. Reason
// is what the host said (": closed <reason>", for example room_ended,
// room_cancelled, membership or shutdown), or "dropped" when the
// connection ended without a word.
type StreamEnd struct {
	Reason string
}

func (e *StreamEnd) Error() string { return "the host ended the stream: " + e.Reason }

func closedReason(s *string) string {
	if *s == "" {
		return "dropped"
	}
	return *s
}

// deliverOne verifies rec against the chain and passes it on when it is
// past the caller's starting point. Records before it are still verified:
// the chain is checked from seq 1.
func (c *Client) deliverOne(chain *Chain, rec *record.Record, after int64, fn func(*record.Record) error) error {
	if err := chain.Add(rec); err != nil {
		return fmt.Errorf("chain verification failed: %w", err)
	}
	if rec.Seq > after {
		return fn(rec)
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
