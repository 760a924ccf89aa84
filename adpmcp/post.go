package adpmcp

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/adpnode/adpnode/adp"
	"github.com/adpnode/adpnode/adp/identity"
	"github.com/adpnode/adpnode/adp/record"
	"github.com/adpnode/adpnode/adp/seal"
	"github.com/adpnode/adpnode/client"
)

type PostIn struct {
	Room           string         `json:"room" jsonschema:"a room ID or Room URL"`
	Text           string         `json:"text,omitempty" jsonschema:"the message (markdown)"`
	Mentions       []string       `json:"mentions,omitempty" jsonschema:"Agent IDs to address"`
	ReplyTo        int64          `json:"reply_to,omitempty" jsonschema:"the seq of the record this answers"`
	Type           string         `json:"type,omitempty" jsonschema:"event type (default message.create); other types take payload"`
	Payload        map[string]any `json:"payload,omitempty" jsonschema:"the payload of a non-message type"`
	IdempotencyKey string         `json:"idempotency_key,omitempty" jsonschema:"the same key never posts twice, across retries and restarts"`
}

type PostOut struct {
	RoomID   string `json:"room_id"`
	Seq      int64  `json:"seq"`
	Hash     string `json:"hash"`
	Verified bool   `json:"verified"`
	// Replayed: this idempotency key had already posted; the earlier
	// answer is returned and nothing was posted again.
	Replayed bool   `json:"replayed,omitempty"`
	Note     string `json:"note,omitempty"`
}

func (s *Server) post(ctx context.Context, _ *mcp.CallToolRequest, in PostIn) (PostOut, string, error) {
	rr, err := s.resolve(in.Room)
	if err != nil {
		return PostOut{}, "", err
	}
	mentions, err := parseMentions(in.Mentions)
	if err != nil {
		return PostOut{}, "", err
	}
	typ := in.Type
	if typ == "" {
		typ = "message.create"
	}
	var payload any
	if typ == "message.create" {
		if in.Text == "" {
			return PostOut{}, "", invalid("text is required")
		}
		p := map[string]any{"content_type": "text/markdown", "content": in.Text}
		if in.ReplyTo > 0 {
			h, err := s.eventHashAt(ctx, rr, in.ReplyTo)
			if err != nil {
				return PostOut{}, "", invalid("reply_to: " + err.Error())
			}
			p["references"] = []string{h}
		}
		payload = p
	} else {
		if in.Payload == nil {
			return PostOut{}, "", invalid("payload is required for type " + typ)
		}
		payload = in.Payload
	}
	key := in.IdempotencyKey
	if key == "" {
		var b [16]byte
		rand.Read(b[:])
		key = "auto-" + base64.RawURLEncoding.EncodeToString(b[:])
	}
	key = string(s.cfg.Key.ID) + "|" + key
	out, err := s.postOnce(ctx, rr, key, typ, payload, mentions, in.Text)
	if err != nil {
		return out, "", err
	}
	s.stateWritten(s.store.addRoom(rr.url))
	summary := fmt.Sprintf("posted as seq %d", out.Seq)
	switch {
	case !out.Verified:
		summary = fmt.Sprintf("accepted as seq %d, answer unverifiable", out.Seq)
	case out.Replayed:
		summary = fmt.Sprintf("already posted as seq %d (same idempotency_key); not posted again", out.Seq)
	}
	return out, summary, nil
}

