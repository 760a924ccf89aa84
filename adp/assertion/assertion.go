// Package assertion signs and verifies host assertions: statements a node
// makes as a host (index announcements, record checkpoints, witness
// cosignatures). Each is an Agent Identity envelope signed with the node
// key, so one verifier checks agents and hosts alike (DECISIONS 13).
package assertion

import (
	"crypto/ed25519"
	"encoding/json"
	"sync"

	"github.com/adpnode/adpnode/adp"
	"github.com/adpnode/adpnode/adp/identity"
	"github.com/adpnode/adpnode/adp/jsonobj"
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

// TypeCosign is a witness's cosignature of a host checkpoint.
const TypeCosign = "checkpoint.cosign"

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

// Cosign is the payload of a checkpoint.cosign assertion: a witness
// declares it has verified the host's chain up to the checkpoint.
type Cosign struct {
	Witness    identity.AgentID `json:"witness"`
	Checkpoint json.RawMessage  `json:"checkpoint"` // the host's assertion, as signed
}

// Cosignature is a verified cosignature.
type Cosignature struct {
	Witness    identity.AgentID
	Checkpoint Checkpoint
	Raw        []byte
}

// OpenCosign verifies a cosignature: the witness's signature and the
// embedded host checkpoint's.
func OpenCosign(raw []byte) (*Cosignature, error) {
	env, err := Open(raw, TypeCosign)
	if err != nil {
		return nil, err
	}
	var c Cosign
	if err := jsonobj.Unmarshal(env.Event.Payload, &c, "witness", "checkpoint"); err != nil {
		return nil, adp.Reason(adp.CodeInvalidEvent, "cosign", "cosign payload "+err.Error())
	}
	if c.Witness != env.Event.Actor {
		return nil, adp.Reason(adp.CodeInvalidEvent, "cosign_witness", "cosignature names a witness other than its signer")
	}
	cp, err := OpenCheckpoint(c.Checkpoint)
	if err != nil {
		return nil, err
	}
	return &Cosignature{Witness: c.Witness, Checkpoint: cp, Raw: raw}, nil
}
