package attention

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/adpnode/adpnode/adp"
	"github.com/adpnode/adpnode/adp/identity"
	"github.com/adpnode/adpnode/adp/room"
	"github.com/adpnode/adpnode/directory"
)

// CreateRequest is the body of POST /v1/me/subscriptions.
type CreateRequest struct {
	Filter     Filter `json:"filter"`
	TTLSeconds int64  `json:"ttl_seconds,omitempty"` // default DefaultTTL, at most MaxTTL
}

// MaxCreateBytes bounds a create request body.
const MaxCreateBytes = 4 << 10

// Page is one answer of a feed or inbox read.
type Page struct {
	StreamID        string `json:"stream_id"`
	VisibilityEpoch string `json:"visibility_epoch"`
	Items           any    `json:"items"`
	NextAfter       int64  `json:"next_after"`
	HasMore         bool   `json:"has_more"`
	ResetRequired   bool   `json:"reset_required,omitempty"`
	Watermark       int64  `json:"watermark"` // items at or below are no longer retained
}

// Cursor is what a reader sends back: after, and optionally the stream and
// epoch it last saw (a mismatch answers reset_required).
type Cursor struct {
	After    int64
	StreamID string
	Epoch    string
}

// MaxLimit bounds one page.
const MaxLimit = 500

func notFound() error {
	return adp.Errorf(adp.CodeNotFound, "no such subscription")
}

// MaxTTLSeconds is the longest a subscription may live (30 days); a
// host's Config.MaxTTL may set it lower.
const MaxTTLSeconds = 30 * 24 * 3600

