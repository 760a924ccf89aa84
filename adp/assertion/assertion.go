// Package assertion signs and verifies host assertions: statements a node
// makes as a host (index announcements, record checkpoints, witness
// announcements). Each is an Agent Identity envelope signed with the node
// key, so one verifier checks agents and hosts alike (DECISIONS 13).
package assertion

import (
	"bytes"
	"crypto/ed25519"
	"encoding/json"
	"sync"

	"github.com/adpnode/adpnode/adp"
	"github.com/adpnode/adpnode/adp/identity"
	"github.com/adpnode/adpnode/adp/jsonobj"
	"github.com/adpnode/adpnode/adp/tlogwitness"
)

// Protocol is event.protocol of host assertions.
const Protocol = "adp-federation/1.0"

// Assertion types.
const (
	TypeAnnounce   = "index.announce"    // a room's directory entry
	TypeCheckpoint = "record.checkpoint" // a host's commitment to a record at a seq
)

// Signer signs host assertions with the node key, with nonces that never go
// backwards (Identity §8: one sequence per Agent ID).
type Signer struct {
	priv  ed25519.PrivateKey
	id    identity.AgentID
	mu    sync.Mutex
	nonce int64
}

// NewSigner returns a signer for the node key.
func NewSigner(priv ed25519.PrivateKey) *Signer {
	return &Signer{priv: priv, id: identity.AgentIDFromKey(priv.Public().(ed25519.PublicKey))}
}

// HostKey returns the node's did:agent: host key.
func (s *Signer) HostKey() identity.AgentID { return s.id }

// Sign returns the canonical envelope bytes of an assertion.
func (s *Signer) Sign(typ string, payload any, nowMs int64) ([]byte, error) {
	p, err := json.Marshal(payload)
	if err != nil {
		return nil, err
	}
	canon, err := identity.Canonicalize(p)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.nonce = identity.NextNonce(s.nonce, nowMs)
	nonce := s.nonce
	s.mu.Unlock()
	env, err := identity.Sign(s.priv, identity.Event{Protocol: Protocol, Type: typ, Actor: s.id, CreatedAt: nowMs, Nonce: nonce, Payload: canon})
	if err != nil {
		return nil, err
	}
	return env.Raw, nil
}

// Open verifies a host assertion of the given type: strict parse,
// hash, strict signature by its actor, protocol and type. It does not say
// whether the actor is the host it should be: callers compare the actor
// with the key they expect.
func Open(b []byte, typ string) (*identity.Envelope, error) {
	env, err := identity.OpenEnvelope(b)
	if err != nil {
		return nil, err
	}
	if env.Event.Protocol != Protocol || env.Event.Type != typ {
		return nil, adp.Reason(adp.CodeInvalidEvent, "assertion_type", "not a "+typ+" assertion")
	}
	return env, nil
}

// Checkpoint is the payload of a record.checkpoint assertion: a host's
// signed commitment that a room's record at seq has this hash.
type Checkpoint struct {
	Host       identity.AgentID `json:"host"`
	RoomID     string           `json:"room_id"`
	Seq        int64            `json:"seq"`
	Hash       string           `json:"hash"`
	ReceivedAt int64            `json:"received_at"`
}

// OpenCheckpoint verifies a checkpoint assertion: signature, type, and that
// its signer is the host the payload names. It does not check the record.
func OpenCheckpoint(raw []byte) (Checkpoint, error) {
	env, err := Open(raw, TypeCheckpoint)
	if err != nil {
		return Checkpoint{}, err
	}
	var cp Checkpoint
	if err := jsonobj.Unmarshal(env.Event.Payload, &cp, "host", "room_id", "seq", "hash", "received_at"); err != nil {
		return Checkpoint{}, adp.Reason(adp.CodeInvalidEvent, "checkpoint", "checkpoint payload "+err.Error())
	}
	if cp.Host != env.Event.Actor {
		return Checkpoint{}, adp.Reason(adp.CodeInvalidEvent, "checkpoint_host", "checkpoint names a host other than its signer")
	}
	return cp, nil
}

// TypeWitness is a mirror's announcement of its C2SP tlog-witness: which
// host logs it witnesses and where hosts submit their checkpoints. The
// cosignatures themselves are cosignature/v1 lines (adp/tlogwitness), not
// assertions; this only lets a host find its mirrors' witnesses.
const TypeWitness = "witness.announce"

// Bounds of a witness announcement.
const (
	MaxWitnessLogs   = 64
	maxWitnessString = 512
)

// Witness is the payload of a witness.announce assertion.
type Witness struct {
	// Witness is the announcing node's host key; the cosignature/v1 key
	// VKey names must be the same Ed25519 key.
	Witness identity.AgentID `json:"witness"`
	VKey    string           `json:"vkey"` // cosignature/v1 verifier key
	URL     string           `json:"url"`  // submission prefix: URL + "/add-checkpoint"
	// Logs are the origins of the host logs it witnesses (at most
	// MaxWitnessLogs).
	Logs []string `json:"logs"`
}

// OpenWitness verifies a witness announcement: signature, type, that its
// signer is the witness it names and holds the vkey's key, and its bounds.
// It says nothing of the URL beyond its length: a host checks that the
// URL's origin serves the same witness before it submits there.
func OpenWitness(raw []byte) (Witness, error) {
	env, err := Open(raw, TypeWitness)
	if err != nil {
		return Witness{}, err
	}
	var w Witness
	if err := jsonobj.Unmarshal(env.Event.Payload, &w, "witness", "vkey", "url", "logs"); err != nil {
		return Witness{}, adp.Reason(adp.CodeInvalidEvent, "witness", "witness payload "+err.Error())
	}
	if w.Witness != env.Event.Actor {
		return Witness{}, adp.Reason(adp.CodeInvalidEvent, "witness_key", "announcement names a witness other than its signer")
	}
	if len(w.VKey) > maxWitnessString || len(w.URL) > maxWitnessString || len(w.Logs) > MaxWitnessLogs {
		return Witness{}, adp.Reason(adp.CodeInvalidEvent, "witness_bounds", "witness announcement is too large")
	}
	for _, l := range w.Logs {
		if len(l) == 0 || len(l) > maxWitnessString {
			return Witness{}, adp.Reason(adp.CodeInvalidEvent, "witness_bounds", "witness announcement names an empty or too long log origin")
		}
	}
	v, err := tlogwitness.NewCosignatureVerifier(w.VKey)
	if err != nil {
		return Witness{}, adp.Reason(adp.CodeInvalidEvent, "witness_vkey", "witness vkey: "+err.Error())
	}
	if !bytes.Equal(v.PublicKey(), w.Witness.PublicKey()) {
		return Witness{}, adp.Reason(adp.CodeInvalidEvent, "witness_vkey", "witness vkey is not the signer's key")
	}
	return w, nil
}
