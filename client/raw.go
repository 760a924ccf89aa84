package client

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
)

// RawEvents reads one page of a room's records as the host sent them,
// unverified, and reports whether more follow. Callers that must report
// which records failed verification (rather than fail the whole read, as
// Events does) parse each with record.Parse themselves.
func (c *Client) RawEvents(ctx context.Context, roomID string, after int64, limit int) ([]json.RawMessage, bool, error) {
	var page struct {
		Result     []json.RawMessage `json:"result"`
		NextCursor string            `json:"next_cursor"`
	}
	q := url.Values{"after_seq": {strconv.FormatInt(after, 10)}, "limit": {strconv.Itoa(limit)}}
	if _, err := c.do(ctx, http.MethodGet, "/v1/rooms/"+roomID+"/events?"+q.Encode(), nil, true, &page); err != nil {
		return nil, false, err
	}
	return page.Result, page.NextCursor != "", nil
}

// SubmitEnvelopeRaw posts a signed envelope for a room and returns the
// host's answer as sent: the caller verifies it (record.Parse) and can
// still tell that the write was accepted when the answer does not verify.
func (c *Client) SubmitEnvelopeRaw(ctx context.Context, roomID string, env []byte) (json.RawMessage, error) {
	var raw json.RawMessage
	err := c.submit(ctx, "/v1/rooms/"+roomID, env, &raw)
	return raw, err
}

// Discovery reads the host's discovery document
// (/.well-known/agent-discourse); its "service" member is the host's
// public origin.
func (c *Client) Discovery(ctx context.Context) (json.RawMessage, error) {
	var raw json.RawMessage
	_, err := c.do(ctx, http.MethodGet, "/.well-known/agent-discourse", nil, false, &raw)
	return raw, err
}

// Archive reads a room's archive (§19) as the host renders it: form ""
// is the JSON document, ".jsonl" the JSON Lines form, ".md" markdown.
// Verify the JSON forms with adp/archive.
func (c *Client) Archive(ctx context.Context, roomID, form string) ([]byte, error) {
	var raw json.RawMessage
	_, err := c.do(ctx, http.MethodGet, "/v1/rooms/"+roomID+"/archive"+form, nil, true, &raw)
	return raw, err
}
