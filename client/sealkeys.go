package client

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
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
	mu    sync.Mutex
	path  string
	agent identity.AgentID // the agent_id of the file it was loaded from
	keys  []*seal.PrivateKey
}

// ErrSealKeyMode is returned when a sealing key file can be read or
// written by others than its owner: the keys in it may have leaked.
var ErrSealKeyMode = errors.New("sealing key file is accessible to others than its owner")

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
	b, err := readPrivateFile(path)
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
// agent "" accepts the file's own agent_id (Agent).
func LoadSealKeys(path string, agent identity.AgentID) (*SealKeys, error) {
	b, err := readPrivateFile(path)
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
	k := &SealKeys{path: path, agent: f.AgentID}
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
	return WritePrivateFile(k.path, append(b, '\n'))
}

// Agent is the agent_id named in the file the keys were loaded from ("" for
// keys made in memory).
func (k *SealKeys) Agent() identity.AgentID { return k.agent }

// readPrivateFile reads a file that must be a regular file readable and
// writable by its owner only (mode 0600 or narrower): a sealing key file
// with a wider mode is refused, never used, since its keys may have been
// read by others (ErrSealKeyMode). Permission bits are not checked on
// Windows, which does not have them.
func readPrivateFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file", path)
	}
	if runtime.GOOS != "windows" && fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("%s is mode %04o: %w; run chmod 600 %s, and if others could read it, make a new sealing key (adpnode seal key --new ROOM)",
			path, fi.Mode().Perm(), ErrSealKeyMode, path)
	}
	return io.ReadAll(io.LimitReader(f, maxSealKeyFile))
}

// maxSealKeyFile bounds what is read of a sealing key file (a key is about
// 50 bytes in it; thousands of rotations fit).
const maxSealKeyFile = 1 << 20

// WritePrivateFile replaces path with b, readable and writable by its owner
// only, whatever is on disk already: the bytes go to a new temp file in the
// same directory, created with O_EXCL and mode 0600 (so no existing file,
// symlink or mode is reused), set to 0600 again on the open file (a umask
// only narrows, but the open mode is not the last word on every file
// system), synced, then renamed over path (which replaces a symlink
// rather than writing through it), and the directory is synced.
func WritePrivateFile(path string, b []byte) (err error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	f, err := os.CreateTemp(dir, "."+base+".tmp-*") // O_RDWR|O_CREATE|O_EXCL, 0600
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
		}
	}()
	if err = f.Chmod(0o600); err != nil {
		return err
	}
	if _, err = f.Write(b); err != nil {
		return err
	}
	if err = f.Sync(); err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	if err = os.Rename(tmp, path); err != nil {
		return err
	}
	if d, derr := os.Open(dir); derr == nil {
		_ = d.Sync() // best effort: some systems cannot sync a directory
		d.Close()
	}
	return nil
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

// ExportKey is a sealing key file holding only the private key whose public
// key is pub (for agent), or an error if the set does not hold it. Whoever
// has the file opens every epoch wrapped for that key: it is what a member
// hands others to show that a wrap for that key is bad (RevealSealKey).
func (k *SealKeys) ExportKey(agent identity.AgentID, pub []byte) ([]byte, error) {
	p := k.find(pub)
	if p == nil {
		return nil, errors.New("this agent does not hold that sealing key")
	}
	b, _ := json.MarshalIndent(sealKeyFile{AgentID: agent, X25519: []string{identity.EncodeB64(p.Bytes())}}, "", "  ")
	return append(b, '\n'), nil
}
