package adpmcp

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/adpnode/adpnode/client"
)

type WaitIn struct {
	Rooms          []string `json:"rooms,omitempty" jsonschema:"room IDs or Room URLs to watch (default: the rooms you created, joined or posted in)"`
	Mentions       *bool    `json:"mentions,omitempty" jsonschema:"also wake on new mentions of you in any room (default true)"`
	TimeoutSeconds *int     `json:"timeout_seconds,omitempty" jsonschema:"how long to wait at most (0-60, default 25)"`
}

// Event is one thing wait returns: a new record of a watched room
// (kind record) or a record that mentions you (kind mention).
type Event struct {
	Kind    string `json:"kind"`
	RoomID  string `json:"room_id"`
	RoomURL string `json:"room_url"`
	Item
}

type WaitOut struct {
	Events   []Event `json:"events"`
	Cursor   string  `json:"cursor"`
	TimedOut bool    `json:"timed_out"`
	// Truncated: more events are ready; call wait again (it returns at
	// once).
	Truncated bool `json:"truncated"`
}

func (s *Server) enterWait(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.waits[id] >= s.cfg.MaxWaitsPerSession {
		return false
	}
	s.waits[id]++
	return true
}

func (s *Server) leaveWait(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.waits[id]--; s.waits[id] <= 0 {
		delete(s.waits, id)
	}
}

type watched struct {
	rr      roomRef
	lr      *liveRoom
	release func()
}

func (s *Server) wait(ctx context.Context, req *mcp.CallToolRequest, in WaitIn) (WaitOut, string, error) {
	sid := ""
	if req != nil && req.Session != nil {
		sid = req.Session.ID()
	}
	if !s.enterWait(sid) {
		return WaitOut{}, "", &toolError{Code: "too_many_waits", Message: fmt.Sprintf("at most %d waits at once per session", s.cfg.MaxWaitsPerSession),
			Hint: "let a running wait return first"}
	}
	defer s.leaveWait(sid)
	timeout := defaultWait
	if in.TimeoutSeconds != nil {
		timeout = min(max(*in.TimeoutSeconds, 0), maxWaitSeconds)
	}
	mentions := in.Mentions == nil || *in.Mentions
	refs := in.Rooms
	if len(refs) == 0 {
		refs = s.store.rooms()
		if len(refs) > s.cfg.MaxFollows {
			refs = refs[len(refs)-s.cfg.MaxFollows:]
		}
	}
	if len(refs) > s.cfg.MaxFollows {
		return WaitOut{}, "", invalid(fmt.Sprintf("at most %d rooms per wait", s.cfg.MaxFollows))
	}
	var rooms []watched
	defer func() {
		for _, w := range rooms {
			w.release()
		}
	}()
	for _, ref := range refs {
		rr, err := s.resolve(ref)
		if err != nil {
			return WaitOut{}, "", err
		}
		r, err := rr.c.Room(ctx, rr.id)
		if err != nil {
			return WaitOut{}, "", err
		}
		if _, ok := s.store.seen(rr.url); !ok {
			s.stateWritten(s.store.advance(rr.url, r.Head.Seq)) // first wait on a room: from now
		}
		lr, release, err := s.live.acquire(rr, r.Head.Seq)
		if err != nil {
			return WaitOut{}, "", err
		}
		// A head the live stream has not delivered yet still changes the
		// room for its resource subscribers: tell them now, since the
		// stream's later delivery of it no longer moves the head.
		if lr.moved(r.Head.Seq) {
			lr.signal(false)
		}
		rooms = append(rooms, watched{rr: rr, lr: lr, release: release})
	}
	deadline := time.NewTimer(time.Duration(timeout) * time.Second)
	defer deadline.Stop()
	var poll <-chan time.Time
	if mentions {
		t := time.NewTicker(mentionPoll)
		defer t.Stop()
		poll = t.C
	}
	var progress <-chan time.Time
	token := req.Params.GetProgressToken()
	if token != nil {
		t := time.NewTicker(s.cfg.ProgressInterval)
		defer t.Stop()
		progress = t.C
	}
	start := time.Now()
	checkMentions := mentions
	for {
		out, err := s.collect(ctx, rooms, checkMentions)
		if err != nil {
			return WaitOut{}, "", err
		}
		if len(out.Events) > 0 {
			return out, waitSummary(out), nil
		}
		checkMentions = false
		wctx, cancel := context.WithCancel(ctx)
		woke := make(chan struct{}, 1)
		for _, w := range rooms {
			ch, head := w.lr.changed()
			if seen, _ := s.store.seen(w.rr.url); head > seen {
				woke <- struct{}{}
				break
			}
			go func() {
				select {
				case <-ch:
					select {
					case woke <- struct{}{}:
					default:
					}
				case <-wctx.Done():
				}
			}()
		}
	inner:
		for {
			select {
			case <-ctx.Done():
				cancel()
				return WaitOut{}, "", ctx.Err()
			case <-deadline.C:
				cancel()
				out.TimedOut = true
				return out, fmt.Sprintf("nothing new in %ds", timeout), nil
			case <-woke:
				break inner
			case <-poll:
				checkMentions = true
				break inner
			case <-progress:
				el := time.Since(start).Seconds()
				_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: token, Progress: el, Total: float64(timeout),
					Message: fmt.Sprintf("waiting (%.0fs of %ds)", el, timeout)})
			}
		}
		cancel()
	}
}

