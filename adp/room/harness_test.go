package room

import (
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/adpnode/adpnode/adp"
	"github.com/adpnode/adpnode/adp/identity"
	"github.com/adpnode/adpnode/adp/record"
)

// t0 is the harness clock origin (Unix ms).
const t0 int64 = 1_780_000_000_000

const minute = 60_000

// harness drives one room through signed envelopes, like a host would.
type harness struct {
	t     testing.TB
	st    *State
	now   int64
	keys  map[string]ed25519.PrivateKey
	nonce int64
	recs  []*record.Record
	envs  []*identity.Envelope
	jr    fakeRequests
}

type fakeRequests map[string]*JoinRequest

func (f fakeRequests) JoinRequest(id string) (*JoinRequest, bool) { r, ok := f[id]; return r, ok }

func newHarness(t testing.TB) *harness {
	return &harness{t: t, st: New(Config{Limits: DefaultLimits()}), now: t0, keys: map[string]ed25519.PrivateKey{}, jr: fakeRequests{}}
}

func (h *harness) key(name string) ed25519.PrivateKey {
	k, ok := h.keys[name]
	if !ok {
		seed := make([]byte, 32)
		copy(seed, name)
		var err error
		k, err = identity.KeyFromSeed(seed)
		if err != nil {
			h.t.Fatal(err)
		}
		h.keys[name] = k
	}
	return k
}

func (h *harness) id(name string) identity.AgentID {
	return identity.AgentIDFromKey(h.key(name).Public().(ed25519.PublicKey))
}

// opt modifies an event before signing.
type opt func(*identity.Event)

func base(seq int64, hash string) opt {
	return func(e *identity.Event) { e.BaseSeq, e.BaseHash = &seq, &hash }
}

func mentions(m ...string) opt { return func(e *identity.Event) { e.Mentions = m } }

func roomID(id string) opt { return func(e *identity.Event) { e.RoomID = &id } }

func noBase() opt { return func(e *identity.Event) { e.RoomID, e.BaseSeq, e.BaseHash = nil, nil, nil } }

func protocol(p string) opt { return func(e *identity.Event) { e.Protocol = p } }

func rawPayload(s string) opt { return func(e *identity.Event) { e.Payload = json.RawMessage(s) } }

// sign builds a signed envelope by actor. Room events are based on the
// current head unless an opt says otherwise.
func (h *harness) sign(actor, typ string, payload any, opts ...opt) *identity.Envelope {
	h.t.Helper()
	p, err := json.Marshal(payload)
	if err != nil {
		h.t.Fatal(err)
	}
	canon, err := identity.Canonicalize(p)
	if err != nil {
		h.t.Fatal(err)
	}
	h.nonce++
	ev := identity.Event{Protocol: adp.Protocol, Type: typ, Actor: h.id(actor), CreatedAt: h.now, Nonce: h.nonce, Payload: canon}
	if typ != "room.create" {
		id, seq, hash := h.st.ID, h.st.Head.Seq, h.st.Head.Hash
		ev.RoomID, ev.BaseSeq, ev.BaseHash = &id, &seq, &hash
	}
	for _, o := range opts {
		o(&ev)
	}
	env, err := identity.Sign(h.key(actor), ev)
	if err != nil {
		h.t.Fatal(err)
	}
	return env
}

// submit admits and commits an envelope at h.now, as the host would.
func (h *harness) submit(env *identity.Envelope) (*Admission, error) {
	a, err := h.st.Admit(env, h.now, h.jr)
	if err != nil {
		return nil, err
	}
	id := h.st.ID
	if !h.st.Created() {
		id = "d8ftedhpqhsusbg001tg"
	}
	rec := record.New(id, h.st.Seq+1, h.st.LastHash, env, h.now)
	h.st.Commit(a, rec)
	h.recs = append(h.recs, rec)
	h.envs = append(h.envs, env)
	return a, nil
}

func (h *harness) post(actor, typ string, payload any, opts ...opt) error {
	h.t.Helper()
	_, err := h.submit(h.sign(actor, typ, payload, opts...))
	return err
}

func (h *harness) must(actor, typ string, payload any, opts ...opt) {
	h.t.Helper()
	if err := h.post(actor, typ, payload, opts...); err != nil {
		h.t.Fatalf("%s by %s: %v", typ, actor, err)
	}
}

// createPayload is a valid room.create payload starting now, lasting an hour.
func (h *harness) createPayload(vis string) map[string]any {
	return map[string]any{
		"topic": "Review strategy", "visibility": vis,
		"start_time": h.now, "end_time": h.now + 60*minute,
	}
}

// create makes an active room of the given visibility owned by "creator".
func (h *harness) create(vis string, extra map[string]any) {
	h.t.Helper()
	p := h.createPayload(vis)
	for k, v := range extra {
		p[k] = v
	}
	h.must("creator", "room.create", p)
}

func (h *harness) join(name string, role adp.Role) {
	h.t.Helper()
	h.must(name, "room.join", map[string]any{"role": role})
}

func (h *harness) headHash() string { return h.st.Head.Hash }

// codeOf returns the ADP code of err ("" for nil).
func codeOf(err error) adp.Code {
	if err == nil {
		return ""
	}
	var e *adp.Error
	if errors.As(err, &e) {
		return e.Code
	}
	return adp.Code(fmt.Sprintf("non-adp error: %v", err))
}
