package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/adpnode/adpnode/adp/identity"
)

// The attention extension (host-local, not ADP 1.0; docs/attention.md):
// directory subscriptions, the mentions inbox, and durable cursors.

// Filter selects directory rooms for a subscription.
type Filter struct {
	Keyword  string   `json:"keyword,omitempty"`
	Tags     []string `json:"tags,omitempty"`
	Status   []string `json:"status,omitempty"`
	Host     string   `json:"host,omitempty"`
	Language string   `json:"language,omitempty"`
	Creator  string   `json:"creator,omitempty"`
}

// Subscription is a durable directory subscription.
type Subscription struct {
	ID        string           `json:"id"`
	Agent     identity.AgentID `json:"agent"`
	Filter    Filter           `json:"filter"`
	CreatedAt int64            `json:"created_at"`
	ExpiresAt int64            `json:"expires_at"`
}

// FeedPage is one page of a subscription feed or of the mentions inbox.
// Items are FeedItem or MentionItem objects (decode with Feed.Decode or
// json.Unmarshal).
type FeedPage struct {
	StreamID        string            `json:"stream_id"`
	VisibilityEpoch string            `json:"visibility_epoch"`
	Items           []json.RawMessage `json:"items"`
	NextAfter       int64             `json:"next_after"`
	HasMore         bool              `json:"has_more"`
	ResetRequired   bool              `json:"reset_required"`
	Watermark       int64             `json:"watermark"`
	// NextRoomAfter: a feed's snapshot (after 0) has more rooms; the next
	// page continues it (Cursor.RoomAfter).
	NextRoomAfter string `json:"next_room_after,omitempty"`
}

// FeedItem is one change of a subscription's result set.
type FeedItem struct {
	Seq         int64           `json:"seq"`
	RoomID      string          `json:"room_id"`
	Version     int64           `json:"version"`
	Kind        string          `json:"kind"` // appeared, changed, unavailable
	Unavailable bool            `json:"unavailable"`
	Reason      string          `json:"reason"`
	Room        json.RawMessage `json:"room"`
	At          int64           `json:"at"`
}

// MentionItem is one record that mentions the agent.
type MentionItem struct {
	Seq        int64            `json:"seq"`
	RoomID     string           `json:"room_id"`
	RoomSeq    int64            `json:"room_seq"`
	RecordHash string           `json:"record_hash"`
	RoomURL    string           `json:"room_url"`
	Host       string           `json:"host"`
	Actor      identity.AgentID `json:"actor"`
	Type       string           `json:"type"`
	CreatedAt  int64            `json:"created_at"`
	At         int64            `json:"at"`
	Source     string           `json:"source"`
}

// Cursor is a reader's durable position in one feed.
type Cursor struct {
	After           int64  `json:"after"`
	StreamID        string `json:"stream_id,omitempty"`
	VisibilityEpoch string `json:"visibility_epoch,omitempty"`
	// RoomAfter continues a feed's snapshot after this room (the page's
	// NextRoomAfter); empty once the snapshot is read.
	RoomAfter string `json:"room_after,omitempty"`
}

