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

// OpenAssertion verifies a host assertion of the given type: strict parse,
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
