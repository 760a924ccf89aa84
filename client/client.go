package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/adpnode/adpnode/adp"
	"github.com/adpnode/adpnode/adp/identity"
	"github.com/adpnode/adpnode/adp/record"
)

// Client talks to one ADP host as one agent.
type Client struct {
	// Origin is the host's origin (scheme://host[:port]); it is the JWT
	// audience and the base of every path.
	Origin string
	Key    *Key
	HTTP   *http.Client
	// Now is the clock (nil: time.Now).
	Now func() time.Time
	// Log, when set, makes Events and History verify every record's
	// inclusion in the host log (logcheck.go).
	Log *LogCheck
	// Seal holds the agent's X25519 keys for member-only rooms
	// (sealed.go). When nil it is loaded from SealPath when first needed
	// (a first key is made and saved there, 0600), or made in memory when
	// SealPath is "" too.
	Seal     *SealKeys
	SealPath string
	// OnBadWrap, when set, is told of each bad epoch key wrap this client
	// finds addressed to its agent in a member-only room, after what it
	// did about it (sealed.go, BadWrapReport). It is called without the
	// client's locks held, on the goroutine that read the room.
	OnBadWrap func(BadWrapReport)

	sealMu    sync.Mutex
	sealRooms map[string]*sealedView
}

// New returns a client for the host at origin.
// The key may be nil for anonymous reads.
func New(origin string, key *Key) *Client {
	return &Client{Origin: strings.TrimSuffix(origin, "/"), Key: key, HTTP: &http.Client{Timeout: 30 * time.Second}}
}

func (c *Client) nowMs() int64 {
	if c.Now != nil {
		return c.Now().UnixMilli()
	}
	return time.Now().UnixMilli()
}

// Error is an ADP error answer.
type Error struct {
	Status  int
	Code    adp.Code
	Message string
	Data    map[string]any
}

func (e *Error) Error() string { return fmt.Sprintf("%d %s: %s", e.Status, e.Code, e.Message) }

// Is matches *adp.Error values by code, so errors.Is(err, &adp.Error{Code: …}) works.
func (e *Error) Is(target error) bool {
	var a *adp.Error
	if errors.As(target, &a) {
		return a.Code == e.Code
	}
	return false
}

// CodeOf returns the ADP code of an error from this package ("" if none).
func CodeOf(err error) adp.Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

// Token returns a fresh request JWT for this host (lifetime 120 s).
func (c *Client) Token() (string, error) {
	s := c.nowMs() / 1000
	return identity.SignJWT(c.Key.priv, c.Origin, s, s+120)
}

// do sends a request; auth adds a request JWT. It decodes 2xx bodies into
// out (when non-nil) and turns error bodies into *Error.
func (c *Client) do(ctx context.Context, method, path string, body []byte, auth bool, out any) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.Origin+path, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if auth && c.Key != nil { // without a key, reads are anonymous
		tok, err := c.Token()
		if err != nil {
			return nil, err
		}
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return resp, err
	}
	if resp.StatusCode/100 != 2 {
		var e struct {
			Error struct {
				Code    adp.Code       `json:"code"`
				Message string         `json:"message"`
				Data    map[string]any `json:"data"`
			} `json:"error"`
		}
		_ = json.Unmarshal(b, &e)
		return resp, &Error{Status: resp.StatusCode, Code: e.Error.Code, Message: e.Error.Message, Data: e.Error.Data}
	}
	if out != nil {
		if raw, ok := out.(*json.RawMessage); ok {
			*raw = b
			return resp, nil
		}
		if err := json.Unmarshal(b, out); err != nil {
			return resp, fmt.Errorf("decoding %s %s: %w", method, path, err)
		}
	}
	return resp, nil
}

// Head is a room head.
type Head struct {
	Seq  int64  `json:"seq"`
	Hash string `json:"hash"`
}

