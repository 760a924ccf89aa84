package client

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/adpnode/adpnode/adp/identity"
	"github.com/adpnode/adpnode/adp/record"
	"github.com/adpnode/adpnode/adp/room"
	"github.com/adpnode/adpnode/adp/types"
	"github.com/adpnode/adpnode/seal"
)

// Member-only rooms (docs/sealed-rooms.md): the client publishes its
// X25519 key, rotates the epoch when membership or keys changed, seals
// message content under the current epoch key and opens what it reads.
// The host sees only ciphertext.

// sealedView is what the client folded from a member-only room's records.
type sealedView struct {
	mode  string
	after int64 // records folded: seq <= after
	// rs replays the room with the kernel from the verified records, so
	// the members an epoch is wrapped for come from signed records and the
	// kernel's rules, never from what the host says (GET .../members).
	rs        *room.State
	replayErr error // the first record the kernel refused, if any
	st        seal.RoomState
	epochs    map[int64]*seal.EpochPayload
	keyPubs   map[int64][]byte // seq of a seal.key record -> its public key
	epochKeys map[int64][]byte // epoch keys this agent opened
}

// SealedRoomPayload turns a room.create payload (any JSON object value)
// into a member-only one: policy.extra.confidentiality and the seal.key /
// seal.epoch types, keeping every other field and declaration.
func SealedRoomPayload(payload any) (map[string]json.RawMessage, error) {
	var out map[string]json.RawMessage
	if err := remarshal(payload, &out); err != nil || out == nil {
		return nil, fmt.Errorf("room.create payload must be a JSON object: %v", err)
	}
	var policy map[string]json.RawMessage
	if raw, ok := out["policy"]; ok {
		if err := json.Unmarshal(raw, &policy); err != nil {
			return nil, fmt.Errorf("policy must be a JSON object: %w", err)
		}
	}
	if policy == nil {
		policy = map[string]json.RawMessage{}
	}
	var extra map[string]json.RawMessage
	if raw, ok := policy["extra"]; ok {
		if err := json.Unmarshal(raw, &extra); err != nil {
			return nil, fmt.Errorf("policy.extra must be a JSON object: %w", err)
		}
	}
	if extra == nil {
		extra = map[string]json.RawMessage{}
	}
	extra[seal.ExtraKey], _ = json.Marshal(seal.MemberOnly)
	policy["extra"], _ = json.Marshal(extra)
	out["policy"], _ = json.Marshal(policy)
	var types []json.RawMessage
	if raw, ok := out["types"]; ok {
		if err := json.Unmarshal(raw, &types); err != nil {
			return nil, fmt.Errorf("types must be an array: %w", err)
		}
	}
	types = append(types, seal.TypeDeclarations()...)
	out["types"], _ = json.Marshal(types)
	return out, nil
}

func remarshal(in, out any) error {
	b, err := json.Marshal(in)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, out)
}

// CreateSealedRoom creates a member-only room and publishes the creator's
// sealing key in it.
func (c *Client) CreateSealedRoom(ctx context.Context, payload any) (*Created, error) {
	p, err := SealedRoomPayload(payload)
	if err != nil {
		return nil, err
	}
	cr, err := c.CreateRoom(ctx, p)
	if err != nil {
		return nil, err
	}
	if _, err := c.PublishSealKey(ctx, cr.ID); err != nil {
		return cr, fmt.Errorf("room %s created; publishing the sealing key failed: %w", cr.ID, err)
	}
	return cr, nil
}

func (c *Client) sealKeys() (*SealKeys, error) {
	c.sealMu.Lock()
	defer c.sealMu.Unlock()
	if c.Seal == nil {
		var k *SealKeys
		var err error
		if c.SealPath != "" {
			k, err = LoadOrCreateSealKeys(c.SealPath, c.Key.ID)
		} else {
			k, err = NewSealKeys()
		}
		if err != nil {
			return nil, err
		}
		c.Seal = k
	}
	return c.Seal, nil
}

// RotateSealKey makes a new X25519 key (the old ones are kept, to open
// the epochs they were given) and publishes it in roomID; the next sender
// starts an epoch for it. Use it after losing or leaking a sealing key.
func (c *Client) RotateSealKey(ctx context.Context, roomID string) (*record.Record, error) {
	k, err := c.sealKeys()
	if err != nil {
		return nil, err
	}
	if err := k.Rotate(c.Key.ID); err != nil {
		return nil, err
	}
	return c.PublishSealKey(ctx, roomID)
}

