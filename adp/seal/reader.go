package seal

import (
	"encoding/json"
	"fmt"
	"sort"

	"github.com/adpnode/adpnode/adp/identity"
	"github.com/adpnode/adpnode/adp/record"
	kroom "github.com/adpnode/adpnode/adp/room"
	"github.com/adpnode/adpnode/adp/types"
)

// KeyFinder returns the member's private key for a published public key,
// or nil when the member no longer holds it.
type KeyFinder func(pub []byte) *PrivateKey

// Reader is a member's view of a member-only room: it folds the verified
// records in seq order (a kernel replay, the seal keys and epochs, and for
// each sealed message the room as it was when it was sent) and opens
// sealed messages and events with the member's keys. The Go client and
// `adpnode verify --key` share it, so both open and check alike. It is not
// safe for concurrent use.
type Reader struct {
	RoomID string
	Member identity.AgentID

	after int64
	// rs replays the room with the kernel, so the members an epoch is
	// wrapped for, and the rules an opened event is checked against, come
	// from signed records, never from what a host says.
	rs        *kroom.State
	replayErr error
	st        RoomState
	epochs    map[int64]*EpochPayload
	epochRecs map[int64]epochRec         // epoch -> its seal.epoch record
	keyPubs   map[int64][]byte           // seq of a seal.key record -> its public key
	keyBy     map[int64]identity.AgentID // seq of a seal.key record -> who published it
	epochKeys map[int64][]byte           // epoch keys this member opened
	bad       map[int64]*BadWrap         // epochs whose wrap for this member is bad
	badOrder  []*BadWrap                 // the same, in the order found
	unchecked []int64                    // epochs folded and not yet given to CheckWraps
	reported  int                        // bad wraps CheckWraps has returned
	sent      map[int64]*SentAs          // seq of a sealed message.create -> the room when it was sent
}

// epochRec is where an epoch was published and by whom.
type epochRec struct {
	seq   int64
	actor identity.AgentID
}

// NewReader starts a reader for member in roomID; packs serves external
// pack documents to the kernel replay (nil: registered packs only).
func NewReader(roomID string, member identity.AgentID, packs types.PackSource) *Reader {
	return &Reader{RoomID: roomID, Member: member,
		rs:     kroom.New(kroom.Config{Limits: kroom.ReplayLimits(), Packs: packs}),
		epochs: map[int64]*EpochPayload{}, epochRecs: map[int64]epochRec{},
		keyPubs: map[int64][]byte{}, keyBy: map[int64]identity.AgentID{},
		epochKeys: map[int64][]byte{}, bad: map[int64]*BadWrap{}, sent: map[int64]*SentAs{}}
}

// After is the seq of the last record folded.
func (r *Reader) After() int64 { return r.after }

// State is the folded keys and current epoch.
func (r *Reader) State() *RoomState { return &r.st }

// Registry is the room's type registry after the last folded record (nil
// once the replay failed).
func (r *Reader) Registry() *types.Registry {
	if r.replayErr != nil {
		return nil
	}
	return r.rs.Registry
}

// Active lists the room's active members by the kernel's replay.
func (r *Reader) Active() ([]identity.AgentID, error) {
	if r.replayErr != nil {
		return nil, r.replayErr
	}
	ms := r.rs.Members()
	out := make([]identity.AgentID, len(ms))
	for i, m := range ms {
		out[i] = m.Agent
	}
	return out, nil
}