// ParseCreate decodes and checks a create request strictly: a JSON object
// with a filter object (null, {} or a body without filter is refused),
// ttl_seconds, when present, 1 … MaxTTLSeconds, no control character (NUL
// included) in any filter string.
func ParseCreate(body []byte) (*CreateRequest, error) {
	if len(body) > MaxCreateBytes {
		return nil, adp.Reason(adp.CodePayloadTooLarge, "oversize", fmt.Sprintf("a subscription request has at most %d bytes", MaxCreateBytes))
	}
	if err := identity.CheckJSON(body); err != nil {
		return nil, adp.Reason(adp.CodeInvalidRequest, "json", "body is not valid JSON")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	var raw struct {
		Filter     *Filter `json:"filter"`
		TTLSeconds *int64  `json:"ttl_seconds"`
	}
	if t := bytes.TrimSpace(body); len(t) == 0 || t[0] != '{' {
		return nil, adp.Reason(adp.CodeInvalidRequest, "body", "a subscription request is a JSON object")
	}
	if err := dec.Decode(&raw); err != nil {
		return nil, adp.Reason(adp.CodeInvalidRequest, "body", "subscription request: "+err.Error())
	}
	if raw.Filter == nil {
		return nil, adp.Reason(adp.CodeInvalidRequest, "body", "a subscription request needs a filter object").WithData("field", "filter")
	}
	r := CreateRequest{Filter: *raw.Filter}
	if err := normalizeFilter(&r.Filter); err != nil {
		return nil, err
	}
	if raw.TTLSeconds != nil {
		if v := *raw.TTLSeconds; v < 1 || v > MaxTTLSeconds {
			return nil, badTTL(MaxTTLSeconds)
		}
		r.TTLSeconds = *raw.TTLSeconds
	}
	return &r, nil
}

func badTTL(max int64) error {
	return adp.Reason(adp.CodeInvalidRequest, "ttl", fmt.Sprintf("ttl_seconds must be 1 … %d", max)).
		WithData("max_ttl_seconds", max)
}

func newID() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Create stores a subscription for agent. The rooms that match now appear
// in its feed as its first items.
func (a *Attention) Create(agent identity.AgentID, r *CreateRequest) (*Subscription, error) {
	ttl := a.cfg.DefaultTTL
	if r.TTLSeconds != 0 {
		// Compared in seconds: a huge value must not overflow a Duration.
		maxS := int64(a.cfg.MaxTTL / time.Second)
		if r.TTLSeconds < 1 || r.TTLSeconds > maxS {
			return nil, badTTL(maxS)
		}
		ttl = time.Duration(r.TTLSeconds) * time.Second
	}
	dir := a.cfg.Directory()
	a.mu.Lock()
	now := a.cfg.Now()
	var w writes
	live := 0
	for _, s := range a.byAgent[agent] {
		if s.ExpiresAt <= now {
			a.dropSubLocked(s, &w)
		} else {
			live++
		}
	}
	if live >= a.cfg.MaxSubscriptions {
		// Retry-After: until the first live subscription expires.
		retry := int64(0)
		for _, s := range a.byAgent[agent] {
			if s.ExpiresAt > now && (retry == 0 || s.ExpiresAt-now < retry) {
				retry = s.ExpiresAt - now
			}
		}
		a.mu.Unlock()
		if err := a.write(&w); err != nil {
			return nil, err
		}
		return nil, adp.Reason(adp.CodeRateLimited, "subscription_cap",
			fmt.Sprintf("an agent may hold at most %d subscriptions", a.cfg.MaxSubscriptions)).WithData("limit", a.cfg.MaxSubscriptions).
			WithData("retry_after_ms", max(retry, 1000))
	}
	s := &sub{subMeta: subMeta{Subscription: Subscription{ID: newID(), Agent: agent, Filter: r.Filter, CreatedAt: now,
		ExpiresAt: now + ttl.Milliseconds()}}, matched: map[string]matchState{}}
	a.addSub(s)
	SortRooms(dir)
	for i := range dir {
		rs := &dir[i]
		if rs.Visibility == room.Private || len(s.matched) >= a.cfg.MaxMatches || !s.Filter.MatchText(rs, directory.Haystack(rs)) {
			continue
		}
		ms := matchState{V: a.appendFeed(s, FeedItem{RoomID: rs.ID, Kind: KindAppeared, Room: rs, At: now}, &w), F: fingerprint(rs)}
		a.setMatched(s, rs.ID, ms)
		w.set([]byte(pfxMatch+s.ID+"/"+rs.ID), mustJSON(ms))
	}
	w.set([]byte(pfxSub+s.ID), mustJSON(s.subMeta))
	out := s.Subscription
	a.mu.Unlock()
	w.live = nil // the creator reads its feed; nothing to push yet
	if err := a.write(&w); err != nil {
		return nil, err
	}
	return &out, nil
}

// SortRooms orders rooms by ID (the order of a snapshot).
func SortRooms(list []directory.Entry) {
	sort.Slice(list, func(i, j int) bool { return list[i].ID < list[j].ID })
}

// List returns the agent's unexpired subscriptions, oldest first.
func (a *Attention) List(agent identity.AgentID) []Subscription {
	a.mu.RLock()
	defer a.mu.RUnlock()
	now := a.cfg.Now()
	out := []Subscription{}
	for _, s := range a.byAgent[agent] {
		if s.ExpiresAt > now {
			out = append(out, s.Subscription)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].CreatedAt != out[j].CreatedAt {
			return out[i].CreatedAt < out[j].CreatedAt
		}
		return out[i].ID < out[j].ID
	})
	return out
}

// Delete removes one of the agent's subscriptions.
func (a *Attention) Delete(agent identity.AgentID, id string) error {
	a.mu.Lock()
	s := a.subs[id]
	if s == nil || s.Agent != agent || s.ExpiresAt <= a.cfg.Now() {
		a.mu.Unlock()
		return notFound()
	}
	var w writes
	a.dropSubLocked(s, &w)
	a.mu.Unlock()
	return a.write(&w)
}

func (a *Attention) streamID(owner string) string { return a.instance + "." + owner }