// PublishSealKey posts this agent's current X25519 public key (seal.key)
// in a room; its signature binds the key to the Agent ID.
func (c *Client) PublishSealKey(ctx context.Context, roomID string) (*record.Record, error) {
	k, err := c.sealKeys()
	if err != nil {
		return nil, err
	}
	payload := seal.KeyPayload{PublicKey: identity.EncodeB64(k.Public())}
	return c.Post(ctx, roomID, 5, func(*Room, []*record.Record) (string, any, error) { return seal.TypeKey, payload, nil })
}

// Confidentiality reads a room's policy.extra.confidentiality (fixed at
// creation, so it is asked once per room).
func (c *Client) Confidentiality(ctx context.Context, roomID string) (string, error) {
	c.sealMu.Lock()
	v := c.sealRooms[roomID]
	c.sealMu.Unlock()
	if v != nil {
		return v.mode, nil
	}
	r, err := c.Room(ctx, roomID)
	if err != nil {
		return "", err
	}
	var res struct {
		Policy struct {
			Extra json.RawMessage `json:"extra"`
		} `json:"policy"`
	}
	_ = json.Unmarshal(r.Raw, &res)
	mode, err := seal.ModeOf(res.Policy.Extra)
	if err != nil {
		return "", err
	}
	c.sealMu.Lock()
	defer c.sealMu.Unlock()
	if c.sealRooms == nil {
		c.sealRooms = map[string]*sealedView{}
	}
	if c.sealRooms[roomID] == nil {
		c.sealRooms[roomID] = &sealedView{mode: mode, epochs: map[int64]*seal.EpochPayload{},
			keyPubs: map[int64][]byte{}, epochKeys: map[int64][]byte{}}
	}
	return mode, nil
}

// foldLocked folds records into v (sealMu held).
func (v *sealedView) foldLocked(recs []*record.Record, packs types.PackSource) {
	if v.rs == nil {
		v.rs = room.New(room.Config{Limits: room.ReplayLimits(), Packs: packs})
	}
	for _, rec := range recs {
		if rec.Seq <= v.after {
			continue
		}
		v.after = rec.Seq
		if v.replayErr == nil {
			env, err := identity.ParseEnvelope(rec.Envelope)
			if err == nil {
				err = v.rs.Apply(rec, env, nil)
			}
			if err != nil {
				v.replayErr = fmt.Errorf("record %d of the room does not replay: %w", rec.Seq, err)
			}
		}
		var env struct {
			Event struct {
				Type    string           `json:"type"`
				Actor   identity.AgentID `json:"actor"`
				Payload json.RawMessage  `json:"payload"`
			} `json:"event"`
		}
		if json.Unmarshal(rec.Envelope, &env) != nil {
			continue
		}
		ev := env.Event
		switch ev.Type {
		case seal.TypeKey:
			if pub, err := seal.ParseKey(ev.Payload); err == nil {
				v.keyPubs[rec.Seq] = pub
			}
		case seal.TypeEpoch:
			if p, err := seal.ParseEpoch(ev.Payload); err == nil {
				v.epochs[p.Epoch] = p
			}
		}
		v.st.Apply(rec.Seq, ev.Actor, ev.Type, ev.Payload)
	}
}

// refresh reads the records the view has not folded yet.
func (c *Client) sealRefresh(ctx context.Context, roomID string) (*sealedView, error) {
	if _, err := c.Confidentiality(ctx, roomID); err != nil {
		return nil, err
	}
	c.sealMu.Lock()
	after := c.sealRooms[roomID].after
	c.sealMu.Unlock()
	recs, err := c.History(ctx, roomID, after)
	if err != nil {
		return nil, err
	}
	c.sealMu.Lock()
	defer c.sealMu.Unlock()
	v := c.sealRooms[roomID]
	v.foldLocked(recs, clientPacks{c})
	return v, nil
}

// epochKey opens this agent's wrap of an epoch (cached).
func (c *Client) epochKey(roomID string, v *sealedView, epoch int64) ([]byte, error) {
	c.sealMu.Lock()
	key, ok := v.epochKeys[epoch]
	p := v.epochs[epoch]
	var pub []byte
	if p != nil {
		for _, w := range p.Wraps {
			if w.Member == c.Key.ID {
				pub = v.keyPubs[w.KeySeq]
			}
		}
	}
	c.sealMu.Unlock()
	if ok {
		return key, nil
	}
	if p == nil {
		return nil, fmt.Errorf("epoch %d is not in the room: %w", epoch, seal.ErrOpen)
	}
	if pub == nil {
		return nil, fmt.Errorf("epoch %d was not wrapped for this agent: %w", epoch, seal.ErrOpen)
	}
	ks, err := c.sealKeys()
	if err != nil {
		return nil, err
	}
	priv := ks.find(pub)
	if priv == nil {
		return nil, fmt.Errorf("epoch %d was wrapped for a sealing key this agent no longer holds: %w", epoch, seal.ErrOpen)
	}
	key, err = seal.OpenEpoch(priv, roomID, c.Key.ID, p)
	if err != nil {
		return nil, fmt.Errorf("epoch %d: %w", epoch, err)
	}
	c.sealMu.Lock()
	v.epochKeys[epoch] = key
	c.sealMu.Unlock()
	return key, nil
}

