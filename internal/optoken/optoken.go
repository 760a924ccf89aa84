// Package optoken manages the operator credential: a random bearer token
// kept in the data directory (operator.token, mode 0600) that the node
// creates at first start and the CLI reads. Operator endpoints accept it
// and nothing else: the peer address of a request proves nothing once a
// reverse proxy runs on the same machine.
package optoken

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// FileName is the token file's name inside the data directory.
const FileName = "operator.token"

// LoadOrCreate returns the token in dir/operator.token, creating the file
// (32 random bytes, base64url, mode 0600) when it does not exist.
func LoadOrCreate(dir string) (string, error) {
	path := filepath.Join(dir, FileName)
	tok, err := Read(path)
	if err == nil || !errors.Is(err, fs.ErrNotExist) {
		return tok, err
	}
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	tok = base64.RawURLEncoding.EncodeToString(b[:])
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) { // another process won the race
		return Read(path)
	}
	if err != nil {
		return "", err
	}
	if _, err := f.WriteString(tok + "\n"); err != nil {
		f.Close()
		return "", err
	}
	return tok, f.Close()
}

// Read returns the token stored in a token file.
func Read(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	tok := strings.TrimSpace(string(b))
	if len(tok) < 16 {
		return "", fmt.Errorf("%s: not an operator token", path)
	}
	return tok, nil
}

// Equal compares a presented token with the real one in constant time.
// An empty real token matches nothing.
func Equal(presented, real string) bool {
	if real == "" {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(presented), []byte(real)) == 1
}
