package attention

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
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
	// NextRoomAfter: a feed's snapshot (after=0) has more rooms; read on
	// with after=next_after and room_after=next_room_after.
	NextRoomAfter string `json:"next_room_after,omitempty"`
}

// Cursor is what a reader sends back: after, and optionally the stream and
// epoch it last saw (a mismatch answers reset_required); RoomAfter
// continues a feed's snapshot (next_room_after).
type Cursor struct {
	After     int64
	StreamID  string
	Epoch     string
	RoomAfter string
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
	a.wmu.Lock() // writes in the order their seqs were taken
	defer a.wmu.Unlock()
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
	a.wmu.Lock()
	defer a.wmu.Unlock()
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

// snapshotWait bounds how long a snapshot waits for the feed's pending
// items to be stored (a pass's write takes milliseconds).
const snapshotWait = 10 * time.Second

// resetPage is the answer to a cursor that is not this stream's, or that
// fell below the watermark: drop what you cached and read from after=0.
func resetPage(p *Page, wm int64) (*Page, error) {
	p.ResetRequired, p.Watermark, p.NextAfter = true, wm, 0
	return p, nil
}

// checkCursor applies the rules every read shares, in this order: a
// stream ID that is not this feed's answers reset_required (a restored or
// wiped data dir is a new stream), whatever the cursor's after; then an
// after beyond the head is a cursor this stream never issued (heads never
// go back within a stream), 400 when the reader named this stream and
// reset_required when it named none (it may be a saved cursor of an
// earlier stream). done reports that the answer is final.
func checkCursor(p *Page, c Cursor, head, floor int64) (page *Page, done bool, err error) {
	if c.StreamID != "" && c.StreamID != p.StreamID {
		page, err = resetPage(p, floor)
		return page, true, err
	}
	if c.After > head {
		if c.StreamID == "" {
			page, err = resetPage(p, floor)
			return page, true, err
		}
		return nil, true, cursorAhead(c.After, head)
	}
	return nil, false, nil
}

// Feed reads a subscription's change feed after c.After. After 0 answers
// the current result set as appeared items, by room ID, at most limit of
// them: with has_more, the next page continues it with after = next_after
// and room_after = next_room_after; next_after is the feed's head when the
// snapshot was taken, and the reader reads the log after it once the
// snapshot is complete. After below the retention watermark, or a stream
// ID that is not this feed's, answers reset_required.
func (a *Attention) Feed(agent identity.AgentID, id string, c Cursor, limit int) (*Page, error) {
	limit = clampLimit(limit)
	deadline := time.Now().Add(snapshotWait)
	for {
		a.mu.RLock()
		s := a.subs[id]
		now := a.cfg.Now()
		if s == nil || s.Agent != agent || s.ExpiresAt <= now {
			a.mu.RUnlock()
			return nil, notFound()
		}
		head, floor := s.Head, s.Floor
		page := &Page{StreamID: a.streamID(s.ID), VisibilityEpoch: "1", Items: []FeedItem{}}
		if p, done, err := checkCursor(page, c, head, floor); done {
			a.mu.RUnlock()
			return p, err
		}
		if c.After != 0 && c.RoomAfter == "" {
			a.mu.RUnlock()
			return a.feedLog(s.ID, page, c, head, floor, now, limit)
		}
		if s.durable < head {
			// Items of this feed are being stored: a snapshot now could
			// hand out state a crash would take back.
			ch := a.flushed
			a.mu.RUnlock()
			select {
			case <-ch:
				continue
			case <-time.After(time.Until(deadline)):
				return nil, adp.Errorf(adp.CodeUnavailable, "the feed's latest items are not stored yet")
			}
		}
		// The snapshot: the rooms the subscription holds now, by ID.
		ids := make([]string, 0, len(s.matched))
		for rid := range s.matched {
			if rid > c.RoomAfter {
				ids = append(ids, rid)
			}
		}
		sort.Strings(ids)
		more := len(ids) > limit
		ids = ids[:min(len(ids), limit)]
		versions := make([]int64, len(ids))
		for i, rid := range ids {
			versions[i] = s.matched[rid].V
		}
		a.mu.RUnlock()
		at := head
		if c.RoomAfter != "" {
			// A continuation: the snapshot was taken at c.After, and the
			// log after it must still be there when the snapshot ends.
			at = c.After
			wm, err := a.ageWatermark(pfxFeed, s.ID, floor, head, now-a.cfg.RetentionAge.Milliseconds())
			if err != nil {
				return nil, err
			}
			if at < wm || at == 0 {
				return resetPage(page, wm)
			}
			page.Watermark = wm
		} else {
			page.Watermark = floor
		}
		sums := a.summaries(ids)
		items := make([]FeedItem, 0, len(ids))
		for i, rid := range ids {
			rs, ok := sums[rid]
			if !ok {
				continue // gone since: its unavailable item follows after head
			}
			items = append(items, FeedItem{Seq: at, RoomID: rid, Version: versions[i], Kind: KindAppeared, Room: &rs, At: now})
		}
		page.Items, page.NextAfter, page.HasMore = items, at, more
		if more && len(ids) > 0 {
			page.NextRoomAfter = ids[len(ids)-1]
		}
		return page, nil
	}
}

// feedLog reads a feed's log after c.After: O(limit) item reads, plus a
// few to find the age watermark.
func (a *Attention) feedLog(owner string, page *Page, c Cursor, head, floor, now int64, limit int) (*Page, error) {
	wm, err := a.ageWatermark(pfxFeed, owner, floor, head, now-a.cfg.RetentionAge.Milliseconds())
	if err != nil {
		return nil, err
	}
	if c.After < wm {
		return resetPage(page, wm)
	}
	page.Watermark = wm
	items := []FeedItem{}
	var more bool
	next := c.After
	err = a.scan(pfxFeed, owner, c.After, limit, func(seq int64, v []byte) (bool, error) {
		var it FeedItem
		if err := json.Unmarshal(v, &it); err != nil {
			return false, err
		}
		items = append(items, it)
		next = seq
		return true, nil
	}, limit, &more)
	if err != nil {
		return nil, err
	}
	page.Items, page.NextAfter, page.HasMore = items, next, more
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
	return adp.Reason(adp.CodeInvalidRequest, "cursor", fmt.Sprintf("after=%d is beyond this feed's head %d: not a cursor this stream issued", after, head)).
		WithData("head", head)
}

// itemAt reads the time an item was stored (both item kinds carry "at").
func itemAt(v []byte) (int64, error) {
	var it struct {
		At int64 `json:"at"`
	}
	err := json.Unmarshal(v, &it)
	return it.At, err
}

// ageWatermark returns the highest seq in (floor, head] whose item was
// stored before cutoff (floor when none was): items are stamped with the
// time this node stored them, so their times grow with their seqs, and a
// binary search finds the boundary in O(log retained) reads.
func (a *Attention) ageWatermark(pfx, owner string, floor, head, cutoff int64) (int64, error) {
	if head <= floor {
		return floor, nil
	}
	wm := floor
	err := a.cfg.DB.View(func(txn *badger.Txn) error {
		expired := func(seq int64) (bool, error) {
			item, err := txn.Get(seqKey(pfx, owner, seq))
			if errors.Is(err, badger.ErrKeyNotFound) {
				return false, nil
			}
			if err != nil {
				return false, err
			}
			var at int64
			if err := item.Value(func(v []byte) error {
				var err error
				at, err = itemAt(v)
				return err
			}); err != nil {
				return false, err
			}
			return at < cutoff, nil
		}
		hi := head + 1 // hi: kept (or past the head)
		if ok, err := expired(floor + 1); err != nil || !ok {
			return err
		}
		lo := floor + 1 // lo: gone
		for hi-lo > 1 {
			mid := lo + (hi-lo)/2
			ok, err := expired(mid)
			if err != nil {
				return err
			}
			if ok {
				lo = mid
			} else {
				hi = mid
			}
		}
		wm = lo
		return nil
	})
	return wm, err
}

// scan walks owner's items after seq after, in order, passing each to
// take (which says whether it counted) until limit counted or budget
// were read; more reports whether items remain.
func (a *Attention) scan(pfx, owner string, after int64, limit int, take func(int64, []byte) (bool, error),
	budget int, more *bool) error {
	return a.cfg.DB.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{PrefetchValues: true, PrefetchSize: min(limit+1, 100), Prefix: []byte(pfx + owner + "/")})
		defer it.Close()
		n, read := 0, 0
		for it.Seek(seqKey(pfx, owner, after+1)); it.Valid(); it.Next() {
			if n == limit || read == budget {
				*more = true
				return nil
			}
			k := it.Item().Key()
			seq := int64(binary.BigEndian.Uint64(k[len(k)-8:]))
			v, err := it.Item().ValueCopy(nil)
			if err != nil {
				return err
			}
			read++
			ok, err := take(seq, v)
			if err != nil {
				return err
			}
			if ok {
				n++
			}
		}
		return nil
	})
}