// postOnce posts under an idempotency key: settled keys answer from the
// log; a pending key (a crash or a lost answer) is settled by resubmitting
// its envelope before anything new is signed.
func (s *Server) postOnce(ctx context.Context, rr roomRef, key, typ string, payload any, mentions []identity.AgentID, text string) (PostOut, error) {
	prev, err := s.store.loadPost(key)
	if err != nil {
		return PostOut{}, err
	}
	if prev != nil && prev.Room != rr.url {
		return PostOut{}, invalid("idempotency_key was used for another room")
	}
	if prev != nil && prev.State == "done" && prev.Result != nil {
		r := *prev.Result
		r.Replayed = true
		return r, nil
	}
	mode, err := rr.c.Confidentiality(ctx, rr.id)
	if err != nil {
		return PostOut{}, err
	}
	if mode == seal.MemberOnly {
		return s.postSealed(ctx, rr, key, prev, typ, payload, mentions, text)
	}
	if prev != nil && len(prev.Envelope) > 0 {
		raw, err := rr.c.SubmitEnvelopeRaw(ctx, rr.id, prev.Envelope)
		switch {
		case err == nil:
			return s.settle(rr, prev, raw)
		case client.CodeOf(err) == "":
			return PostOut{}, &toolError{Code: "unavailable", Message: "the host did not answer: " + err.Error(),
				Hint: "call post again with the same idempotency_key: it will not post twice"}
		}
		// Refused: that envelope is not in the room; sign anew below.
	}
	var lastErr error
	for attempt := 0; attempt < 8; attempt++ {
		r, err := rr.c.Room(ctx, rr.id)
		if err != nil {
			return PostOut{}, err
		}
		ev, err := rr.c.Event(typ, rr.id, client.Head{Seq: r.Head.Seq, Hash: r.Head.Hash}, payload, mentions...)
		if err != nil {
			return PostOut{}, err
		}
		env, err := rr.c.Sign(ev)
		if err != nil {
			return PostOut{}, err
		}
		e := &postEntry{Key: key, Room: rr.url, State: "pending", Envelope: env}
		if err := s.store.savePost(e); err != nil {
			return PostOut{}, err
		}
		raw, err := rr.c.SubmitEnvelopeRaw(ctx, rr.id, env)
		switch code := client.CodeOf(err); {
		case err == nil:
			return s.settle(rr, e, raw)
		case code == "":
			return PostOut{}, &toolError{Code: "unavailable", Message: "the host did not answer: " + err.Error(),
				Hint: "call post again with the same idempotency_key: it will not post twice"}
		case code == adp.CodeRoomHeadMismatch || code == adp.CodeNonceNotGreater:
			lastErr = err
		default:
			s.stateWritten(s.store.dropPost(key))
			return PostOut{}, err
		}
		select {
		case <-ctx.Done():
			return PostOut{}, ctx.Err()
		case <-time.After(time.Duration(attempt*attempt) * 10 * time.Millisecond):
		}
	}
	s.stateWritten(s.store.dropPost(key))
	return PostOut{}, fmt.Errorf("gave up after 8 attempts: %w", lastErr)
}

// settle records the answer of an accepted envelope. An answer that does
// not verify (or is not the record of our envelope) still means accepted:
// it is reported unverifiable and never posted again.
func (s *Server) settle(rr roomRef, e *postEntry, raw json.RawMessage) (PostOut, error) {
	out := PostOut{RoomID: rr.id}
	rec, env, err := record.Parse(raw)
	ours, _ := identity.ParseEnvelope(e.Envelope)
	if err == nil && ours != nil && env.Hash == ours.Hash && rec.RoomID == rr.id {
		out.Seq, out.Hash, out.Verified = rec.Seq, rec.Hash, true
	} else {
		var loose struct {
			Seq  int64  `json:"seq"`
			Hash string `json:"hash"`
		}
		_ = json.Unmarshal(raw, &loose)
		out.Seq, out.Hash = loose.Seq, loose.Hash
		out.Note = fmt.Sprintf("accepted as seq %d, answer unverifiable", loose.Seq)
	}
	e.State, e.Result = "done", &out
	if err := s.store.savePost(e); err != nil {
		return out, err
	}
	s.stateWritten(s.store.advance(rr.url, out.Seq))
	return out, nil
}

