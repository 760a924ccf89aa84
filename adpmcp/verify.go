package adpmcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"unicode/utf8"

	"github.com/adpnode/adpnode/adp/record"
	"github.com/adpnode/adpnode/adp/seal"
	"github.com/adpnode/adpnode/client"
)

// chain is what this server has verified of one room: the record hash
// and event hash of every seq from 1 up to the first record that failed
// (envelope hash and signature, record hash, link to the previous
// record). Records are read again for each answer and must match it.
type chain struct {
	mu       sync.Mutex
	recHash  []string // by seq-1
	evSeq    map[string]int64
	evHash   []string // by seq-1
	last     *record.Record
	broken   int64 // the first seq that failed (0: none)
	whyBroke string
}

// chains caches the chains of the rooms read, bounded in number.
type chains struct {
	mu sync.Mutex
	m  map[string]*chain
}

func (cs *chains) get(room string) *chain {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.m == nil {
		cs.m = map[string]*chain{}
	}
	ch := cs.m[room]
	if ch == nil {
		if len(cs.m) >= maxChains {
			for k := range cs.m { // drop one: it is rebuilt when read again
				delete(cs.m, k)
				break
			}
		}
		ch = &chain{evSeq: map[string]int64{}}
		cs.m[room] = ch
	}
	return ch
}

// extend verifies records after the verified prefix up to target.
// ch.mu is held.
func (ch *chain) extend(ctx context.Context, c *client.Client, roomID string, target int64) error {
	for ch.broken == 0 && int64(len(ch.recHash)) < target {
		raws, _, err := c.RawEvents(ctx, roomID, int64(len(ch.recHash)), 1000)
		if err != nil {
			return err
		}
		if len(raws) == 0 {
			return nil
		}
		for _, raw := range raws {
			next := int64(len(ch.recHash)) + 1
			rec, env, err := record.Parse(raw)
			if err == nil && rec.RoomID != roomID {
				err = fmt.Errorf("record of room %s", rec.RoomID)
			}
			if err == nil {
				if ch.last == nil {
					if rec.Seq != 1 || rec.PreHash != "" {
						err = fmt.Errorf("chain must start at seq 1")
					}
				} else {
					err = record.Link(ch.last, rec)
				}
			}
			if err != nil {
				ch.broken, ch.whyBroke = next, err.Error()
				return nil
			}
			ch.recHash = append(ch.recHash, rec.Hash)
			ch.evHash = append(ch.evHash, env.Hash)
			ch.evSeq[env.Hash] = rec.Seq
			ch.last = rec
		}
	}
	return nil
}

// Item is one record as read_room and wait return it.
type Item struct {
	Seq    int64  `json:"seq"`
	Author string `json:"author"`
	// AuthorName is the author's self-asserted profile name, verified
	// against its signature: it identifies nobody and grants nothing.
	AuthorName string   `json:"author_name,omitempty"`
	Type       string   `json:"type"`
	Content    string   `json:"content"`
	Mentions   []string `json:"mentions"`
	ReplyTo    *int64   `json:"reply_to"`
	Verified   bool     `json:"verified"`
	// Hash is the event hash (what reactions and references name).
	Hash string `json:"hash,omitempty"`
	// Sealed: the content was sealed for members (opened here when it
	// could be; Note says why not).
	Sealed           bool   `json:"sealed,omitempty"`
	ContentTruncated bool   `json:"content_truncated,omitempty"`
	Note             string `json:"note,omitempty"`
	CreatedAt        int64  `json:"created_at,omitempty"`
}

// readVerified reads up to limit records after `after` and verifies each
// against the chain up to the room's head.
func (s *Server) readVerified(ctx context.Context, rr roomRef, after int64, limit int) (items []Item, more bool, head int64, err error) {
	return s.readVerifiedAt(ctx, rr, nil, after, limit)
}

// readVerifiedAt is readVerified with the room resource already read (nil:
// read it).
func (s *Server) readVerifiedAt(ctx context.Context, rr roomRef, r *client.Room, after int64, limit int) (items []Item, more bool, head int64, err error) {
	c := rr.c
	if r == nil {
		if r, err = c.Room(ctx, rr.id); err != nil {
			return nil, false, 0, err
		}
	}
	head = r.Head.Seq
	ch := s.chains.get(rr.url)
	ch.mu.Lock()
	err = ch.extend(ctx, c, rr.id, head)
	// A chain that breaks leaves the records before the break verified
	// (item checks each against the chain); one that does not reach the
	// head the host claims, or ends elsewhere, verifies nothing.
	headOK := ch.broken != 0 || int64(len(ch.recHash)) >= head && (head == 0 || ch.recHash[head-1] == r.Head.Hash)
	headWhy := ""
	if !headOK {
		headWhy = "the room's head does not match its verified chain"
	}
	ch.mu.Unlock()
	if err != nil {
		return nil, false, head, err
	}
	raws, more, err := c.RawEvents(ctx, rr.id, after, limit)
	if err != nil {
		return nil, false, head, err
	}
	sealed := false
	if mode, err := c.Confidentiality(ctx, rr.id); err == nil && mode == seal.MemberOnly {
		sealed = true
	}
	budget := maxAnswerBytes
	items = make([]Item, 0, len(raws))
	for i, raw := range raws {
		it := s.item(ctx, rr, ch, raw, sealed)
		if !headOK {
			it.Verified = false
			if it.Note == "" {
				it.Note = headWhy
			}
		}
		budget -= len(it.Content) + 200
		if budget < 0 && i > 0 {
			more = true
			break
		}
		items = append(items, it)
	}
	s.nameItems(ctx, rr, items)
	return items, more, head, nil
}

