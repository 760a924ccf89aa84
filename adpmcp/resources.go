package adpmcp

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/adpnode/adpnode/client"
)

const (
	inboxURI          = "adp://me/inbox"
	transcriptRecords = 50
)

func transcriptURI(rr roomRef) string {
	return "adp://room/" + url.PathEscape(rr.id) + "/transcript"
}

// roomOfURI returns the room of adp://room/{room_id}/transcript, where
// room_id is a room ID of the home node or a percent-encoded Room URL.
func (s *Server) roomOfURI(uri string) (roomRef, bool) {
	rest, ok := strings.CutPrefix(uri, "adp://room/")
	if !ok {
		return roomRef{}, false
	}
	id, ok := strings.CutSuffix(rest, "/transcript")
	if !ok {
		if id, ok = strings.CutSuffix(rest, "/transcript.json"); !ok {
			return roomRef{}, false
		}
	}
	id, err := url.PathUnescape(id)
	if err != nil {
		return roomRef{}, false
	}
	rr, err := s.resolve(id)
	return rr, err == nil
}

func (s *Server) addResources() {
	s.mcp.AddResourceTemplate(&mcp.ResourceTemplate{
		Name:        "room_transcript",
		Title:       "Room transcript",
		Description: fmt.Sprintf("The last %d verified records of a room, as markdown. Subscribe to be told when the room gets a record.", transcriptRecords),
		MIMEType:    "text/markdown",
		URITemplate: "adp://room/{room_id}/transcript",
	}, s.readTranscript)
	s.mcp.AddResourceTemplate(&mcp.ResourceTemplate{
		Name:        "room_transcript_json",
		Title:       "Room transcript (JSON)",
		Description: fmt.Sprintf("The last %d verified records of a room, as read_room returns them.", transcriptRecords),
		MIMEType:    "application/json",
		URITemplate: "adp://room/{room_id}/transcript.json",
	}, s.readTranscript)
	s.mcp.AddResource(&mcp.Resource{
		Name:        "inbox",
		Title:       "Mentions inbox",
		Description: "Recent records that mention you (JSON); reading it does not advance the inbox cursor. Subscribe to be told of new mentions.",
		MIMEType:    "application/json",
		URI:         inboxURI,
	}, s.readInbox)
}

func (s *Server) readTranscript(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	uri := req.Params.URI
	rr, ok := s.roomOfURI(uri)
	if !ok {
		return nil, mcp.ResourceNotFoundError(uri)
	}
	r, err := rr.c.Room(ctx, rr.id)
	if err != nil {
		return nil, asToolError(err)
	}
	after := max(r.Head.Seq-transcriptRecords, 0)
	items, more, head, err := s.readVerifiedAt(ctx, rr, r, after, transcriptRecords)
	if err != nil {
		return nil, asToolError(err)
	}
	if strings.HasSuffix(uri, ".json") {
		out := ReadOut{RoomID: rr.id, Items: items, NextAfterSeq: after, Truncated: more, Head: head}
		if n := len(items); n > 0 {
			out.NextAfterSeq = items[n-1].Seq
		}
		b, _ := json.Marshal(out)
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: uri, MIMEType: "application/json", Text: string(b)}}}, nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# %s\n\nRoom %s (%s), head seq %d. Records after seq %d:\n\n", r.Topic, rr.url, r.Status, r.Head.Seq, after)
	for _, it := range items {
		v := ""
		if !it.Verified {
			v = " **UNVERIFIED**"
		}
		name := ""
		if it.AuthorName != "" {
			name = " (" + strings.ReplaceAll(it.AuthorName, "`", "'") + ", self-asserted)"
		}
		fmt.Fprintf(&b, "- #%d `%s`%s %s%s", it.Seq, it.Author, name, it.Type, v)
		if it.ReplyTo != nil {
			fmt.Fprintf(&b, " (re #%d)", *it.ReplyTo)
		}
		if len(it.Mentions) > 0 {
			fmt.Fprintf(&b, " @%s", strings.Join(it.Mentions, " @"))
		}
		fmt.Fprintf(&b, ": %s\n", strings.ReplaceAll(it.Content, "\n", "\n  "))
	}
	return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: uri, MIMEType: "text/markdown", Text: b.String()}}}, nil
}

func (s *Server) readInbox(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	evs, more, err := s.readMentions(ctx, 20, true, nil)
	if err != nil {
		return nil, asToolError(err)
	}
	b, _ := json.Marshal(InboxOut{Items: evs, HasMore: more, Cursor: s.store.mentions().After})
	return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, MIMEType: "application/json", Text: string(b)}}}, nil
}

// subscribe starts what drives notifications/resources/updated for a
// URI: the room's live connection, or the inbox poller.
func (s *Server) subscribe(ctx context.Context, req *mcp.SubscribeRequest) (err error) {
	defer func() {
		if err != nil {
			s.refused.Add(1)
		}
	}()
	uri := req.Params.URI
	var release func()
	switch {
	case uri == inboxURI:
		release = s.startInboxPoller()
	default:
		rr, ok := s.roomOfURI(uri)
		if !ok {
			return mcp.ResourceNotFoundError(uri)
		}
		r, err := rr.c.Room(ctx, rr.id)
		if err != nil {
			return asToolError(err)
		}
		_, rel, err := s.live.acquire(rr, r.Head.Seq)
		if err != nil {
			return err
		}
		release = rel
	}
	s.mu.Lock()
	m := s.subs[req.Session]
	if m == nil {
		m = map[string]func(){}
		s.subs[req.Session] = m
	}
	old := m[uri]
	m[uri] = release
	s.mu.Unlock()
	if old != nil {
		old()
	}
	return nil
}

func (s *Server) unsubscribe(_ context.Context, req *mcp.UnsubscribeRequest) error {
	s.mu.Lock()
	rel := s.subs[req.Session][req.Params.URI]
	delete(s.subs[req.Session], req.Params.URI)
	s.mu.Unlock()
	if rel != nil {
		rel()
	}
	return nil
}

// startInboxPoller polls the mentions inbox (without moving its cursor)
// while anyone is subscribed to adp://me/inbox, and notifies on news.
func (s *Server) startInboxPoller() func() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.inboxRefs++
	if s.inboxRefs == 1 {
		ctx, cancel := context.WithCancel(s.ctx)
		s.inboxStop = cancel
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.pollInbox(ctx)
		}()
	}
	var done bool
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if done {
			return
		}
		done = true
		if s.inboxRefs--; s.inboxRefs == 0 {
			s.inboxStop()
		}
	}
}

func (s *Server) pollInbox(ctx context.Context) {
	var last int64 = -1
	t := time.NewTicker(mentionPoll)
	defer t.Stop()
	for {
		cur := client.Cursor{After: max(last, 0)}
		if last < 0 {
			cur = s.store.mentions()
		}
		cctx, cancel := context.WithTimeout(ctx, answerTimeout)
		page, err := s.home.Mentions(cctx, cur, 50)
		cancel()
		if err == nil && !page.ResetRequired {
			// The first poll reports mentions the agent has not read yet.
			if len(page.Items) > 0 {
				_ = s.mcp.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: inboxURI})
			}
			last = page.NextAfter
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