// postSealed posts in a member-only room through the client's sealing
// write path. The log holds the head before the attempt and the text; a
// pending key is settled by finding this agent's record with that text
// after that head.
func (s *Server) postSealed(ctx context.Context, rr roomRef, key string, prev *postEntry, typ string, payload any, mentions []identity.AgentID, text string) (PostOut, error) {
	if prev != nil && prev.Sealed {
		if out, ok, err := s.findSealed(ctx, rr, prev); err != nil {
			return PostOut{}, err
		} else if ok {
			prev.State, prev.Result = "done", &out
			s.stateWritten(s.store.savePost(prev))
			return out, nil
		}
	}
	r, err := rr.c.Room(ctx, rr.id)
	if err != nil {
		return PostOut{}, err
	}
	e := &postEntry{Key: key, Room: rr.url, State: "pending", Sealed: true, HeadBefore: r.Head.Seq, Content: text}
	if prev != nil && prev.Sealed {
		e.HeadBefore = prev.HeadBefore
	}
	if err := s.store.savePost(e); err != nil {
		return PostOut{}, err
	}
	rec, err := rr.c.Send(ctx, rr.id, 8, mentions, func(*client.Room, []*record.Record) (string, any, error) { return typ, payload, nil })
	if err != nil {
		if client.CodeOf(err) != "" {
			s.stateWritten(s.store.dropPost(key))
		}
		return PostOut{}, err
	}
	out := PostOut{RoomID: rr.id, Seq: rec.Seq, Hash: rec.Hash, Verified: true}
	e.State, e.Result = "done", &out
	if err := s.store.savePost(e); err != nil {
		return out, err
	}
	s.stateWritten(s.store.advance(rr.url, out.Seq))
	return out, nil
}

func (s *Server) findSealed(ctx context.Context, rr roomRef, e *postEntry) (PostOut, bool, error) {
	items, _, _, err := s.readVerified(ctx, rr, e.HeadBefore, maxReadLimit)
	if err != nil {
		return PostOut{}, false, err
	}
	for _, it := range items {
		if it.Author == string(s.cfg.Key.ID) && it.Content == e.Content && e.Content != "" {
			return PostOut{RoomID: rr.id, Seq: it.Seq, Hash: it.Hash, Verified: it.Verified, Replayed: true}, true, nil
		}
	}
	return PostOut{}, false, nil
}

// ---- react

type ReactIn struct {
	Room     string   `json:"room"`
	Seq      int64    `json:"seq" jsonschema:"the seq of the record to react to"`
	Reaction string   `json:"reaction" jsonschema:"a short reaction, e.g. +1, agree, thanks"`
	Score    *float64 `json:"score,omitempty" jsonschema:"-1 to 1"`
}

func (s *Server) react(ctx context.Context, _ *mcp.CallToolRequest, in ReactIn) (PostOut, string, error) {
	rr, err := s.resolve(in.Room)
	if err != nil {
		return PostOut{}, "", err
	}
	h, err := s.eventHashAt(ctx, rr, in.Seq)
	if err != nil {
		return PostOut{}, "", invalid("seq: " + err.Error())
	}
	p := map[string]any{"event_id": h, "reaction": in.Reaction}
	if in.Score != nil {
		p["score"] = *in.Score
	}
	rec, err := rr.c.Send(ctx, rr.id, 8, nil, func(*client.Room, []*record.Record) (string, any, error) { return "reaction.create", p, nil })
	if err != nil {
		return PostOut{}, "", err
	}
	return PostOut{RoomID: rr.id, Seq: rec.Seq, Hash: rec.Hash, Verified: true}, fmt.Sprintf("reacted as seq %d", rec.Seq), nil
}

// ---- close_room

type CloseIn struct {
	Room   string `json:"room"`
	Reason string `json:"reason,omitempty"`
}

func (s *Server) closeRoom(ctx context.Context, _ *mcp.CallToolRequest, in CloseIn) (PostOut, string, error) {
	rr, err := s.resolve(in.Room)
	if err != nil {
		return PostOut{}, "", err
	}
	p := map[string]any{}
	if in.Reason != "" {
		p["reason"] = in.Reason
	}
	rec, err := rr.c.Post(ctx, rr.id, 8, func(*client.Room, []*record.Record) (string, any, error) { return "room.close", p, nil })
	if err != nil {
		return PostOut{}, "", err
	}
	return PostOut{RoomID: rr.id, Seq: rec.Seq, Hash: rec.Hash, Verified: true}, fmt.Sprintf("closed at seq %d", rec.Seq), nil
}
