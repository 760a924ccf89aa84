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
	"os"

	"github.com/adpnode/adpnode/adp/identity"
	"github.com/adpnode/adpnode/adp/record"
	"github.com/adpnode/adpnode/adp/seal"
	"github.com/adpnode/adpnode/adp/types"
)

// Member-only rooms (docs/sealed-rooms.md): the client publishes its
// X25519 key, rotates the epoch when membership or keys changed, seals
// message content under the current epoch key and opens what it reads.
// The host sees only ciphertext.

// sealedView is what the client folded from a member-only room's records
// (the shared seal.Reader: kernel replay, keys, epochs, and the room as it
// was at each sealed message). Guarded by Client.sealMu.
type sealedView struct {
	mode string
	rd   *seal.Reader // nil until the first refresh
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

// readSealKeys returns the agent's sealing keys for reading only: those in
// memory, or the file at SealPath if it exists. A read never makes a key
// or a file (nil, nil: this agent holds no sealing key, and opens
// nothing), so reading a room as a non-member leaves no trace on disk.
func (c *Client) readSealKeys() (*SealKeys, error) {
	c.sealMu.Lock()
	defer c.sealMu.Unlock()
	if c.Seal != nil {
		return c.Seal, nil
	}
	if c.SealPath == "" {
		return nil, nil
	}
	k, err := LoadSealKeys(c.SealPath, c.Key.ID)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	c.Seal = k
	return k, nil
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
		c.sealRooms[roomID] = &sealedView{mode: mode}
	}
	return mode, nil
}

// sealRefresh reads the records the view has not folded yet and checks
// this agent's wraps in the epochs among them (checkWraps).
func (c *Client) sealRefresh(ctx context.Context, roomID string) (*sealedView, error) {
	v, err := c.sealFold(ctx, roomID)
	if err != nil {
		return nil, err
	}
	if c.checkWraps(ctx, roomID, v) {
		// This client started an epoch: fold it before going on.
		if v, err = c.sealFold(ctx, roomID); err != nil {
			return nil, err
		}
	}
	return v, nil
}

// MaxBadWrapRecoveries bounds the epochs a client starts on its own to
// replace epochs whose wrap for it is bad, per wrapper and room: the
// wrapper's bad wraps are counted in the room's records, so the bound
// holds across restarts of the client, and a member that keeps sending
// junk cannot make it rotate without end. Past it the client reports the
// bad wrap and leaves the epoch: a moderator removes the wrapper, or the
// member runs adpnode seal rotate --force.
const MaxBadWrapRecoveries = 3

// BadWrapReport is a bad epoch key wrap (seal.BadWrap) this client found
// addressed to its agent, and what it did about it.
type BadWrapReport struct {
	Room string
	Bad  *seal.BadWrap
	// Recovered is the epoch this client started to replace the bad one;
	// 0 when it started none: a later epoch had replaced it already
	// (Err nil), or the bound was reached or the rotation failed (Err).
	Recovered int64
	Err       error
}

// checkWraps opens this agent's wrap in every epoch folded since the last
// check, and for each bad one in the current epoch starts a new epoch,
// within MaxBadWrapRecoveries for its wrapper. Each bad wrap is reported
// once (OnBadWrap). It reports whether it started an epoch. It reads keys
// only (readSealKeys): an agent without sealing keys checks nothing.
func (c *Client) checkWraps(ctx context.Context, roomID string, v *sealedView) bool {
	ks, err := c.readSealKeys()
	if err != nil || ks == nil {
		return false
	}
	c.sealMu.Lock()
	bads := v.rd.CheckWraps(ks.Find)
	cur := v.rd.State().Epoch
	count := map[identity.AgentID]int{}
	for _, b := range v.rd.BadWraps() {
		count[b.Wrapper]++
	}
	c.sealMu.Unlock()
	started := false
	for _, b := range bads {
		rep := BadWrapReport{Room: roomID, Bad: b}
		switch {
		case b.Epoch != cur:
			// A later epoch replaced it already.
		case count[b.Wrapper] > MaxBadWrapRecoveries:
			rep.Err = fmt.Errorf("%s has sent this agent %d bad wraps in room %s; not starting another epoch for it (have a moderator remove it, or run adpnode seal rotate --force)",
				b.Wrapper, count[b.Wrapper], roomID)
		default:
			rep.Recovered, rep.Err = c.replaceEpoch(ctx, roomID, v, b.Epoch)
			started = started || rep.Recovered != 0
		}
		if c.OnBadWrap != nil {
			c.OnBadWrap(rep)
		}
	}
	return started
}