// collect reads what is new in the rooms past their cursors (without the
// agent's own records) and, with mentions, the inbox past its cursor, and
// advances the cursors.
func (s *Server) collect(ctx context.Context, rooms []watched, mentions bool) (WaitOut, error) {
	out := WaitOut{Events: []Event{}}
	delivered := map[string]bool{}
	for _, w := range rooms {
		seen, _ := s.store.seen(w.rr.url)
		_, head := w.lr.changed()
		if head <= seen {
			continue
		}
		room := len(out.Events)
		if room >= maxWaitEvents {
			out.Truncated = true
			break
		}
		items, more, _, err := s.readVerified(ctx, w.rr, seen, maxWaitEvents-room)
		if err != nil {
			return out, err
		}
		for _, it := range items {
			delivered[w.rr.url+"#"+fmt.Sprint(it.Seq)] = true
			if it.Author == string(s.cfg.Key.ID) {
				continue
			}
			kind := "record"
			for _, m := range it.Mentions {
				if m == string(s.cfg.Key.ID) {
					kind = "mention"
				}
			}
			out.Events = append(out.Events, Event{Kind: kind, RoomID: w.rr.id, RoomURL: w.rr.url, Item: it})
		}
		out.Truncated = out.Truncated || more
		if n := len(items); n > 0 {
			if err := s.store.advance(w.rr.url, items[n-1].Seq); err != nil {
				return out, err
			}
		}
	}
	if mentions && len(out.Events) < maxWaitEvents {
		evs, more, err := s.readMentions(ctx, maxWaitEvents-len(out.Events), false, func(url string, seq int64) bool {
			if delivered[url+"#"+fmt.Sprint(seq)] {
				return true
			}
			// A watched room's records come by the room, mentions
			// included (kind mention): the inbox does not repeat them.
			for _, w := range rooms {
				if w.rr.url == url {
					return true
				}
			}
			return false
		})
		if err != nil {
			return out, err
		}
		out.Events = append(out.Events, evs...)
		out.Truncated = out.Truncated || more
	}
	out.Cursor = s.cursorString(rooms)
	return out, nil
}

