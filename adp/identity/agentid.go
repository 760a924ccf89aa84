package identity

import (
	"crypto/ed25519"
	"crypto/rand"
	"io"
	"strings"

	"github.com/adpnode/adpnode/adp"
)

// AgentIDPrefix is the method prefix of every Agent ID.
const AgentIDPrefix = "did:agent:"

// AgentID is an Agent ID: "did:agent:" and the canonical unpadded base64url of
// a 32-byte Ed25519 public key. Values obtained from ParseAgentID or
// AgentIDFromKey are well formed.
type AgentID string

// ParseAgentID runs the decoding steps of Identity §1: exact prefix,
// canonical unpadded base64url, exactly 32 bytes. It does not check that the
// key is a valid or strong curve point; that happens when the key verifies
// something. Errors are invalid_actor.
func ParseAgentID(s string) (AgentID, error) {
	rest, ok := strings.CutPrefix(s, AgentIDPrefix)
	if !ok {
		return "", adp.Reason(adp.CodeInvalidActor, "prefix", "agent id must start with "+AgentIDPrefix)
	}
	if !validB64Len(rest, ed25519.PublicKeySize) {
		return "", adp.Reason(adp.CodeInvalidActor, "encoding", "agent id is not canonical base64url of a 32-byte key")
	}
	return AgentID(s), nil
}

// AgentIDFromKey returns the Agent ID of a 32-byte public key.
func AgentIDFromKey(pub ed25519.PublicKey) AgentID {
	return AgentID(AgentIDPrefix + EncodeB64(pub))
}

// PublicKey decodes the key of a parsed Agent ID. It returns nil when a is not
// well formed.
func (a AgentID) PublicKey() ed25519.PublicKey {
	rest, ok := strings.CutPrefix(string(a), AgentIDPrefix)
	if !ok || len(rest) != b64Len(ed25519.PublicKeySize) {
		return nil
	}
	out, ok := appendB64(make([]byte, 0, ed25519.PublicKeySize), rest)
	if !ok {
		return nil
	}
	return out
}

// String returns the full did:agent: form.
func (a AgentID) String() string { return string(a) }

// KeyFromSeed returns the private key of a 32-byte RFC 8032 seed. Errors are
// invalid_request.
func KeyFromSeed(seed []byte) (ed25519.PrivateKey, error) {
	if len(seed) != ed25519.SeedSize {
		return nil, adp.Errorf(adp.CodeInvalidRequest, "seed must be %d bytes", ed25519.SeedSize)
	}
	return ed25519.NewKeyFromSeed(seed), nil
}

// GenerateKey reads a 32-byte seed from r (crypto/rand when r is nil) and
// returns its private key. A failing reader gives internal_error.
func GenerateKey(r io.Reader) (ed25519.PrivateKey, error) {
	if r == nil {
		r = rand.Reader
	}
	var seed [ed25519.SeedSize]byte
	if _, err := io.ReadFull(r, seed[:]); err != nil {
		return nil, adp.Errorf(adp.CodeInternal, "reading key seed: %v", err)
	}
	return ed25519.NewKeyFromSeed(seed[:]), nil
}

// normalizeKey checks a private key's length and rebuilds it from its seed, so
// a key whose public half does not match its seed cannot produce signatures
// that verify under neither key.
func normalizeKey(priv ed25519.PrivateKey) (ed25519.PrivateKey, error) {
	if len(priv) != ed25519.PrivateKeySize {
		return nil, adp.Errorf(adp.CodeInvalidRequest, "private key must be %d bytes", ed25519.PrivateKeySize)
	}
	return ed25519.NewKeyFromSeed(priv.Seed()), nil
}