// Feed reads a subscription's change feed after c.After. After 0 answers
// the current result set as appeared items (next_after = the feed's head);
// after below the retention watermark, or a stream ID that is not this
// feed's, answers reset_required.
func (a *Attention) Feed(agent identity.AgentID, id string, c Cursor, limit int) (*Page, error) {
	limit = clampLimit(limit)
	a.mu.RLock()
	s := a.subs[id]
	now := a.cfg.Now()
	if s == nil || s.Agent != agent || s.ExpiresAt <= now {
		a.mu.RUnlock()
		return nil, notFound()
	}
	head, floor := s.Head, s.Floor
	page := &Page{StreamID: a.streamID(s.ID), VisibilityEpoch: "1", Items: []FeedItem{}}
	if c.After > head {
		a.mu.RUnlock()
		return nil, cursorAhead(c.After, head)
	}
	if c.After == 0 || (c.StreamID != "" && c.StreamID != page.StreamID) {
		reset := c.After != 0
		// The snapshot: every room the subscription holds now.
		items := make([]FeedItem, 0, len(s.matched))
		ids := make([]string, 0, len(s.matched))
		for rid := range s.matched {
			ids = append(ids, rid)
		}
		sort.Strings(ids)
		versions := make([]int64, len(ids))
		for i, rid := range ids {
			versions[i] = s.matched[rid].V
		}
		a.mu.RUnlock()
		if reset {
			page.ResetRequired = true
			page.Watermark = floor
			return page, nil
		}
		sums := a.summaries(ids)
		for i, rid := range ids {
			rs, ok := sums[rid]
			if !ok {
				continue // gone since: its unavailable item follows after head
			}
			items = append(items, FeedItem{Seq: head, RoomID: rid, Version: versions[i], Kind: KindAppeared, Room: &rs, At: now})
		}
		page.Items, page.NextAfter, page.Watermark = items, head, floor
		return page, nil
	}
	a.mu.RUnlock()
	cutoff := now - a.cfg.RetentionAge.Milliseconds()
	var items []FeedItem
	var more bool
	wm, err := a.scan(pfxFeed, s.ID, floor, c.After, limit, func(v []byte) (int64, int64, error) {
		var it FeedItem
		err := json.Unmarshal(v, &it)
		return it.Seq, it.At, err
	}, cutoff, func(v []byte) error {
		var it FeedItem
		if err := json.Unmarshal(v, &it); err != nil {
			return err
		}
		items = append(items, it)
		return nil
	}, &more)
	if err != nil {
		return nil, err
	}
	page.Watermark = wm
	if c.After < wm {
		page.ResetRequired = true
		return page, nil
	}
	if items == nil {
		items = []FeedItem{}
	}
	page.Items = items
	page.NextAfter = c.After
	if len(items) > 0 {
		page.NextAfter = items[len(items)-1].Seq
	}
	page.HasMore = more
	return page, nil
}

// summaries returns the current summaries of the given rooms.
func (a *Attention) summaries(ids []string) map[string]directory.Entry {
	want := make(map[string]bool, len(ids))
	for _, id := range ids {
		want[id] = true
	}
	out := make(map[string]directory.Entry, len(ids))
	for _, s := range a.cfg.Directory() {
		if want[s.ID] && s.Visibility != room.Private {
			out[s.ID] = s
		}
	}
	return out
}

func clampLimit(l int) int {
	if l <= 0 || l > MaxLimit {
		return min(max(l, 100), MaxLimit)
	}
	return l
}

func cursorAhead(after, head int64) error {
	return adp.Reason(adp.CodeInvalidRequest, "cursor", fmt.Sprintf("after=%d is beyond this feed's head %d: not a cursor this host issued", after, head)).
		WithData("head", head)
}

// scan walks owner's items above floor (at most Retention of them): items
// older than cutoff count as gone and raise the watermark it returns;
// items above after are passed to take until limit (more reports whether
// others follow).
func (a *Attention) scan(pfx, owner string, floor, after int64, limit int, meta func([]byte) (int64, int64, error),
	cutoff int64, take func([]byte) error, more *bool) (int64, error) {
	wm := floor
	n := 0
	err := a.cfg.DB.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{PrefetchValues: true, PrefetchSize: 64, Prefix: []byte(pfx + owner + "/")})
		defer it.Close()
		for it.Seek(seqKey(pfx, owner, floor+1)); it.Valid(); it.Next() {
			v, err := it.Item().ValueCopy(nil)
			if err != nil {
				return err
			}
			seq, at, err := meta(v)
			if err != nil {
				return err
			}
			switch {
			case at < cutoff:
				wm = seq
			case seq <= after:
			case n == limit:
				*more = true
				return nil
			default:
				if err := take(v); err != nil {
					return err
				}
				n++
			}
		}
		return nil
	})
	return wm, err
}