// item decodes and checks one record.
func (s *Server) item(ctx context.Context, rr roomRef, ch *chain, raw json.RawMessage, sealed bool) Item {
	rec, env, err := record.Parse(raw)
	if err != nil {
		it := lenientItem(raw)
		it.Note = "does not verify: " + err.Error()
		return it
	}
	ev := env.Event
	it := Item{Seq: rec.Seq, Author: string(ev.Actor), Type: ev.Type, Mentions: ev.Mentions, Hash: env.Hash, CreatedAt: ev.CreatedAt}
	if it.Mentions == nil {
		it.Mentions = []string{}
	}
	ch.mu.Lock()
	it.Verified = rec.Seq >= 1 && rec.Seq <= int64(len(ch.recHash)) && ch.recHash[rec.Seq-1] == rec.Hash
	if !it.Verified {
		it.Note = "not on the verified chain"
		if ch.broken != 0 && rec.Seq >= ch.broken {
			it.Note = fmt.Sprintf("the chain fails at seq %d: %s", ch.broken, ch.whyBroke)
		}
	}
	refSeq := func(h string) *int64 {
		if q, ok := ch.evSeq[h]; ok {
			return &q
		}
		return nil
	}
	ch.mu.Unlock()
	content := string(ev.Payload)
	if ev.Type == "message.create" {
		var p struct {
			ContentType string          `json:"content_type"`
			Content     json.RawMessage `json:"content"`
			References  []string        `json:"references"`
		}
		_ = json.Unmarshal(ev.Payload, &p)
		content = textOf(p.Content)
		if len(p.References) > 0 {
			it.ReplyTo = refSeq(p.References[0])
		}
		if sealed || p.ContentType == seal.ContentType {
			it.Sealed = p.ContentType == seal.ContentType
			if it.Sealed {
				content = ""
				o, ok, err := rr.c.Open(ctx, rr.id, rec)
				switch {
				case err != nil:
					it.Verified, it.Note = false, "sealed; not opened: "+err.Error()
				case !ok:
					it.Verified, it.Note = false, "sealed; not opened"
				case o.Err != nil:
					it.Verified, it.Note = false, "sealed; not opened: "+o.Err.Error()
				case o.Flag != nil:
					it.Verified, it.Note = false, "sealed event breaks the room's rules: "+o.Flag.Error()
				default:
					if o.Type != "" {
						it.Type, content = o.Type, string(o.Payload)
					} else {
						content = textOf(o.Content)
					}
				}
			}
		}
	} else if ev.Type == "reaction.create" {
		var p struct {
			EventID string `json:"event_id"`
		}
		_ = json.Unmarshal(ev.Payload, &p)
		it.ReplyTo = refSeq(p.EventID)
	}
	it.Content, it.ContentTruncated = clip(content, maxContentBytes)
	return it
}

// textOf is a JSON string's value, or the JSON itself.
func textOf(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return string(raw)
}

// lenientItem takes what it can from a record that does not verify.
func lenientItem(raw json.RawMessage) Item {
	var r struct {
		Seq      int64 `json:"seq"`
		Envelope struct {
			Event struct {
				Type     string          `json:"type"`
				Actor    string          `json:"actor"`
				Mentions []string        `json:"mentions"`
				Payload  json.RawMessage `json:"payload"`
			} `json:"event"`
		} `json:"envelope"`
	}
	_ = json.Unmarshal(raw, &r)
	ev := r.Envelope.Event
	it := Item{Seq: r.Seq, Author: ev.Actor, Type: ev.Type, Mentions: ev.Mentions}
	if it.Mentions == nil {
		it.Mentions = []string{}
	}
	var p struct {
		Content json.RawMessage `json:"content"`
	}
	_ = json.Unmarshal(ev.Payload, &p)
	c := string(ev.Payload)
	if p.Content != nil {
		c = textOf(p.Content)
	}
	it.Content, it.ContentTruncated = clip(c, maxContentBytes)
	return it
}

// clip bounds s to n bytes on a rune boundary.
func clip(s string, n int) (string, bool) {
	if len(s) <= n {
		return s, false
	}
	s = s[:n]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s, true
}

// eventHashAt returns the event hash of the record at seq (verified).
func (s *Server) eventHashAt(ctx context.Context, rr roomRef, seq int64) (string, error) {
	if seq < 1 {
		return "", errors.New("seq must be at least 1")
	}
	ch := s.chains.get(rr.url)
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if err := ch.extend(ctx, rr.c, rr.id, seq); err != nil {
		return "", err
	}
	if seq > int64(len(ch.evHash)) {
		if ch.broken != 0 && seq >= ch.broken {
			return "", fmt.Errorf("seq %d does not verify: %s", seq, ch.whyBroke)
		}
		return "", fmt.Errorf("the room has no seq %d", seq)
	}
	return ch.evHash[seq-1], nil
}