// Fold applies the records with seq above After, in order.
func (r *Reader) Fold(recs []*record.Record) {
	for _, rec := range recs {
		if rec.Seq <= r.after {
			continue
		}
		r.after = rec.Seq
		env, err := identity.ParseEnvelope(rec.Envelope)
		if err != nil {
			if r.replayErr == nil {
				r.replayErr = fmt.Errorf("record %d of the room does not parse: %w", rec.Seq, err)
			}
			continue
		}
		ev := &env.Event
		if r.replayErr == nil {
			if ev.Type == "message.create" && isSealedPayload(ev.Payload) {
				sa := &SentAs{Registry: r.rs.Registry, Creator: ev.Actor == r.rs.Creator}
				if m, ok := r.rs.Member(ev.Actor); ok {
					sa.Role = m.Role
				}
				r.sent[rec.Seq] = sa
			}
			if err := r.rs.Apply(rec, env, nil); err != nil {
				r.replayErr = fmt.Errorf("record %d of the room does not replay: %w", rec.Seq, err)
			}
		}
		switch ev.Type {
		case TypeKey:
			if pub, err := ParseKey(ev.Payload); err == nil {
				r.keyPubs[rec.Seq] = pub
				r.keyBy[rec.Seq] = ev.Actor
			}
		case TypeEpoch:
			if p, err := ParseEpoch(ev.Payload); err == nil {
				if r.epochs[p.Epoch] != nil {
					// A chain only a hostile host serves may repeat an
					// epoch number: the later record is the one read.
					delete(r.epochKeys, p.Epoch)
					delete(r.bad, p.Epoch)
				}
				r.epochs[p.Epoch] = p
				r.epochRecs[p.Epoch] = epochRec{seq: rec.Seq, actor: ev.Actor}
				r.unchecked = append(r.unchecked, p.Epoch)
			}
		}
		r.st.Apply(rec.Seq, ev.Actor, ev.Type, ev.Payload)
	}
}

func isSealedPayload(payload []byte) bool {
	var p struct {
		ContentType string `json:"content_type"`
	}
	return json.Unmarshal(payload, &p) == nil && p.ContentType == ContentType
}

// SetEpochKey remembers an epoch key this member made (its own rotation).
func (r *Reader) SetEpochKey(epoch int64, key []byte) { r.epochKeys[epoch] = key }

// EpochKey opens this member's wrap of an epoch (cached). A wrap that
// names a sealing key this member holds and still does not give it the
// epoch key is a *BadWrap (which wraps ErrOpen); a wrap for a key the
// member does not hold (lost, or kept by another process) is only ErrOpen:
// an honest wrap is never reported as bad.
func (r *Reader) EpochKey(epoch int64, find KeyFinder) ([]byte, error) {
	if key, ok := r.epochKeys[epoch]; ok {
		return key, nil
	}
	if b := r.bad[epoch]; b != nil {
		return nil, b
	}
	p := r.epochs[epoch]
	if p == nil {
		return nil, fmt.Errorf("epoch %d is not in the room: %w", epoch, ErrOpen)
	}
	var mine *Wrap
	for i := range p.Wraps {
		if p.Wraps[i].Member == r.Member {
			mine = &p.Wraps[i]
		}
	}
	if mine == nil {
		return nil, fmt.Errorf("epoch %d was not wrapped for this agent: %w", epoch, ErrOpen)
	}
	at := r.epochRecs[epoch]
	bad := func(why string) error {
		b := &BadWrap{Epoch: epoch, Seq: at.seq, Wrapper: at.actor, Member: r.Member, KeySeq: mine.KeySeq, Reason: why}
		r.bad[epoch] = b
		r.badOrder = append(r.badOrder, b)
		return b
	}
	// Only a seal.key this member signed before the epoch can be the key
	// a wrap is for; the wrapper signed key_seq, so a wrong one is its own.
	if r.keyBy[mine.KeySeq] != r.Member || mine.KeySeq >= at.seq {
		return nil, bad(fmt.Sprintf("names key_seq %d, which is not a seal.key of this member published before the epoch", mine.KeySeq))
	}
	pub := r.keyPubs[mine.KeySeq]
	var priv *PrivateKey
	if find != nil {
		priv = find(pub)
	}
	if priv == nil {
		return nil, fmt.Errorf("epoch %d was wrapped for a sealing key this agent does not hold: %w", epoch, ErrOpen)
	}
	commit, err := identity.DecodeB64Len(p.Commit, CommitSize)
	if err != nil {
		return nil, bad("carries a malformed commitment")
	}
	w, err := identity.DecodeB64Len(mine.Wrap, WrapSize)
	if err != nil {
		return nil, bad(errWrapOpen.Error())
	}
	key, err := priv.unwrap(w, r.RoomID, epoch, string(r.Member), commit)
	if err != nil {
		return nil, bad(fmt.Sprintf("%v (key_seq %d)", err, mine.KeySeq))
	}
	r.epochKeys[epoch] = key
	return key, nil
}