// readMentions reads the inbox after its cursor, verifying each mentioned
// record, and advances the cursor unless peek.
func (s *Server) readMentions(ctx context.Context, limit int, peek bool, skip func(url string, seq int64) bool) ([]Event, bool, error) {
	cur := s.store.mentions()
	page, err := s.home.Mentions(ctx, cur, limit)
	if err != nil {
		return nil, false, err
	}
	if page.ResetRequired {
		cur = client.Cursor{}
		if page, err = s.home.Mentions(ctx, cur, limit); err != nil {
			return nil, false, err
		}
	}
	evs := []Event{}
	for _, raw := range page.Items {
		var m client.MentionItem
		if json.Unmarshal(raw, &m) != nil {
			continue
		}
		ref := m.RoomURL
		if ref == "" {
			ref = m.RoomID
		}
		rr, err := s.resolve(ref)
		if err != nil {
			continue
		}
		if skip != nil && skip(rr.url, m.RoomSeq) {
			continue
		}
		ev := Event{Kind: "mention", RoomID: rr.id, RoomURL: rr.url}
		items, _, _, err := s.readVerified(ctx, rr, m.RoomSeq-1, 1)
		if err == nil && len(items) == 1 && items[0].Seq == m.RoomSeq {
			ev.Item = items[0]
		} else {
			ev.Item = Item{Seq: m.RoomSeq, Author: string(m.Actor), Type: m.Type, Mentions: []string{}, Note: "the mentioned record could not be read"}
			if err != nil {
				ev.Item.Note += ": " + asToolError(err).Error()
			}
		}
		evs = append(evs, ev)
	}
	if !peek {
		next := client.Cursor{After: page.NextAfter, StreamID: page.StreamID, VisibilityEpoch: page.VisibilityEpoch}
		if next != cur {
			if err := s.store.setMentions(next); err != nil {
				return nil, false, err
			}
		}
	}
	return evs, page.HasMore, nil
}

// cursorString describes the cursors after a wait (informational: the
// server keeps them in its state directory).
func (s *Server) cursorString(rooms []watched) string {
	parts := []string{fmt.Sprintf("mentions:%d", s.store.mentions().After)}
	for _, w := range rooms {
		seen, _ := s.store.seen(w.rr.url)
		parts = append(parts, fmt.Sprintf("%s:%d", w.rr.id, seen))
	}
	sort.Strings(parts[1:])
	return strings.Join(parts, ",")
}

func waitSummary(out WaitOut) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d new event(s)", len(out.Events))
	for _, e := range out.Events {
		line, _ := clip(strings.ReplaceAll(e.Content, "\n", " "), 200)
		v := ""
		if !e.Verified {
			v = " UNVERIFIED"
		}
		fmt.Fprintf(&b, "\n[%s] room %s #%d %s%s: %s", e.Kind, e.RoomID, e.Seq, authorLabel(e.Item), v, line)
	}
	if out.Truncated {
		b.WriteString("\nmore are ready: call wait again")
	}
	return b.String()
}

// ---- inbox

type InboxIn struct {
	Limit int  `json:"limit,omitempty" jsonschema:"items per page (1-50, default 10)"`
	Peek  bool `json:"peek,omitempty" jsonschema:"do not advance the inbox cursor"`
}

type InboxOut struct {
	Items   []Event `json:"items"`
	HasMore bool    `json:"has_more"`
	Cursor  int64   `json:"cursor"`
}

func (s *Server) inbox(ctx context.Context, _ *mcp.CallToolRequest, in InboxIn) (InboxOut, string, error) {
	lim := in.Limit
	if lim <= 0 || lim > 50 {
		lim = 10
	}
	evs, more, err := s.readMentions(ctx, lim, in.Peek, nil)
	if err != nil {
		return InboxOut{}, "", err
	}
	out := InboxOut{Items: evs, HasMore: more, Cursor: s.store.mentions().After}
	sum := waitSummary(WaitOut{Events: evs, Truncated: more})
	return out, strings.Replace(sum, "new event(s)", "mention(s)", 1), nil
}

// ---- directory subscriptions

type SubscribeIn struct {
	Keyword    string   `json:"keyword,omitempty"`
	Tags       []string `json:"tags,omitempty"`
	Status     []string `json:"status,omitempty"`
	Host       string   `json:"host,omitempty"`
	Language   string   `json:"language,omitempty"`
	Creator    string   `json:"creator,omitempty"`
	TTLSeconds int64    `json:"ttl_seconds,omitempty" jsonschema:"how long the subscription lasts (default: the host's)"`
}

type SubscribeOut struct {
	SubscriptionID string `json:"subscription_id"`
	ExpiresAt      int64  `json:"expires_at"`
}

