package client

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"

	"github.com/adpnode/adpnode/adp/identity"
)

// Key is an agent key. The seed never leaves the agent (ADP §22). A key
// loaded from a file records the last nonce it used there, so nonces stay
// monotonic across runs even if the clock steps back.
type Key struct {
	ID   identity.AgentID
	priv ed25519.PrivateKey
	path string

	mu   sync.Mutex
	last int64 // last nonce used
}

// ErrNodeKey is returned by LoadKey for a node's own key file
// (<data>/node.key, with a host_key member). A host key signs what the
// node asserts as a host; using it as an agent would make the host an
// actor in its own rooms.
var ErrNodeKey = errors.New("this is a node's host key (node.key), not an agent key; make an agent key with `adpnode keygen`")

type keyFile struct {
	AgentID   identity.AgentID `json:"agent_id"`
	Seed      string           `json:"seed"`
	LastNonce int64            `json:"last_nonce"`
}

// GenerateKey makes a new random key.
func GenerateKey() (*Key, error) {
	priv, err := identity.GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	return KeyFromPrivate(priv), nil
}

// KeyFromPrivate wraps an Ed25519 private key.
func KeyFromPrivate(priv ed25519.PrivateKey) *Key {
	return &Key{ID: identity.AgentIDFromKey(priv.Public().(ed25519.PublicKey)), priv: priv}
}

// LoadKey reads a key file written by Save (or `adpnode keygen`).
func LoadKey(path string) (*Key, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var kf keyFile
	if err := json.Unmarshal(b, &kf); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	var probe map[string]json.RawMessage
	_ = json.Unmarshal(b, &probe)
	if _, isNode := probe["host_key"]; isNode {
		return nil, fmt.Errorf("%s: %w", path, ErrNodeKey)
	}
	seed, err := identity.DecodeB64Len(kf.Seed, 32)
	if err != nil {
		return nil, fmt.Errorf("%s: bad seed", path)
	}
	priv, err := identity.KeyFromSeed(seed)
	if err != nil {
		return nil, err
	}
	k := KeyFromPrivate(priv)
	if kf.AgentID != "" && kf.AgentID != k.ID {
		return nil, fmt.Errorf("%s: agent_id does not match the seed", path)
	}
	k.path, k.last = path, kf.LastNonce
	return k, nil
}

// Save writes the key file (mode 0600) and remembers the path so that used
// nonces are recorded there.
func (k *Key) Save(path string) error {
	k.mu.Lock()
	k.path = path
	k.mu.Unlock()
	return k.persist()
}

func (k *Key) persist() error {
	k.mu.Lock()
	path, last := k.path, k.last
	k.mu.Unlock()
	if path == "" {
		return nil
	}
	b, _ := json.MarshalIndent(keyFile{AgentID: k.ID, Seed: identity.EncodeB64(k.priv.Seed()), LastNonce: last}, "", "  ")
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// Private returns the Ed25519 private key.
func (k *Key) Private() ed25519.PrivateKey { return k.priv }

// nextNonce returns max(last+1, nowMs) (Identity §8) and records it.
func (k *Key) nextNonce(nowMs int64) int64 {
	k.mu.Lock()
	k.last = identity.NextNonce(k.last, nowMs)
	n := k.last
	k.mu.Unlock()
	_ = k.persist() // best effort: the next nonce is at least the clock's, the stored one guards only a clock set back
	return n
}

// observe applies a Max-Seen-Nonce header with the identity bound: a
// header more than 2^32 past max(next, now) is refused and reported.
func (k *Key) observe(header string, nowMs int64) error {
	if header == "" {
		return nil
	}
	k.mu.Lock()
	next := k.last + 1
	after, err := identity.ApplyMaxSeenNonce(next, nowMs, header)
	if err == nil && after-1 > k.last {
		k.last = after - 1
	}
	k.mu.Unlock()
	if err != nil {
		return fmt.Errorf("refusing Max-Seen-Nonce %s: %w", header, err)
	}
	return k.persist()
}