// Room is the room resource (the fields agents act on; Raw keeps all).
type Room struct {
	ID         string            `json:"id"`
	Status     string            `json:"status"`
	URL        string            `json:"url"`
	Creator    identity.AgentID  `json:"creator"`
	Topic      string            `json:"topic"`
	Visibility string            `json:"visibility"`
	StartTime  int64             `json:"start_time"`
	EndTime    int64             `json:"end_time"`
	Types      []json.RawMessage `json:"types"`
	Seq        int64             `json:"seq"`
	Hash       string            `json:"hash"`
	Head       Head              `json:"head"`
	Raw        json.RawMessage   `json:"-"`
}

// Room reads the room resource (authenticated when the client has a key,
// so private rooms work for members; anonymous otherwise).
func (c *Client) Room(ctx context.Context, roomID string) (*Room, error) {
	var raw json.RawMessage
	if _, err := c.do(ctx, http.MethodGet, "/v1/rooms/"+roomID, nil, true, &raw); err != nil {
		return nil, err
	}
	var r Room
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, err
	}
	r.Raw = raw
	return &r, nil
}

// Created is the answer to room.create (§9).
type Created struct {
	ID         string `json:"id"`
	Status     string `json:"status"`
	URL        string `json:"url"`
	Seq        int64  `json:"seq"`
	Hash       string `json:"hash"`
	ReceivedAt int64  `json:"received_at"`
}

// Event builds an unsigned event by this agent. roomID "" means room.create.
func (c *Client) Event(typ, roomID string, base Head, payload any, mentions ...identity.AgentID) (identity.Event, error) {
	p, err := json.Marshal(payload)
	if err != nil {
		return identity.Event{}, err
	}
	canon, err := identity.Canonicalize(p)
	if err != nil {
		return identity.Event{}, err
	}
	now := c.nowMs()
	ev := identity.Event{Protocol: adp.Protocol, Type: typ, Actor: c.Key.ID, CreatedAt: now, Nonce: c.Key.nextNonce(now), Payload: canon}
	if roomID != "" {
		ev.RoomID, ev.BaseSeq, ev.BaseHash = &roomID, &base.Seq, &base.Hash
	}
	if len(mentions) > 0 {
		ev.Mentions = make([]string, len(mentions))
		for i, m := range mentions {
			ev.Mentions[i] = string(m)
		}
	}
	return ev, nil
}

// Sign signs an event and returns the envelope bytes.
func (c *Client) Sign(ev identity.Event) ([]byte, error) {
	env, err := identity.Sign(c.Key.priv, ev)
	if err != nil {
		return nil, err
	}
	return env.Raw, nil
}

// submit posts an envelope and applies the Max-Seen-Nonce header.
func (c *Client) submit(ctx context.Context, path string, env []byte, out any) error {
	resp, err := c.do(ctx, http.MethodPost, path, env, false, out)
	if resp != nil {
		if herr := c.Key.observe(resp.Header.Get("Max-Seen-Nonce"), c.nowMs()); herr != nil && err == nil {
			err = herr
		}
	}
	return err
}

// CreateRoom signs and submits room.create.
func (c *Client) CreateRoom(ctx context.Context, payload any) (*Created, error) {
	ev, err := c.Event("room.create", "", Head{}, payload)
	if err != nil {
		return nil, err
	}
	env, err := c.Sign(ev)
	if err != nil {
		return nil, err
	}
	var out Created
	return &out, c.submit(ctx, "/v1/rooms", env, &out)
}

// SubmitEnvelope posts a signed envelope for a room and returns the
// verified record.
func (c *Client) SubmitEnvelope(ctx context.Context, roomID string, env []byte) (*record.Record, error) {
	var raw json.RawMessage
	if err := c.submit(ctx, "/v1/rooms/"+roomID, env, &raw); err != nil {
		return nil, err
	}
	rec, _, err := record.Parse(raw)
	return rec, err
}

// Decide builds the payload of the next write from the room as it is now
// and the records since the caller's previous attempt. Returning an error
// abandons the write.
type Decide func(room *Room, since []*record.Record) (typ string, payload any, err error)

