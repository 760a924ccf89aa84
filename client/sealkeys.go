package client

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"

	"github.com/adpnode/adpnode/adp/identity"
	"github.com/adpnode/adpnode/adp/seal"
)

// SealKeys are an agent's X25519 keys for member-only rooms
// (docs/sealed-rooms.md), newest last. Older keys are kept so that epochs
// wrapped for them still open after a key rotation. A SealKeys loaded from
// a file writes every change back there (mode 0600). The keys never print
// and are never logged.
type SealKeys struct {
	mu   sync.Mutex
	path string
	keys []*seal.PrivateKey
}

type sealKeyFile struct {
	AgentID identity.AgentID `json:"agent_id"`
	X25519  []string         `json:"x25519"` // private keys, oldest first
}

// SealKeyPath is where the sealing keys of the agent key at keyPath live:
// beside it.
func SealKeyPath(keyPath string) string { return keyPath + ".seal" }

// NewSealKeys makes a set with one fresh key, kept in memory only.
func NewSealKeys() (*SealKeys, error) {
	k := &SealKeys{}
	if _, err := k.rotateLocked(); err != nil {
		return nil, err
	}
	return k, nil
}

// LoadOrCreateSealKeys reads the sealing keys of agent at path, or makes
// and saves a first key there (0600) when the file does not exist.
func LoadOrCreateSealKeys(path string, agent identity.AgentID) (*SealKeys, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		k, err := NewSealKeys()
		if err != nil {
			return nil, err
		}
		k.path = path
		return k, k.save(agent)
	}
	if err != nil {
		return nil, err
	}
	return parseSealKeys(path, b, agent)
}

// LoadSealKeys reads the sealing keys of agent at path; unlike
// LoadOrCreateSealKeys it never makes one (readers such as verify --key).
func LoadSealKeys(path string, agent identity.AgentID) (*SealKeys, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return parseSealKeys(path, b, agent)
}

func parseSealKeys(path string, b []byte, agent identity.AgentID) (*SealKeys, error) {
	var f sealKeyFile
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("%s: not a sealing key file", path)
	}
	if agent != "" && f.AgentID != "" && f.AgentID != agent {
		return nil, fmt.Errorf("%s: sealing keys of another agent (%s)", path, f.AgentID)
	}
	k := &SealKeys{path: path}
	for _, s := range f.X25519 {
		raw, err := identity.DecodeB64Len(s, 32)
		if err != nil {
			return nil, fmt.Errorf("%s: bad key", path)
		}
		p, err := seal.PrivateKeyFromBytes(raw)
		if err != nil {
			return nil, fmt.Errorf("%s: bad key", path)
		}
		k.keys = append(k.keys, p)
	}
	if len(k.keys) == 0 {
		return nil, fmt.Errorf("%s: no key", path)
	}
	return k, nil
}

func (k *SealKeys) save(agent identity.AgentID) error {
	if k.path == "" {
		return nil
	}
	f := sealKeyFile{AgentID: agent}
	for _, p := range k.keys {
		f.X25519 = append(f.X25519, identity.EncodeB64(p.Bytes()))
	}
	b, _ := json.MarshalIndent(f, "", "  ")
	tmp := k.path + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, k.path)
}

func (k *SealKeys) rotateLocked() (*seal.PrivateKey, error) {
	p, err := seal.GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	k.keys = append(k.keys, p)
	return p, nil
}

// Rotate adds a new current key (saved if the set has a file); publish it
// with PublishSealKey. agent names the owner in the file.
func (k *SealKeys) Rotate(agent identity.AgentID) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if _, err := k.rotateLocked(); err != nil {
		return err
	}
	return k.save(agent)
}

// Public is the current public key.
func (k *SealKeys) Public() []byte {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.keys[len(k.keys)-1].Public()
}

// find returns the private key for a public key, if held.
func (k *SealKeys) find(pub []byte) *seal.PrivateKey {
	k.mu.Lock()
	defer k.mu.Unlock()
	for i := len(k.keys) - 1; i >= 0; i-- {
		if bytes.Equal(k.keys[i].Public(), pub) {
			return k.keys[i]
		}
	}
	return nil
}

// String never shows a secret.
func (k *SealKeys) String() string { return "client.SealKeys(redacted)" }

// Find returns the private key whose public key is pub (nil if none): a
// seal.KeyFinder for opening epochs.
func (k *SealKeys) Find(pub []byte) *seal.PrivateKey { return k.find(pub) }
