package federation

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/adpnode/adpnode/adp/identity"
)

// KeyFile is the node key's file name inside the data directory.
const KeyFile = "node.key"

// LoadOrCreateKey returns the node's Ed25519 key from dir/node.key, creating
// it (mode 0600) on first start. The same key is the libp2p identity and
// the node's did:agent: host key.
func LoadOrCreateKey(dir string) (ed25519.PrivateKey, error) {
	path := filepath.Join(dir, KeyFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		priv, err := identity.GenerateKey(rand.Reader)
		if err != nil {
			return nil, err
		}
		out, _ := json.MarshalIndent(map[string]string{
			"host_key": string(identity.AgentIDFromKey(priv.Public().(ed25519.PublicKey))),
			"seed":     identity.EncodeB64(priv.Seed()),
		}, "", "  ")
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, err
		}
		if err := os.WriteFile(path, append(out, '\n'), 0o600); err != nil {
			return nil, err
		}
		return priv, nil
	}
	if err != nil {
		return nil, err
	}
	var kf struct {
		Seed string `json:"seed"`
	}
	if err := json.Unmarshal(b, &kf); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	seed, err := identity.DecodeB64Len(kf.Seed, 32)
	if err != nil {
		return nil, fmt.Errorf("%s: bad seed", path)
	}
	return identity.KeyFromSeed(seed)
}

// PeerIDOf returns the libp2p peer ID of an Ed25519 public key.
func PeerIDOf(pub ed25519.PublicKey) (peer.ID, error) {
	pk, err := crypto.UnmarshalEd25519PublicKey(pub)
	if err != nil {
		return "", err
	}
	return peer.IDFromPublicKey(pk)
}

// HostKeyOf returns the did:agent: host key a peer ID commits to, if the
// peer ID embeds an Ed25519 key.
func HostKeyOf(id peer.ID) (identity.AgentID, bool) {
	pk, err := id.ExtractPublicKey()
	if err != nil || pk.Type() != crypto.Ed25519 {
		return "", false
	}
	raw, err := pk.Raw()
	if err != nil || len(raw) != ed25519.PublicKeySize {
		return "", false
	}
	return identity.AgentIDFromKey(raw), true
}