// BadWrap is a wrap addressed to a member that does not give it the epoch
// key although the member holds the sealing key the wrap names: it does not
// open, or it opens to a key other than the one the epoch commits to (the
// wrapper gave members different keys), or it names a key_seq that is not
// a seal.key of the member. Wrapper signed the seal.epoch record (at Seq),
// so who sent it is certain; that the wrap is junk only the member can
// check, with its private sealing key (docs/sealed-rooms.md).
type BadWrap struct {
	Epoch   int64
	Seq     int64            // seq of the seal.epoch record
	Wrapper identity.AgentID // the agent that signed it
	Member  identity.AgentID // the member the wrap is addressed to
	KeySeq  int64            // the key_seq the wrap names
	Reason  string
}

func (b *BadWrap) Error() string {
	return fmt.Sprintf("bad epoch key wrap: epoch %d (seal.epoch at seq %d, signed by %s): the wrap for %s %s",
		b.Epoch, b.Seq, b.Wrapper, b.Member, b.Reason)
}

// Unwrap makes a BadWrap an ErrOpen: the member cannot open the epoch.
func (b *BadWrap) Unwrap() error { return ErrOpen }

// CheckWraps opens this member's wrap in every epoch folded since the last
// call and returns the bad wraps not returned before, in the order found
// (also those found since by opening a message). An epoch with no wrap for
// the member, or one for a key find does not hold, is not bad. With find
// nil it opens nothing and keeps the epochs for a later call. Each epoch
// costs at most one HPKE open, once: the key, or the verdict, is cached.
func (r *Reader) CheckWraps(find KeyFinder) []*BadWrap {
	if find != nil {
		for _, e := range r.unchecked {
			_, _ = r.EpochKey(e, find)
		}
		r.unchecked = r.unchecked[:0]
	}
	out := append([]*BadWrap(nil), r.badOrder[r.reported:]...)
	r.reported = len(r.badOrder)
	return out
}

// PublishedKey is the agent and public key of the seal.key record at seq
// (nil if there is none).
func (r *Reader) PublishedKey(seq int64) (identity.AgentID, []byte) {
	return r.keyBy[seq], r.keyPubs[seq]
}