// activeMembers are the room's active members by the kernel's replay of
// the verified records folded into v (sealMu held).
func (v *sealedView) activeMembersLocked() ([]identity.AgentID, error) {
	if v.replayErr != nil {
		return nil, v.replayErr
	}
	ms := v.rs.Members()
	out := make([]identity.AgentID, len(ms))
	for i, m := range ms {
		out[i] = m.Agent
	}
	return out, nil
}

// clientPacks serves external pack documents to the client's replay: it
// fetches the pack's URI; the kernel checks the digest.
type clientPacks struct{ c *Client }

func (p clientPacks) ExternalPack(uri, digest string) ([]byte, error) {
	resp, err := p.c.HTTP.Get(uri)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", uri, resp.Status)
	}
	return io.ReadAll(io.LimitReader(resp.Body, 1<<20))
}

// sealReason is the data.reason of a member-only refusal that a re-read
// and a new epoch may cure.
func sealReason(err error) bool {
	var e *Error
	if !errors.As(err, &e) {
		return false
	}
	switch e.Data["reason"] {
	case "seal_epoch_stale", "seal_wraps_mismatch", "seal_rotation_required", "seal_key_required":
		return true
	}
	return false
}

// RotateEpoch publishes a new epoch for the room's active members with
// published keys if the current one does not cover exactly them (or
// always, with force). It returns the current epoch afterwards.
func (c *Client) RotateEpoch(ctx context.Context, roomID string, force bool) (int64, error) {
	var lastErr error
	for attempt := 0; attempt < 5; attempt++ {
		v, err := c.sealRefresh(ctx, roomID)
		if err != nil {
			return 0, err
		}
		if v.mode != seal.MemberOnly {
			return 0, fmt.Errorf("room %s is not member-only", roomID)
		}
		ks, err := c.sealKeys()
		if err != nil {
			return 0, err
		}
		c.sealMu.Lock()
		mine, published := v.st.Keys[c.Key.ID]
		c.sealMu.Unlock()
		if !published || !bytes.Equal(mine.Public, ks.Public()) {
			if _, err := c.PublishSealKey(ctx, roomID); err != nil {
				return 0, err
			}
			continue
		}
		c.sealMu.Lock()
		active, err := v.activeMembersLocked()
		fresh, cur, to := v.st.Fresh(active), v.st.Epoch, v.st.Recipients(active)
		c.sealMu.Unlock()
		if err != nil {
			return 0, err
		}
		if fresh && !force {
			return cur, nil
		}
		p, key, err := seal.NewEpoch(rand.Reader, roomID, cur+1, to)
		if err != nil {
			return 0, err
		}
		_, err = c.Post(ctx, roomID, 5, func(*Room, []*record.Record) (string, any, error) { return seal.TypeEpoch, p, nil })
		if err == nil {
			c.sealMu.Lock()
			v.epochKeys[p.Epoch] = key
			c.sealMu.Unlock()
			force = false
			continue // fold the new epoch and check again
		}
		if !sealReason(err) {
			return 0, err
		}
		lastErr = err
	}
	return 0, fmt.Errorf("could not settle the room's epoch: %w", lastErr)
}

// SendSealed seals content under the room's current epoch (rotating first
// when membership or keys changed) and posts it as message.create.
func (c *Client) SendSealed(ctx context.Context, roomID, contentType string, content any, references ...string) (*record.Record, error) {
	return c.SendSealedMentions(ctx, roomID, nil, contentType, content, references...)
}