func (s *Server) subscribeDirectory(ctx context.Context, _ *mcp.CallToolRequest, in SubscribeIn) (SubscribeOut, string, error) {
	sub, err := s.home.Subscribe(ctx, client.Filter{Keyword: in.Keyword, Tags: in.Tags, Status: in.Status, Host: in.Host, Language: in.Language, Creator: in.Creator},
		time.Duration(in.TTLSeconds)*time.Second)
	if err != nil {
		return SubscribeOut{}, "", err
	}
	if err := s.store.setSub(sub.ID, client.Cursor{}); err != nil {
		return SubscribeOut{}, "", err
	}
	return SubscribeOut{SubscriptionID: sub.ID, ExpiresAt: sub.ExpiresAt}, "subscribed: " + sub.ID, nil
}

type ListSubsIn struct {
	Changes int `json:"changes,omitempty" jsonschema:"changes to return per subscription (0-50, default 20); they are not returned again"`
}

type Change struct {
	RoomID string `json:"room_id"`
	Kind   string `json:"kind" jsonschema:"appeared, changed or unavailable"`
	Topic  string `json:"topic,omitempty"`
	URL    string `json:"url,omitempty"`
	Status string `json:"status,omitempty"`
}

type SubOut struct {
	SubscriptionID string        `json:"subscription_id"`
	Filter         client.Filter `json:"filter"`
	ExpiresAt      int64         `json:"expires_at"`
	Changes        []Change      `json:"changes"`
	More           bool          `json:"more"`
}

type ListSubsOut struct {
	Subscriptions []SubOut `json:"subscriptions"`
}

func (s *Server) listSubscriptions(ctx context.Context, _ *mcp.CallToolRequest, in ListSubsIn) (ListSubsOut, string, error) {
	lim := in.Changes
	if lim <= 0 || lim > 50 {
		lim = 20
	}
	subs, err := s.home.Subscriptions(ctx)
	if err != nil {
		return ListSubsOut{}, "", err
	}
	cursors := s.store.subs()
	out := ListSubsOut{Subscriptions: []SubOut{}}
	total := 0
	for i, sub := range subs {
		if i >= 20 {
			break
		}
		so := SubOut{SubscriptionID: sub.ID, Filter: sub.Filter, ExpiresAt: sub.ExpiresAt, Changes: []Change{}}
		cur := cursors[sub.ID]
		page, err := s.home.SubscriptionFeed(ctx, sub.ID, cur, lim)
		if err == nil && page.ResetRequired {
			cur = client.Cursor{}
			page, err = s.home.SubscriptionFeed(ctx, sub.ID, cur, lim)
		}
		if err == nil {
			for _, raw := range page.Items {
				var fi client.FeedItem
				if json.Unmarshal(raw, &fi) != nil {
					continue
				}
				var r struct {
					Topic  string `json:"topic"`
					URL    string `json:"url"`
					Status string `json:"status"`
				}
				_ = json.Unmarshal(fi.Room, &r)
				topic, _ := clip(r.Topic, 300)
				so.Changes = append(so.Changes, Change{RoomID: fi.RoomID, Kind: fi.Kind, Topic: topic, URL: r.URL, Status: r.Status})
			}
			so.More = page.HasMore
			s.stateWritten(s.store.setSub(sub.ID, client.Cursor{After: page.NextAfter, StreamID: page.StreamID, VisibilityEpoch: page.VisibilityEpoch}))
		}
		total += len(so.Changes)
		out.Subscriptions = append(out.Subscriptions, so)
	}
	return out, fmt.Sprintf("%d subscription(s), %d new change(s)", len(out.Subscriptions), total), nil
}

type UnsubscribeIn struct {
	SubscriptionID string `json:"subscription_id"`
}

type OKOut struct {
	OK bool `json:"ok"`
}

func (s *Server) unsubscribeDirectory(ctx context.Context, _ *mcp.CallToolRequest, in UnsubscribeIn) (OKOut, string, error) {
	if err := s.home.Unsubscribe(ctx, in.SubscriptionID); err != nil {
		return OKOut{}, "", err
	}
	s.stateWritten(s.store.dropSub(in.SubscriptionID))
	return OKOut{OK: true}, "unsubscribed " + in.SubscriptionID, nil
}
