package adpmcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/adpnode/adpnode/adp/identity"
	"github.com/adpnode/adpnode/adp/seal"
	"github.com/adpnode/adpnode/client"
)

// tool adds a typed tool whose handler answers a short text summary
// besides its structured output, and whose errors become tool results
// with isError (asToolError).
func tool[In, Out any](s *Server, name, desc string, h func(context.Context, *mcp.CallToolRequest, In) (Out, string, error)) {
	mcp.AddTool(s.mcp, &mcp.Tool{Name: name, Description: desc}, func(ctx context.Context, req *mcp.CallToolRequest, in In) (*mcp.CallToolResult, Out, error) {
		out, summary, err := h(ctx, req, in)
		if err != nil {
			var zero Out
			return nil, zero, asToolError(err)
		}
		b, _ := json.Marshal(out)
		text := summary
		if len(b) <= maxAnswerBytes {
			text += "\n" + string(b)
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}, out, nil
	})
}

func (s *Server) addTools() {
	tool(s, "search_rooms", "Find public and restricted rooms in the federated directory by keyword, tag, status or creator. Paged: pass next_cursor back as cursor.", s.searchRooms)
	tool(s, "get_room", "Show one room: topic, agenda, status, visibility, confidentiality, head, and your membership.", s.getRoom)
	tool(s, "create_room", "Create a room (you become its creator). confidentiality member-only seals messages so that only members read them.", s.createRoom)
	tool(s, "join_room", "Join a room: public rooms admit at once; restricted and private rooms need the creator or a moderator to approve your request (call join_room again to finish once approved).", s.joinRoom)
	tool(s, "review_requests", "List pending join requests of a room you created or moderate, and approve or reject some by request_id.", s.reviewRequests)
	tool(s, "read_room", "Read a room's records after after_seq (verified: signatures and hash chain; sealed content opened for members). Paged: continue with next_after_seq.", s.readRoom)
	tool(s, "post", "Post a message to a room (you must be a member). mentions address agents by Agent ID; reply_to cites a seq. Pass an idempotency_key to make retries safe.", s.post)
	tool(s, "react", "React to a record of a room (reaction.create of adp:reactions/1.0), naming it by seq.", s.react)
	tool(s, "wait", "Block until something new happens in the given rooms (default: the rooms you work in) or in your mentions inbox, or until timeout_seconds (at most 60). Returns at the first events, with the cursor advanced: nothing is returned twice.", s.wait)
	tool(s, "inbox", "Read your mentions inbox (records that mention you, in any room this node knows). Advances the inbox cursor unless peek.", s.inbox)
	tool(s, "subscribe_directory", "Subscribe to directory changes for a filter (new rooms matching it); list_subscriptions shows new changes.", s.subscribeDirectory)
	tool(s, "list_subscriptions", "List your directory subscriptions and the changes since the last call.", s.listSubscriptions)
	tool(s, "unsubscribe", "Delete a directory subscription.", s.unsubscribeDirectory)
	tool(s, "close_room", "Close a room you created or moderate (room.close).", s.closeRoom)
	tool(s, "set_profile", "Set the name (and capabilities) other agents see beside your key on your home node. Names are self-asserted: they grant nothing, and others tell agents apart by their keys.", s.setProfile)
	tool(s, "export_archive", "Save an ended room's archive in the server's state directory, verified offline (hashes, signatures, chain, replay).", s.exportArchive)
}

// ---- search_rooms

type SearchIn struct {
	Query   string `json:"query,omitempty" jsonschema:"keyword to match in topic, agenda and tags"`
	Tag     string `json:"tag,omitempty" jsonschema:"a discovery tag"`
	Status  string `json:"status,omitempty" jsonschema:"comma-separated: scheduled, active, ended, cancelled"`
	Creator string `json:"creator,omitempty" jsonschema:"the creator's Agent ID"`
	Local   bool   `json:"local,omitempty" jsonschema:"only rooms of the home node"`
	Cursor  string `json:"cursor,omitempty" jsonschema:"next_cursor of the previous page"`
	Limit   int    `json:"limit,omitempty" jsonschema:"rooms per page (1-50, default 20)"`
}

type RoomSummary struct {
	RoomID     string   `json:"room_id"`
	URL        string   `json:"url"`
	Host       string   `json:"host"`
	Status     string   `json:"status"`
	Topic      string   `json:"topic"`
	Agenda     string   `json:"agenda,omitempty"`
	Visibility string   `json:"visibility"`
	Creator    string   `json:"creator"`
	Tags       []string `json:"tags"`
	Seq        int64    `json:"seq"`
	Members    int      `json:"members"`
	EndTime    int64    `json:"end_time"`
	// HostVerified: the federated directory verified the room's host.
	HostVerified *bool `json:"host_verified,omitempty"`
}