// SendSealedMentions is SendSealed with event.mentions (which, like
// references, stay in the clear for the host's attention features).
func (c *Client) SendSealedMentions(ctx context.Context, roomID string, mentions []identity.AgentID, contentType string, content any, references ...string) (*record.Record, error) {
	raw, err := json.Marshal(content)
	if err != nil {
		return nil, err
	}
	inner := seal.Inner{ContentType: contentType, Content: raw}
	var lastErr error
	for attempt := 0; attempt < 5; attempt++ {
		epoch, err := c.RotateEpoch(ctx, roomID, false)
		if err != nil {
			return nil, err
		}
		v, err := c.sealRefresh(ctx, roomID)
		if err != nil {
			return nil, err
		}
		key, err := c.epochKey(roomID, v, epoch)
		if err != nil {
			return nil, err
		}
		rec, err := c.PostMentions(ctx, roomID, 10, mentions, func(*Room, []*record.Record) (string, any, error) {
			p, err := seal.SealMessage(rand.Reader, key, roomID, epoch, c.Key.ID, inner)
			if err != nil {
				return "", nil, err
			}
			p.References = references
			return "message.create", p, nil
		})
		if err == nil || !sealReason(err) {
			return rec, err
		}
		lastErr = err // the epoch moved under us: settle it again
	}
	return nil, fmt.Errorf("gave up sealing: %w", lastErr)
}

// Opened is a message.create as a member reads it.
type Opened struct {
	Seq         int64
	Actor       identity.AgentID
	Sealed      bool  // the content was sealed
	Epoch       int64 // its epoch (sealed only)
	ContentType string
	Content     json.RawMessage
	// Err is why a sealed message did not open (seal.ErrOpen wrapped: an
	// epoch this agent was not part of, a lost key, tampered bytes).
	Err error
}

// Messages reads the room's message.create records with seq > after and
// opens the sealed ones it can.
func (c *Client) Messages(ctx context.Context, roomID string, after int64) ([]Opened, error) {
	recs, err := c.History(ctx, roomID, after)
	if err != nil {
		return nil, err
	}
	mode, err := c.Confidentiality(ctx, roomID)
	if err != nil {
		return nil, err
	}
	var v *sealedView
	if mode == seal.MemberOnly {
		if v, err = c.sealRefresh(ctx, roomID); err != nil {
			return nil, err
		}
	}
	var out []Opened
	for _, rec := range recs {
		o, ok := c.open(roomID, v, rec)
		if ok {
			out = append(out, o)
		}
	}
	return out, nil
}

// Open opens one record if it is a message.create (ok false otherwise).
// Call after the room's history up to the record was read (Messages does).
func (c *Client) Open(ctx context.Context, roomID string, rec *record.Record) (Opened, bool, error) {
	mode, err := c.Confidentiality(ctx, roomID)
	if err != nil {
		return Opened{}, false, err
	}
	var v *sealedView
	if mode == seal.MemberOnly {
		if v, err = c.sealRefresh(ctx, roomID); err != nil {
			return Opened{}, false, err
		}
	}
	o, ok := c.open(roomID, v, rec)
	return o, ok, nil
}

func (c *Client) open(roomID string, v *sealedView, rec *record.Record) (Opened, bool) {
	var env struct {
		Event struct {
			Type    string           `json:"type"`
			Actor   identity.AgentID `json:"actor"`
			Payload struct {
				ContentType string          `json:"content_type"`
				Content     json.RawMessage `json:"content"`
			} `json:"payload"`
		} `json:"event"`
	}
	if json.Unmarshal(rec.Envelope, &env) != nil || env.Event.Type != "message.create" {
		return Opened{}, false
	}
	ev := env.Event
	o := Opened{Seq: rec.Seq, Actor: ev.Actor, ContentType: ev.Payload.ContentType, Content: ev.Payload.Content}
	if ev.Payload.ContentType != seal.ContentType || v == nil {
		return o, true
	}
	o.Sealed = true
	var s seal.Sealed
	if err := json.Unmarshal(ev.Payload.Content, &s); err != nil {
		o.Err = seal.ErrOpen
		return o, true
	}
	o.Epoch = s.Epoch
	key, err := c.epochKey(roomID, v, s.Epoch)
	if err != nil {
		o.Err = err
		return o, true
	}
	in, err := seal.OpenMessage(key, roomID, ev.Actor, &s)
	if err != nil {
		o.Err = err
		return o, true
	}
	o.ContentType, o.Content = in.ContentType, in.Content
	return o, true
}

// Message posts a message.create, re-deciding nothing on head races (the
// same content is re-signed on the new head). In a member-only room the
// content is sealed (SendSealed).
func (c *Client) Message(ctx context.Context, roomID, contentType, content string) (*record.Record, error) {
	mode, err := c.Confidentiality(ctx, roomID)
	if err != nil {
		return nil, err
	}
	if mode == seal.MemberOnly {
		return c.SendSealed(ctx, roomID, contentType, content)
	}
	return c.Post(ctx, roomID, 10, func(*Room, []*record.Record) (string, any, error) {
		return "message.create", map[string]any{"content_type": contentType, "content": content}, nil
	})
}