// Mentions reads the agent's inbox after c.After. Items of rooms the agent
// may not read now are left out; visibility_epoch names the set of rooms
// whose readability changed since their items were stored, and an epoch
// other than the reader's (or after below the watermark) answers
// reset_required.
func (a *Attention) Mentions(agent identity.AgentID, c Cursor, limit int) (*Page, error) {
	limit = clampLimit(limit)
	a.mu.RLock()
	var head, floor int64
	if ib := a.inboxes[agent]; ib != nil {
		head, floor = ib.head, ib.floor
	}
	a.mu.RUnlock()
	now := a.cfg.Now()
	page := &Page{StreamID: a.streamID("m"), Items: []MentionItem{}}
	if c.After > head {
		return nil, cursorAhead(c.After, head)
	}
	cutoff := now - a.cfg.RetentionAge.Milliseconds()
	// Every retained item is read (at most Retention): the epoch covers all.
	var all []storedMention
	var more bool
	wm, err := a.scan(pfxMention, string(agent), floor, 0, a.cfg.Retention+1, func(v []byte) (int64, int64, error) {
		var it storedMention
		err := json.Unmarshal(v, &it)
		return it.Seq, it.At, err
	}, cutoff, func(v []byte) error {
		var it storedMention
		if err := json.Unmarshal(v, &it); err != nil {
			return err
		}
		all = append(all, it)
		return nil
	}, &more)
	if err != nil {
		return nil, err
	}
	readable := map[string]bool{}
	var flipped []string
	for _, it := range all {
		if it.Public {
			continue
		}
		r, ok := readable[it.RoomID]
		if !ok {
			r = a.cfg.CanRead(it.RoomID, agent)
			readable[it.RoomID] = r
			if r != it.Readable {
				flipped = append(flipped, it.RoomID)
			}
		}
	}
	page.VisibilityEpoch = epoch(flipped)
	page.Watermark = wm
	if (c.After > 0 && c.After < wm) || (c.StreamID != "" && c.StreamID != page.StreamID) ||
		(c.Epoch != "" && c.Epoch != page.VisibilityEpoch) {
		page.ResetRequired = true
		return page, nil
	}
	items := []MentionItem{}
	next := max(c.After, wm)
	for _, it := range all {
		if it.Seq <= next {
			continue
		}
		if len(items) == limit {
			page.HasMore = true
			break
		}
		next = it.Seq
		if it.Public || readable[it.RoomID] {
			items = append(items, it.MentionItem)
		}
	}
	page.Items, page.NextAfter = items, next
	return page, nil
}

func epoch(rooms []string) string {
	if len(rooms) == 0 {
		return "0"
	}
	sort.Strings(rooms)
	d := sha256.Sum256([]byte(strings.Join(rooms, ",")))
	return hex.EncodeToString(d[:8])
}

// Discovery describes the extension for the discovery document.
func (a *Attention) Discovery() map[string]any {
	return map[string]any{
		"extension":               "host-local",
		"subscriptions_per_agent": a.cfg.MaxSubscriptions,
		"max_ttl_seconds":         int64(a.cfg.MaxTTL / time.Second),
		"retention_items":         a.cfg.Retention,
		"retention_seconds":       int64(a.cfg.RetentionAge / time.Second),
		"rooms_per_subscription":  a.cfg.MaxMatches,
		"live_streams_per_agent":  a.cfg.MaxWatchers,
		"page":                    map[string]int{"default": 100, "max": MaxLimit},
	}
}