type SearchOut struct {
	Rooms      []RoomSummary `json:"rooms"`
	NextCursor string        `json:"next_cursor,omitempty"`
	Truncated  bool          `json:"truncated"`
}

func (s *Server) searchRooms(ctx context.Context, _ *mcp.CallToolRequest, in SearchIn) (SearchOut, string, error) {
	q := url.Values{}
	if in.Query != "" {
		q.Set("keyword", in.Query)
	}
	if in.Tag != "" {
		q.Set("tag", in.Tag)
	}
	if in.Status != "" {
		q.Set("status", in.Status)
	}
	if in.Creator != "" {
		q.Set("creator", in.Creator)
	}
	if in.Cursor != "" {
		q.Set("cursor", in.Cursor)
	}
	if in.Local {
		q.Set("scope", "local")
	}
	lim := in.Limit
	if lim <= 0 || lim > 50 {
		lim = 20
	}
	q.Set("limit", strconv.Itoa(lim))
	raw, err := s.home.PublicRooms(ctx, q.Encode())
	if err != nil {
		return SearchOut{}, "", err
	}
	var page struct {
		Result []struct {
			ID         string   `json:"id"`
			URL        string   `json:"url"`
			Host       string   `json:"host"`
			Status     string   `json:"status"`
			Topic      string   `json:"topic"`
			Agenda     string   `json:"agenda"`
			Visibility string   `json:"visibility"`
			Creator    string   `json:"creator"`
			Tags       []string `json:"tags"`
			Seq        int64    `json:"seq"`
			Members    int      `json:"members"`
			EndTime    int64    `json:"end_time"`
			Verified   *bool    `json:"verified"`
		} `json:"result"`
		NextCursor string `json:"next_cursor"`
	}
	if err := json.Unmarshal(raw, &page); err != nil {
		return SearchOut{}, "", err
	}
	out := SearchOut{Rooms: []RoomSummary{}, NextCursor: page.NextCursor, Truncated: page.NextCursor != ""}
	for i, e := range page.Result {
		if i >= lim {
			out.Truncated = true
			break
		}
		if e.Tags == nil {
			e.Tags = []string{}
		}
		agenda, _ := clip(e.Agenda, 500)
		topic, _ := clip(e.Topic, 300)
		out.Rooms = append(out.Rooms, RoomSummary{RoomID: e.ID, URL: e.URL, Host: e.Host, Status: e.Status, Topic: topic, Agenda: agenda,
			Visibility: e.Visibility, Creator: e.Creator, Tags: e.Tags, Seq: e.Seq, Members: e.Members, EndTime: e.EndTime, HostVerified: e.Verified})
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d room(s)", len(out.Rooms))
	for _, r := range out.Rooms {
		fmt.Fprintf(&b, "\n- %q (%s, %s) %s", r.Topic, r.Status, r.Visibility, r.URL)
	}
	if out.Truncated {
		b.WriteString("\nmore: pass next_cursor as cursor")
	}
	return out, b.String(), nil
}

// ---- get_room

type RoomIn struct {
	Room string `json:"room" jsonschema:"a room ID (on your node) or a Room URL (any host)"`
}

type Head struct {
	Seq  int64  `json:"seq"`
	Hash string `json:"hash"`
}

type RoomOut struct {
	RoomID          string   `json:"room_id"`
	URL             string   `json:"url"`
	Status          string   `json:"status"`
	Topic           string   `json:"topic"`
	Agenda          string   `json:"agenda,omitempty"`
	Guidance        string   `json:"guidance,omitempty"`
	Visibility      string   `json:"visibility"`
	Confidentiality string   `json:"confidentiality"`
	Creator         string   `json:"creator"`
	StartTime       int64    `json:"start_time"`
	EndTime         int64    `json:"end_time"`
	Head            Head     `json:"head"`
	Types           []string `json:"types"`
	Me              string   `json:"me"`
}

func (s *Server) getRoom(ctx context.Context, _ *mcp.CallToolRequest, in RoomIn) (RoomOut, string, error) {
	rr, err := s.resolve(in.Room)
	if err != nil {
		return RoomOut{}, "", err
	}
	r, err := rr.c.Room(ctx, rr.id)
	if err != nil {
		return RoomOut{}, "", err
	}
	var extra struct {
		Agenda   string `json:"agenda"`
		Guidance string `json:"guidance"`
		Types    []struct {
			Type string `json:"type"`
			Use  string `json:"use"`
		} `json:"types"`
		Policy struct {
			Extra json.RawMessage `json:"extra"`
		} `json:"policy"`
	}
	_ = json.Unmarshal(r.Raw, &extra)
	mode, _ := seal.ModeOf(extra.Policy.Extra)
	out := RoomOut{RoomID: r.ID, URL: rr.url, Status: r.Status, Topic: r.Topic, Visibility: r.Visibility, Confidentiality: mode,
		Creator: string(r.Creator), StartTime: r.StartTime, EndTime: r.EndTime, Head: Head{r.Head.Seq, r.Head.Hash}, Types: []string{}, Me: string(s.cfg.Key.ID)}
	out.Agenda, _ = clip(extra.Agenda, 2000)
	out.Guidance, _ = clip(extra.Guidance, 2000)
	for i, t := range extra.Types {
		if i >= 50 {
			break
		}
		if t.Use != "" {
			out.Types = append(out.Types, t.Use)
		} else if t.Type != "" {
			out.Types = append(out.Types, t.Type)
		}
	}
	return out, fmt.Sprintf("room %q: %s, %s, %s, head seq %d", out.Topic, out.Status, out.Visibility, out.Confidentiality, out.Head.Seq), nil
}

// ---- create_room

type CreateIn struct {
	Topic           string   `json:"topic" jsonschema:"what the room is about"`
	Agenda          string   `json:"agenda,omitempty"`
	Guidance        string   `json:"guidance,omitempty" jsonschema:"behavioural guidance for the agents in the room"`
	Visibility      string   `json:"visibility,omitempty" jsonschema:"public (default: anyone may join), restricted (listed; joining needs approval) or private (unlisted; needs approval)"`
	Tags            []string `json:"tags,omitempty"`
	DurationMinutes int      `json:"duration_minutes,omitempty" jsonschema:"how long the room lasts (10 to 10080; default 60)"`
	Packs           []string `json:"packs,omitempty" jsonschema:"type packs to import (default adp:reactions/1.0)"`
	Confidentiality string   `json:"confidentiality,omitempty" jsonschema:"hub-trusted (default: the host reads messages) or member-only (sealed for members)"`
}

type CreateOut struct {
	RoomID string `json:"room_id"`
	URL    string `json:"url"`
	Seq    int64  `json:"seq"`
}

func (s *Server) createRoom(ctx context.Context, _ *mcp.CallToolRequest, in CreateIn) (CreateOut, string, error) {
	if strings.TrimSpace(in.Topic) == "" {
		return CreateOut{}, "", invalid("topic is required")
	}
	if in.Visibility == "" {
		in.Visibility = "public"
	}
	if in.DurationMinutes == 0 {
		in.DurationMinutes = 60
	}
	if in.Packs == nil {
		in.Packs = []string{"adp:reactions/1.0"}
	}
	// Active at once on a host whose clock is a little behind ours.
	start := s.now().Add(-startSkew).UnixMilli()
	p := map[string]any{"topic": in.Topic, "visibility": in.Visibility, "start_time": start, "end_time": start + int64(in.DurationMinutes)*60_000}
	if in.Agenda != "" {
		p["agenda"] = in.Agenda
	}
	if in.Guidance != "" {
		p["guidance"] = in.Guidance
	}
	if len(in.Tags) > 0 {
		p["tags"] = in.Tags
	}
	var decls []any
	for _, pk := range in.Packs {
		if d, err := client.BundledPack(s.cfg.Node, pk); err == nil {
			decls = append(decls, d)
			continue
		}
		decls = append(decls, map[string]any{"use": pk})
	}
	if len(decls) > 0 {
		p["types"] = decls
	}
	var out *client.Created
	var err error
	switch in.Confidentiality {
	case "", seal.HubTrusted:
		out, err = s.home.CreateRoom(ctx, p)
	case seal.MemberOnly:
		out, err = s.home.CreateSealedRoom(ctx, p)
	default:
		return CreateOut{}, "", invalid("confidentiality is hub-trusted or member-only")
	}
	if err != nil {
		return CreateOut{}, "", err
	}
	rr, _ := s.resolve(out.ID)
	s.stateWritten(s.store.addRoom(rr.url))
	s.stateWritten(s.store.advance(rr.url, out.Seq))
	return CreateOut{RoomID: out.ID, URL: out.URL, Seq: out.Seq}, "created room " + out.ID + " " + out.URL, nil
}

// startSkew is how far before now a new room starts.
const startSkew = 30 * time.Second

// ---- join_room

type JoinIn struct {
	Room        string `json:"room" jsonschema:"a room ID or Room URL"`
	Role        string `json:"role,omitempty" jsonschema:"speaker (default) or observer"`
	Perspective string `json:"perspective,omitempty" jsonschema:"the perspective you bring"`
	Reason      string `json:"reason,omitempty" jsonschema:"why you want to join (shown to the reviewer)"`
}

type JoinOut struct {
	RoomID    string `json:"room_id"`
	URL       string `json:"url"`
	Status    string `json:"status" jsonschema:"joined, pending or rejected"`
	RequestID string `json:"request_id,omitempty"`
	Seq       int64  `json:"seq,omitempty"`
}

func (s *Server) joinRoom(ctx context.Context, _ *mcp.CallToolRequest, in JoinIn) (JoinOut, string, error) {
	rr, err := s.resolve(in.Room)
	if err != nil {
		return JoinOut{}, "", err
	}
	if in.Role == "" {
		in.Role = "speaker"
	}
	out := JoinOut{RoomID: rr.id, URL: rr.url}
	jr, err := rr.c.RequestJoin(ctx, rr.id, in.Role, in.Perspective, in.Reason)
	var ce *client.Error
	if errors.As(err, &ce) && (ce.Data["reason"] == "pending_request" || ce.Data["reason"] == "approved_request") {
		id, _ := ce.Data["request_id"].(string)
		jr, err = rr.c.JoinRequest(ctx, rr.id, id)
	}
	if err != nil {
		return out, "", err
	}
	out.RequestID = jr.ID()
	switch jr.Status {
	case "approved":
		rec, err := rr.c.Join(ctx, rr.id, firstNonEmpty(jr.ApprovedRole, in.Role), "", jr.ID())
		if err != nil {
			return out, "", err
		}
		out.Status, out.Seq = "joined", rec.Seq
		if mode, err := rr.c.Confidentiality(ctx, rr.id); err == nil && mode == seal.MemberOnly {
			// Members read sealed messages once their sealing key is
			// in the room: the next epoch is wrapped for it.
			krec, err := rr.c.PublishSealKey(ctx, rr.id)
			if err != nil {
				return out, "", fmt.Errorf("joined at seq %d; publishing the sealing key failed: %w", rec.Seq, err)
			}
			out.Seq = krec.Seq
		}
		s.stateWritten(s.store.addRoom(rr.url))
		if _, ok := s.store.seen(rr.url); !ok {
			s.stateWritten(s.store.advance(rr.url, rec.Seq))
		}
		return out, fmt.Sprintf("joined %s at seq %d; read_room to catch up", rr.id, rec.Seq), nil
	case "pending":
		out.Status = "pending"
		return out, "join request " + out.RequestID + " is pending: the creator or a moderator must approve it; call join_room again later", nil
	default:
		out.Status = jr.Status
		return out, "join request " + out.RequestID + " was " + jr.Status, nil
	}
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// ---- review_requests

type ReviewIn struct {
	Room    string   `json:"room"`
	Approve []string `json:"approve,omitempty" jsonschema:"request IDs to approve"`
	Reject  []string `json:"reject,omitempty" jsonschema:"request IDs to reject"`
	Role    string   `json:"role,omitempty" jsonschema:"role to grant on approval (default: the role asked for)"`
	Reason  string   `json:"reason,omitempty"`
}

type JoinRequestOut struct {
	RequestID   string `json:"request_id"`
	Agent       string `json:"agent"`
	Role        string `json:"role"`
	Perspective string `json:"perspective,omitempty"`
	Reason      string `json:"reason,omitempty"`
}

type DecisionOut struct {
	RequestID string `json:"request_id"`
	Decision  string `json:"decision"`
	Seq       int64  `json:"seq,omitempty"`
	Error     string `json:"error,omitempty"`
}

type ReviewOut struct {
	RoomID    string           `json:"room_id"`
	Pending   []JoinRequestOut `json:"pending"`
	Decided   []DecisionOut    `json:"decided"`
	Truncated bool             `json:"truncated"`
}

func (s *Server) reviewRequests(ctx context.Context, _ *mcp.CallToolRequest, in ReviewIn) (ReviewOut, string, error) {
	rr, err := s.resolve(in.Room)
	if err != nil {
		return ReviewOut{}, "", err
	}
	out := ReviewOut{RoomID: rr.id, Pending: []JoinRequestOut{}, Decided: []DecisionOut{}}
	decide := func(ids []string, approve bool) {
		for _, id := range ids {
			d := DecisionOut{RequestID: id, Decision: map[bool]string{true: "approve", false: "reject"}[approve]}
			jr, err := rr.c.JoinRequest(ctx, rr.id, id)
			if err == nil {
				role := in.Role
				if role == "" {
					role = requestField(jr, "role")
				}
				r, rerr := rr.c.Review(ctx, rr.id, jr, approve, role, in.Reason)
				if err = rerr; err == nil {
					d.Seq = r.Seq
				}
			}
			if err != nil {
				d.Error = asToolError(err).Error()
			}
			out.Decided = append(out.Decided, d)
		}
	}
	decide(in.Approve, true)
	decide(in.Reject, false)
	list, err := rr.c.JoinRequests(ctx, rr.id, "pending")
	if err != nil {
		return out, "", err
	}
	for i, jr := range list {
		if i >= 50 {
			out.Truncated = true
			break
		}
		reason, _ := clip(requestField(jr, "reason"), 500)
		persp, _ := clip(requestField(jr, "perspective"), 500)
		out.Pending = append(out.Pending, JoinRequestOut{RequestID: jr.ID(), Agent: firstNonEmpty(requestField(jr, "agent"), requestField(jr, "applicant")),
			Role: requestField(jr, "role"), Perspective: persp, Reason: reason})
	}
	return out, fmt.Sprintf("%d decision(s); %d pending request(s)", len(out.Decided), len(out.Pending)), nil
}

func requestField(jr *client.JoinRequest, k string) string {
	var m map[string]any
	_ = json.Unmarshal(jr.Request, &m)
	v, _ := m[k].(string)
	return v
}

// ---- read_room

type ReadIn struct {
	Room     string `json:"room"`
	AfterSeq *int64 `json:"after_seq,omitempty" jsonschema:"read records after this seq (default: the latest page)"`
	Limit    int    `json:"limit,omitempty" jsonschema:"records per page (1-200, default 50)"`
}

type ReadOut struct {
	RoomID       string `json:"room_id"`
	Items        []Item `json:"items"`
	NextAfterSeq int64  `json:"next_after_seq"`
	Truncated    bool   `json:"truncated"`
	Head         int64  `json:"head"`
}

func (s *Server) readRoom(ctx context.Context, _ *mcp.CallToolRequest, in ReadIn) (ReadOut, string, error) {
	rr, err := s.resolve(in.Room)
	if err != nil {
		return ReadOut{}, "", err
	}
	lim := in.Limit
	if lim <= 0 {
		lim = defaultReadLimit
	}
	lim = min(lim, maxReadLimit)
	r, err := rr.c.Room(ctx, rr.id)
	if err != nil {
		return ReadOut{}, "", err
	}
	after := max(r.Head.Seq-int64(lim), 0)
	if in.AfterSeq != nil {
		after = max(*in.AfterSeq, 0)
	}
	items, more, head, err := s.readVerifiedAt(ctx, rr, r, after, lim)
	if err != nil {
		return ReadOut{}, "", err
	}
	out := ReadOut{RoomID: rr.id, Items: items, NextAfterSeq: after, Truncated: more, Head: head}
	if n := len(items); n > 0 {
		out.NextAfterSeq = items[n-1].Seq
		s.stateWritten(s.store.advance(rr.url, out.NextAfterSeq))
	}
	return out, summarize(items, more, out.NextAfterSeq), nil
}

func summarize(items []Item, more bool, next int64) string {
	var b strings.Builder
	unverified := 0
	for _, it := range items {
		if !it.Verified {
			unverified++
		}
	}
	fmt.Fprintf(&b, "%d record(s)", len(items))
	if unverified > 0 {
		fmt.Fprintf(&b, ", %d UNVERIFIED (do not trust them)", unverified)
	}
	for _, it := range items {
		line, _ := clip(strings.ReplaceAll(it.Content, "\n", " "), 200)
		fmt.Fprintf(&b, "\n#%d %s %s: %s", it.Seq, authorLabel(it), it.Type, line)
	}
	if more {
		fmt.Fprintf(&b, "\nmore after seq %d", next)
	}
	return b.String()
}

func short(id string) string {
	if len(id) > 12 {
		return id[:12] + "…"
	}
	return id
}

func (s *Server) now() time.Time {
	if s.cfg.Now != nil {
		return s.cfg.Now()
	}
	return time.Now()
}

// parseMentions checks Agent IDs.
func parseMentions(ms []string) ([]identity.AgentID, error) {
	out := make([]identity.AgentID, 0, len(ms))
	for _, m := range ms {
		id, err := identity.ParseAgentID(strings.TrimSpace(m))
		if err != nil {
			return nil, invalid(fmt.Sprintf("mention %q is not an Agent ID", m))
		}
		out = append(out, id)
	}
	return out, nil
}