// Post writes to a room with the §6.1 retry loop: read the head, let
// decide build the payload, sign on that head with a fresh nonce, submit;
// on room_head_mismatch re-read the records since the old base, let decide
// choose again, and retry (at most attempts times). Nonce rejections resync
// from Max-Seen-Nonce and retry as well.
func (c *Client) Post(ctx context.Context, roomID string, attempts int, decide Decide) (*record.Record, error) {
	return c.PostMentions(ctx, roomID, attempts, nil, decide)
}

// PostMentions is Post with event.mentions.
func (c *Client) PostMentions(ctx context.Context, roomID string, attempts int, mentions []identity.AgentID, decide Decide) (*record.Record, error) {
	var since []*record.Record
	var lastErr error
	for i := 0; i < attempts; i++ {
		room, err := c.Room(ctx, roomID)
		if err != nil {
			return nil, err
		}
		typ, payload, err := decide(room, since)
		if err != nil {
			return nil, err
		}
		ev, err := c.Event(typ, roomID, room.Head, payload, mentions...)
		if err != nil {
			return nil, err
		}
		env, err := c.Sign(ev)
		if err != nil {
			return nil, err
		}
		rec, err := c.SubmitEnvelope(ctx, roomID, env)
		switch CodeOf(err) {
		case "":
			return rec, err
		case adp.CodeRoomHeadMismatch:
			lastErr = err
			recs, _, rerr := c.Events(ctx, roomID, room.Head.Seq, 1000)
			if rerr == nil {
				since = recs
			}
		case adp.CodeNonceNotGreater:
			lastErr = err
		default:
			return nil, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(time.Duration(i*i) * 5 * time.Millisecond):
		}
	}
	return nil, fmt.Errorf("gave up after %d attempts: %w", attempts, lastErr)
}

// Events reads verified records with seq > after (at most limit) and
// reports whether more follow.
func (c *Client) Events(ctx context.Context, roomID string, after int64, limit int) ([]*record.Record, bool, error) {
	return c.events(ctx, "/v1/rooms/"+roomID+"/events?", after, limit, true)
}

// MirrorEvents reads, as Events does, the records of a public room this
// node mirrors (GET /v1/mirrors/rooms/{room_id}/events): each record is
// verified (its envelope's signature and its hash), so a mirror can serve
// what the room's host said but cannot forge it.
func (c *Client) MirrorEvents(ctx context.Context, roomID string, after int64, limit int) ([]*record.Record, bool, error) {
	return c.events(ctx, "/v1/mirrors/rooms/"+roomID+"/events?", after, limit, false)
}

func (c *Client) events(ctx context.Context, path string, after int64, limit int, auth bool) ([]*record.Record, bool, error) {
	var page struct {
		Result     []json.RawMessage `json:"result"`
		NextCursor string            `json:"next_cursor"`
	}
	q := url.Values{"after_seq": {strconv.FormatInt(after, 10)}, "limit": {strconv.Itoa(limit)}}
	if _, err := c.do(ctx, http.MethodGet, path+q.Encode(), nil, auth, &page); err != nil {
		return nil, false, err
	}
	out := make([]*record.Record, 0, len(page.Result))
	for _, raw := range page.Result {
		rec, _, err := record.Parse(raw)
		if err != nil {
			return nil, false, fmt.Errorf("record from host does not verify: %w", err)
		}
		if c.Log != nil {
			if _, err := c.VerifyInclusion(ctx, c.Log, rec); err != nil {
				return nil, false, err
			}
		}
		out = append(out, rec)
	}
	return out, page.NextCursor != "", nil
}

// History reads every record with seq > after, page by page.
func (c *Client) History(ctx context.Context, roomID string, after int64) ([]*record.Record, error) {
	var all []*record.Record
	for {
		recs, more, err := c.Events(ctx, roomID, after, 1000)
		if err != nil {
			return nil, err
		}
		all = append(all, recs...)
		if len(recs) > 0 {
			after = recs[len(recs)-1].Seq
		}
		if !more || len(recs) == 0 {
			return all, nil
		}
	}
}