// EpochsFor lists, in order, the epochs of the room whose wrap for member
// names the seal.key at keySeq: what that key opens here.
func (r *Reader) EpochsFor(member identity.AgentID, keySeq int64) []int64 {
	var out []int64
	for e, p := range r.epochs {
		for _, w := range p.Wraps {
			if w.Member == member && w.KeySeq == keySeq {
				out = append(out, e)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// BadWraps lists every bad wrap for this member found so far (by
// CheckWraps, or by opening a message of the epoch), in the order found.
func (r *Reader) BadWraps() []*BadWrap { return r.badOrder }

// Opened is a message.create as a member reads it. For a sealed custom
// event (content type EventContentType) Type and Payload are the event
// inside, and Flag says why it fails the room's rules, if it does.
type Opened struct {
	Seq       int64
	Hash      string // the event hash of the outer message.create
	Actor     identity.AgentID
	CreatedAt int64 // ms
	Sealed    bool  // the content was sealed
	Epoch     int64 // its epoch (sealed only)

	ContentType string
	Content     json.RawMessage

	Type    string          // the sealed event's type ("" for a message)
	Payload json.RawMessage // the sealed event's payload

	// Err is why a sealed message did not open (ErrOpen wrapped: an epoch
	// this member was not part of, a lost key, tampered bytes).
	Err error
	// Flag is why an opened event must not be used: not {type, payload},
	// a type not declared in the room or not of kind message, a role that
	// could not send it, a payload that fails the type's schema.
	Flag error
}

// Open opens a folded record if it is a message.create (ok false
// otherwise). A record in the clear comes back with Sealed false. A nil
// Reader reads records in the clear and opens nothing.
func (r *Reader) Open(rec *record.Record, find KeyFinder) (Opened, bool) {
	env, err := identity.ParseEnvelope(rec.Envelope)
	if err != nil || env.Event.Type != "message.create" {
		return Opened{}, false
	}
	ev := &env.Event
	var p struct {
		ContentType string          `json:"content_type"`
		Content     json.RawMessage `json:"content"`
	}
	_ = json.Unmarshal(ev.Payload, &p)
	o := Opened{Seq: rec.Seq, Hash: env.Hash, Actor: ev.Actor, CreatedAt: ev.CreatedAt, ContentType: p.ContentType, Content: p.Content}
	if p.ContentType != ContentType {
		return o, true
	}
	o.Sealed = true
	if r == nil {
		o.Err = fmt.Errorf("no member-only view of the room: %w", ErrOpen)
		return o, true
	}
	var s Sealed
	if err := json.Unmarshal(p.Content, &s); err != nil {
		o.Err = ErrOpen
		return o, true
	}
	o.Epoch = s.Epoch
	key, err := r.EpochKey(s.Epoch, find)
	if err != nil {
		o.Err = err
		return o, true
	}
	in, err := OpenMessage(key, r.RoomID, ev.Actor, &s)
	if err != nil {
		o.Err = err
		return o, true
	}
	o.ContentType, o.Content = in.ContentType, in.Content
	if in.ContentType != EventContentType {
		return o, true
	}
	ie, err := ParseInnerEvent(in.Content)
	if err != nil {
		o.Flag = err
		return o, true
	}
	o.Type, o.Payload = ie.Type, ie.Payload
	sa := r.sent[rec.Seq]
	if sa == nil {
		o.Flag = fmt.Errorf("sealed event: the room's state when it was sent is unknown (record %d not folded, or the replay failed)", rec.Seq)
		return o, true
	}
	o.Flag = sa.CheckEvent(ie)
	return o, true
}

// Event is a custom event as a member reads it: in the clear, or sealed
// in a message.create and opened.
type Event struct {
	Seq       int64
	Hash      string // the event hash (of the outer message.create when sealed)
	Actor     identity.AgentID
	CreatedAt int64 // ms
	Type      string
	Payload   json.RawMessage
	Sealed    bool
	Epoch     int64
	// Flag is why a sealed event fails the room's rules (Opened.Flag);
	// readers show it as flagged and never use it as valid.
	Flag error
}

// Events lists the custom (room-defined) events of folded records in seq
// order: those in the clear, and the sealed events r opens with find (r
// nil: in the clear only). unopened counts sealed records that did not
// open. Linear in the records.
func Events(recs []*record.Record, r *Reader, find KeyFinder) (evs []Event, unopened int) {
	for _, rec := range recs {
		env, err := identity.ParseEnvelope(rec.Envelope)
		if err != nil {
			continue
		}
		ev := &env.Event
		if ev.Type != "message.create" {
			if !types.IsBuiltin(ev.Type) {
				evs = append(evs, Event{Seq: rec.Seq, Hash: env.Hash, Actor: ev.Actor, CreatedAt: ev.CreatedAt, Type: ev.Type, Payload: ev.Payload})
			}
			continue
		}
		if !isSealedPayload(ev.Payload) {
			continue
		}
		o, _ := r.Open(rec, find)
		switch {
		case o.Err != nil:
			unopened++
		case o.ContentType == EventContentType:
			evs = append(evs, Event{Seq: o.Seq, Hash: o.Hash, Actor: o.Actor, CreatedAt: o.CreatedAt,
				Type: o.Type, Payload: o.Payload, Sealed: true, Epoch: o.Epoch, Flag: o.Flag})
		}
	}
	return evs, unopened
}