// replaceEpoch starts the epoch after bad for the room's active members
// with keys, unless another member has replaced bad already (then 0).
// Several victims of one bad wrap race like any two rotations: the host
// takes the first, and the others find the epoch replaced.
func (c *Client) replaceEpoch(ctx context.Context, roomID string, v *sealedView, bad int64) (int64, error) {
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		if _, err := c.sealFold(ctx, roomID); err != nil {
			return 0, err
		}
		c.sealMu.Lock()
		active, err := v.rd.Active()
		st := v.rd.State()
		cur, to := st.Epoch, st.Recipients(active)
		c.sealMu.Unlock()
		if err != nil {
			return 0, err
		}
		if cur != bad {
			return 0, nil
		}
		p, key, err := seal.NewEpoch(rand.Reader, roomID, cur+1, to)
		if err != nil {
			return 0, err
		}
		_, err = c.Post(ctx, roomID, 5, func(*Room, []*record.Record) (string, any, error) { return seal.TypeEpoch, p, nil })
		if err == nil {
			c.sealMu.Lock()
			v.rd.SetEpochKey(p.Epoch, key)
			c.sealMu.Unlock()
			return p.Epoch, nil
		}
		if !sealReason(err) {
			return 0, err
		}
		lastErr = err
	}
	return 0, fmt.Errorf("could not replace epoch %d: %w", bad, lastErr)
}

// BadWraps reads a member-only room and lists the bad epoch key wraps
// addressed to this agent in it (seal.BadWrap), in the order found.
func (c *Client) BadWraps(ctx context.Context, roomID string) ([]*seal.BadWrap, error) {
	v, _, err := c.openView(ctx, roomID)
	if err != nil || v == nil {
		return nil, err
	}
	c.sealMu.Lock()
	defer c.sealMu.Unlock()
	return append([]*seal.BadWrap(nil), v.rd.BadWraps()...), nil
}

// RevealSealKey returns a sealing key file holding only the private key
// that the bad wrap of epoch names, for others to check with
// adpnode verify --key FILE that the wrap does not open. It refuses while
// that key is still this agent's current sealing key, or its latest
// published one in the room: rotate it first (RotateSealKey), so that the
// file opens past epochs only. It also returns the epochs of this room the
// file opens (all those wrapped for the key); it opens those of any other
// room the key was published in too.
func (c *Client) RevealSealKey(ctx context.Context, roomID string, epoch int64) (file []byte, opens []int64, err error) {
	bads, err := c.BadWraps(ctx, roomID)
	if err != nil {
		return nil, nil, err
	}
	var bad *seal.BadWrap
	for _, b := range bads {
		if b.Epoch == epoch {
			bad = b
		}
	}
	if bad == nil {
		return nil, nil, fmt.Errorf("no bad wrap for this agent in epoch %d of room %s", epoch, roomID)
	}
	ks, err := c.readSealKeys()
	if err != nil || ks == nil {
		return nil, nil, fmt.Errorf("no sealing keys: %v", err)
	}
	c.sealMu.Lock()
	v := c.sealRooms[roomID]
	by, pub := v.rd.PublishedKey(bad.KeySeq)
	latest := v.rd.State().Keys[c.Key.ID]
	opens = v.rd.EpochsFor(c.Key.ID, bad.KeySeq)
	c.sealMu.Unlock()
	if by != c.Key.ID || pub == nil {
		return nil, nil, fmt.Errorf("the wrap names key_seq %d, which is not a sealing key of this agent: the record alone shows it, no key needs revealing", bad.KeySeq)
	}
	if latest.Seq == bad.KeySeq || bytes.Equal(pub, ks.Public()) {
		return nil, nil, fmt.Errorf("key_seq %d is still this agent's sealing key in room %s: make a new one first (adpnode seal key --new), so that what you reveal opens past epochs only", bad.KeySeq, roomID)
	}
	file, err = ks.ExportKey(c.Key.ID, pub)
	return file, opens, err
}

// sealFold reads the records the view has not folded yet.
func (c *Client) sealFold(ctx context.Context, roomID string) (*sealedView, error) {
	if _, err := c.Confidentiality(ctx, roomID); err != nil {
		return nil, err
	}
	c.sealMu.Lock()
	v := c.sealRooms[roomID]
	if v.rd == nil {
		v.rd = seal.NewReader(roomID, c.Key.ID, clientPacks{c})
	}
	after := v.rd.After()
	c.sealMu.Unlock()
	recs, err := c.History(ctx, roomID, after)
	if err != nil {
		return nil, err
	}
	c.sealMu.Lock()
	defer c.sealMu.Unlock()
	v.rd.Fold(recs)
	return v, nil
}