// Mentions reads the agent's inbox after c.After, in O(limit) item reads.
// Items of rooms the agent may not read now are left out;
// visibility_epoch names the non-public rooms the inbox holds items of
// that the agent may no longer read, and an epoch other than the reader's
// (or after below the watermark) answers reset_required.
func (a *Attention) Mentions(agent identity.AgentID, c Cursor, limit int) (*Page, error) {
	limit = clampLimit(limit)
	a.mu.RLock()
	var head, floor int64
	var private map[string]int64
	if ib := a.inboxes[agent]; ib != nil {
		head, floor = ib.head, ib.floor
		private = make(map[string]int64, len(ib.private))
		for id, seq := range ib.private {
			private[id] = seq
		}
	}
	a.mu.RUnlock()
	now := a.cfg.Now()
	page := &Page{StreamID: a.streamID("m"), Items: []MentionItem{}}
	if p, done, err := checkCursor(page, c, head, floor); done {
		page.VisibilityEpoch = "0"
		return p, err
	}
	wm, err := a.ageWatermark(pfxMention, string(agent), floor, head, now-a.cfg.RetentionAge.Milliseconds())
	if err != nil {
		return nil, err
	}
	readable := map[string]bool{}
	var lost []string
	for id, seq := range private {
		if seq <= wm {
			continue // its items are gone
		}
		r := a.cfg.CanRead(id, agent)
		readable[id] = r
		if !r {
			lost = append(lost, id)
		}
	}
	page.VisibilityEpoch = epoch(lost)
	page.Watermark = wm
	if (c.After > 0 && c.After < wm) || (c.Epoch != "" && c.Epoch != page.VisibilityEpoch) {
		return resetPage(page, wm)
	}
	items := []MentionItem{}
	next := max(c.After, wm)
	var more bool
	// Items left out (access lost since) are read but not counted: the
	// budget keeps a page at O(limit) reads, next_after then moves past
	// what was read.
	err = a.scan(pfxMention, string(agent), next, limit, func(seq int64, v []byte) (bool, error) {
		var it storedMention
		if err := json.Unmarshal(v, &it); err != nil {
			return false, err
		}
		next = seq
		if !it.Public {
			r, ok := readable[it.RoomID]
			if !ok {
				r = a.cfg.CanRead(it.RoomID, agent)
				readable[it.RoomID] = r
			}
			if !r || !it.Readable {
				return false, nil
			}
		}
		items = append(items, it.MentionItem)
		return true, nil
	}, 4*limit, &more)
	if err != nil {
		return nil, err
	}
	page.Items, page.NextAfter, page.HasMore = items, next, more
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