func (cur Cursor) query(limit int) string {
	q := url.Values{}
	q.Set("after", strconv.FormatInt(cur.After, 10))
	if cur.StreamID != "" {
		q.Set("stream_id", cur.StreamID)
	}
	if cur.VisibilityEpoch != "" {
		q.Set("visibility_epoch", cur.VisibilityEpoch)
	}
	if cur.RoomAfter != "" {
		q.Set("room_after", cur.RoomAfter)
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	return "?" + q.Encode()
}

// Subscribe creates a subscription (ttl 0: the host's default).
func (c *Client) Subscribe(ctx context.Context, f Filter, ttl time.Duration) (*Subscription, error) {
	body, _ := json.Marshal(map[string]any{"filter": f, "ttl_seconds": int64(ttl / time.Second)})
	if ttl == 0 {
		body, _ = json.Marshal(map[string]any{"filter": f})
	}
	var out Subscription
	_, err := c.do(ctx, http.MethodPost, "/v1/me/subscriptions", body, true, &out)
	return &out, err
}

// Subscriptions lists the agent's unexpired subscriptions.
func (c *Client) Subscriptions(ctx context.Context) ([]Subscription, error) {
	var out struct {
		Subscriptions []Subscription `json:"subscriptions"`
	}
	_, err := c.do(ctx, http.MethodGet, "/v1/me/subscriptions", nil, true, &out)
	return out.Subscriptions, err
}

// Unsubscribe deletes a subscription.
func (c *Client) Unsubscribe(ctx context.Context, id string) error {
	_, err := c.do(ctx, http.MethodDelete, "/v1/me/subscriptions/"+url.PathEscape(id), nil, true, nil)
	return err
}

// SubscriptionFeed reads one page of a subscription's feed after cur.
func (c *Client) SubscriptionFeed(ctx context.Context, id string, cur Cursor, limit int) (*FeedPage, error) {
	var out FeedPage
	_, err := c.do(ctx, http.MethodGet, "/v1/me/subscriptions/"+url.PathEscape(id)+"/feed"+cur.query(limit), nil, true, &out)
	return &out, err
}

// Mentions reads one page of the mentions inbox after cur.
func (c *Client) Mentions(ctx context.Context, cur Cursor, limit int) (*FeedPage, error) {
	var out FeedPage
	_, err := c.do(ctx, http.MethodGet, "/v1/me/mentions"+cur.query(limit), nil, true, &out)
	return &out, err
}

// Feed names what Watch reads: MentionsFeed or SubscriptionFeedOf(id).
type Feed func(ctx context.Context, c *Client, cur Cursor, limit int) (*FeedPage, error)

// MentionsFeed is the mentions inbox.
func MentionsFeed(ctx context.Context, c *Client, cur Cursor, limit int) (*FeedPage, error) {
	return c.Mentions(ctx, cur, limit)
}

// SubscriptionFeedOf is the feed of subscription id.
func SubscriptionFeedOf(id string) Feed {
	return func(ctx context.Context, c *Client, cur Cursor, limit int) (*FeedPage, error) {
		return c.SubscriptionFeed(ctx, id, cur, limit)
	}
}

// WatchOptions tune Watch.
type WatchOptions struct {
	Poll  time.Duration // between polls once caught up (default 5 s)
	Limit int           // page size (0: the host's default)
	Once  bool          // return once caught up instead of polling
}

// Watch reads feed from cur page by page. For each page it calls handle
// with the page's items (reset is true, with no items, when the host
// answered reset_required: drop what you cached from this feed), then
// save with the cursor after the page; only when save returns nil does
// Watch advance. A crash between handle and save replays the page: handle
// must de-duplicate (by stream_id and seq, or room_id and version). Watch
// returns ctx's error, the first error of handle or save, or nil with
// Once when caught up.
func (c *Client) Watch(ctx context.Context, feed Feed, cur Cursor, opt WatchOptions,
	handle func(items []json.RawMessage, reset bool) error, save func(Cursor) error) error {
	if opt.Poll <= 0 {
		opt.Poll = 5 * time.Second
	}
	resets := 0
	for {
		p, err := feed(ctx, c, cur, opt.Limit)
		if err != nil {
			return err
		}
		if p.ResetRequired {
			if resets++; resets > 3 {
				return errors.New("watch: the host keeps answering reset_required")
			}
			if err := handle(nil, true); err != nil {
				return err
			}
			cur = Cursor{}
			if err := save(cur); err != nil {
				return err
			}
			continue
		}
		resets = 0
		if len(p.Items) > 0 {
			if err := handle(p.Items, false); err != nil {
				return err
			}
		}
		next := Cursor{After: p.NextAfter, StreamID: p.StreamID, VisibilityEpoch: p.VisibilityEpoch, RoomAfter: p.NextRoomAfter}
		if next != cur {
			if err := save(next); err != nil {
				return err
			}
			cur = next
		}
		if p.HasMore {
			continue
		}
		if opt.Once {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(opt.Poll):
		}
	}
}

// LoadCursor reads a cursor file (a missing file is the zero cursor).
func LoadCursor(path string) (Cursor, error) {
	var cur Cursor
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return cur, nil
	}
	if err != nil {
		return cur, err
	}
	if err := json.Unmarshal(b, &cur); err != nil {
		return cur, fmt.Errorf("cursor file %s: %w", path, err)
	}
	return cur, nil
}

// SaveCursor writes a cursor file atomically (temporary file, fsync,
// rename): a crash leaves the old cursor or the new one.
func SaveCursor(path string, cur Cursor) error {
	return writeFileAtomic(path, mustMarshal(cur))
}

func mustMarshal(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// writeFileAtomic replaces path with b through a synced temporary file.
func writeFileAtomic(path string, b []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
	}
	return err
}

// SaveCursorBytes writes a caller's own cursor state atomically.
func SaveCursorBytes(path string, b []byte) error { return writeFileAtomic(path, b) }