// epochKey opens this agent's wrap of an epoch (cached in the reader).
func (c *Client) epochKey(v *sealedView, epoch int64) ([]byte, error) {
	ks, err := c.sealKeys()
	if err != nil {
		return nil, err
	}
	c.sealMu.Lock()
	defer c.sealMu.Unlock()
	return v.rd.EpochKey(epoch, ks.Find)
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
		mine, published := v.rd.State().Keys[c.Key.ID]
		c.sealMu.Unlock()
		if !published || !bytes.Equal(mine.Public, ks.Public()) {
			if _, err := c.PublishSealKey(ctx, roomID); err != nil {
				return 0, err
			}
			continue
		}
		c.sealMu.Lock()
		active, err := v.rd.Active()
		st := v.rd.State()
		fresh, cur, to := st.Fresh(active), st.Epoch, st.Recipients(active)
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
			v.rd.SetEpochKey(p.Epoch, key)
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

// Send posts the event decide returns, with the head-retry loop, and is
// the one write path of member-only rooms: there it settles the epoch
// (rotating when membership or keys changed), seals under its key what
// must not reach the host in the clear, posts, and on a refusal that a new
// epoch cures (seal_epoch_stale, seal_rotation_required, ...) settles and
// tries again. What it seals: message.create content, and every custom
// type of kind message (round.turn, deal.receipt, question.create, ...),
// which travels as a sealed message.create whose plaintext is
// {"type", "payload"} (seal.EventContentType). Signals, control and
// built-in events go in the clear. In a hub-trusted room it is PostMentions.
func (c *Client) Send(ctx context.Context, roomID string, attempts int, mentions []identity.AgentID, decide Decide) (*record.Record, error) {
	mode, err := c.Confidentiality(ctx, roomID)
	if err != nil {
		return nil, err
	}
	if mode != seal.MemberOnly {
		return c.PostMentions(ctx, roomID, attempts, mentions, decide)
	}
	// The epoch is settled only once something must be sealed, so a
	// signal (a reaction, a vote) costs no rotation.
	var lastErr error
	need := false
	for attempt := 0; attempt < 5; attempt++ {
		var key []byte
		var epoch int64
		if need {
			if epoch, err = c.RotateEpoch(ctx, roomID, false); err != nil {
				return nil, err
			}
		}
		v, err := c.sealRefresh(ctx, roomID)
		if err != nil {
			return nil, err
		}
		if need {
			if key, err = c.epochKey(v, epoch); err != nil {
				return nil, err
			}
		}
		rec, err := c.PostMentions(ctx, roomID, attempts, mentions, func(r *Room, since []*record.Record) (string, any, error) {
			typ, p, err := decide(r, since)
			if err != nil || !c.mustSeal(v, typ, p) {
				return typ, p, err
			}
			if key == nil {
				return "", nil, errNeedEpoch
			}
			return c.sealFor(roomID, key, epoch, typ, p)
		})
		switch {
		case errors.Is(err, errNeedEpoch):
			need = true
			continue
		case err == nil || !sealReason(err):
			return rec, err
		}
		need, lastErr = true, err // the epoch moved under us: settle it again
	}
	return nil, fmt.Errorf("gave up sealing: %w", lastErr)
}

var errNeedEpoch = errors.New("client: an epoch key is needed")

// mustSeal reports whether a decided event must not reach a member-only
// room's host in the clear: message.create content not sealed yet, or a
// custom type of kind message (by the room's types as the client replayed
// them).
func (c *Client) mustSeal(v *sealedView, typ string, p any) bool {
	if typ == "message.create" {
		if sp, ok := p.(*seal.SealedPayload); ok && sp.ContentType == seal.ContentType {
			return false
		}
		return true
	}
	c.sealMu.Lock()
	defer c.sealMu.Unlock()
	reg := v.rd.Registry()
	if reg == nil {
		// The replay failed: fail closed (the epoch settling that follows
		// reports why) rather than send a custom event in the clear.
		return !types.IsBuiltin(typ)
	}
	return seal.SealsAsEvent(reg, typ)
}

// sealFor turns a decided event into what a member-only room carries.
func (c *Client) sealFor(roomID string, key []byte, epoch int64, typ string, p any) (string, any, error) {
	raw, err := json.Marshal(p)
	if err != nil {
		return "", nil, err
	}
	var inner seal.Inner
	var refs []string
	switch {
	case typ == "message.create":
		var m struct {
			ContentType string          `json:"content_type"`
			Content     json.RawMessage `json:"content"`
			Extra       json.RawMessage `json:"extra,omitempty"`
			References  []string        `json:"references,omitempty"`
		}
		if err := json.Unmarshal(raw, &m); err != nil || m.ContentType == "" {
			return "", nil, fmt.Errorf("message.create payload needs content_type and content")
		}
		if m.ContentType == seal.ContentType {
			return typ, p, nil // sealed by the caller
		}
		inner, refs = seal.Inner{ContentType: m.ContentType, Content: m.Content, Extra: m.Extra}, m.References
	default:
		if inner, err = seal.EventInner(typ, raw); err != nil {
			return "", nil, err
		}
	}
	sp, err := seal.SealMessage(rand.Reader, key, roomID, epoch, c.Key.ID, inner)
	if err != nil {
		return "", nil, err
	}
	sp.References = refs
	return "message.create", sp, nil
}

// SendSealed seals content under the room's current epoch (rotating first
// when membership or keys changed) and posts it as message.create.
func (c *Client) SendSealed(ctx context.Context, roomID, contentType string, content any, references ...string) (*record.Record, error) {
	return c.SendSealedMentions(ctx, roomID, nil, contentType, content, references...)
}

// SendSealedMentions is SendSealed with event.mentions (which, like
// references, stay in the clear for the host's attention features).
func (c *Client) SendSealedMentions(ctx context.Context, roomID string, mentions []identity.AgentID, contentType string, content any, references ...string) (*record.Record, error) {
	if mode, err := c.Confidentiality(ctx, roomID); err != nil {
		return nil, err
	} else if mode != seal.MemberOnly {
		return nil, fmt.Errorf("room %s is not member-only", roomID)
	}
	p := map[string]any{"content_type": contentType, "content": content}
	if len(references) > 0 {
		p["references"] = references
	}
	return c.Send(ctx, roomID, 10, mentions, func(*Room, []*record.Record) (string, any, error) { return "message.create", p, nil })
}

// Opened is a message.create as a member reads it (seal.Opened): opened
// when sealed and this agent holds the epoch key, with the sealed custom
// event inside (Type, Payload) and, when it fails the room's rules, Flag.
type Opened = seal.Opened

// Messages reads the room's message.create records with seq > after and
// opens the sealed ones it can.
func (c *Client) Messages(ctx context.Context, roomID string, after int64) ([]Opened, error) {
	recs, err := c.History(ctx, roomID, after)
	if err != nil {
		return nil, err
	}
	v, find, err := c.openView(ctx, roomID)
	if err != nil {
		return nil, err
	}
	var out []Opened
	for _, rec := range recs {
		if o, ok := c.open(v, find, rec); ok {
			out = append(out, o)
		}
	}
	return out, nil
}

// openView refreshes a member-only room's view (nil for hub-trusted rooms)
// and returns the agent's key finder.
func (c *Client) openView(ctx context.Context, roomID string) (*sealedView, seal.KeyFinder, error) {
	mode, err := c.Confidentiality(ctx, roomID)
	if err != nil || mode != seal.MemberOnly || c.Key == nil {
		return nil, nil, err // no key: a reader sees sealed records unopened
	}
	v, err := c.sealRefresh(ctx, roomID)
	if err != nil {
		return nil, nil, err
	}
	ks, err := c.readSealKeys()
	if err != nil || ks == nil {
		return v, nil, err
	}
	return v, ks.Find, nil
}

// Open opens one record if it is a message.create (ok false otherwise).
// Call after the room's history up to the record was read (Messages does).
func (c *Client) Open(ctx context.Context, roomID string, rec *record.Record) (Opened, bool, error) {
	v, find, err := c.openView(ctx, roomID)
	if err != nil {
		return Opened{}, false, err
	}
	o, ok := c.open(v, find, rec)
	return o, ok, nil
}

func (c *Client) open(v *sealedView, find seal.KeyFinder, rec *record.Record) (Opened, bool) {
	if v == nil {
		// A hub-trusted room: content is read as is.
		return (*seal.Reader)(nil).Open(rec, nil)
	}
	c.sealMu.Lock()
	defer c.sealMu.Unlock()
	return v.rd.Open(rec, find)
}

// CustomEvents reads a room's history and returns its custom events as
// this agent reads them: those in the clear, and in a member-only room the
// sealed ones it opens (seal.Events). unopened counts the sealed records
// it cannot open (epochs it was not given).
func (c *Client) CustomEvents(ctx context.Context, roomID string) (evs []seal.Event, recs []*record.Record, unopened int, err error) {
	recs, err = c.History(ctx, roomID, 0)
	if err != nil {
		return nil, nil, 0, err
	}
	v, find, err := c.openView(ctx, roomID)
	if err != nil {
		return nil, nil, 0, err
	}
	if v == nil {
		evs, unopened = seal.Events(recs, nil, nil)
		return evs, recs, unopened, nil
	}
	c.sealMu.Lock()
	defer c.sealMu.Unlock()
	evs, unopened = seal.Events(recs, v.rd, find)
	return evs, recs, unopened, nil
}

// Message posts a message.create, re-deciding nothing on head races (the
// same content is re-signed on the new head). In a member-only room the
// content is sealed (Send).
func (c *Client) Message(ctx context.Context, roomID, contentType, content string) (*record.Record, error) {
	return c.Send(ctx, roomID, 10, nil, func(*Room, []*record.Record) (string, any, error) {
		return "message.create", map[string]any{"content_type": contentType, "content": content}, nil
	})
}
