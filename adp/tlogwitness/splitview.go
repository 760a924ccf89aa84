package tlogwitness

import (
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

// SplitView is proof that a log signed two checkpoints of one origin that
// cannot both be true: Notes are the two signed checkpoint notes, the
// smaller (or equal) size first. At equal sizes the roots differ. At
// different sizes Proof is a consistency proof from Notes[0]'s size to
// Notes[1]'s that reproduces Notes[1]'s root but implies another prefix
// root than Notes[0]'s (see PrefixRoot; at a power-of-two first size its
// first hash is the prefix root).
type SplitView struct {
	Notes [2][]byte
	Proof []tlog.Hash
}

// Verify checks the split view offline against the log.
func (s *SplitView) Verify(log Log) error {
	var cps [2]*Checkpoint
	for i, n := range s.Notes {
		cp, _, err := Open(n, log.Origin, log.Verifier)
		if err != nil {
			return fmt.Errorf("checkpoint %d: %w", i, err)
		}
		cps[i] = cp
	}
	a, b := cps[0], cps[1]
	switch {
	case a.Size > b.Size:
		return errors.New("the first checkpoint is larger than the second")
	case a.Size == b.Size:
		if len(s.Proof) != 0 {
			return errors.New("checkpoints of one size need no proof")
		}
		if a.Hash == b.Hash {
			return errors.New("the checkpoints agree")
		}
		return nil
	case a.Size == 0:
		return errors.New("every tree extends the empty tree")
	}
	old, ok := PrefixRoot(a.Size, b.Size, s.Proof, b.Hash)
	if !ok {
		return errors.New("the proof is not one of the second checkpoint's tree")
	}
	if old == a.Hash {
		return errors.New("the second checkpoint's tree extends the first: no split view")
	}
	return nil
}

// LogVerifier returns the note verifier of a log whose checkpoints are
// signed with the Ed25519 key pub under key name name (the usual
// signed-note Ed25519 type, as adpnode hosts sign).
func LogVerifier(name string, pub []byte) (note.Verifier, error) {
	vkey, err := note.NewEd25519VerifierKey(name, pub)
	if err != nil {
		return nil, err
	}
	return note.NewVerifier(vkey)
}

// LogSigner returns the signed-note Ed25519 signer for key name name with
// priv, LogVerifier's counterpart.
func LogSigner(name string, priv ed25519.PrivateKey) (note.Signer, error) {
	if len(priv) != ed25519.PrivateKeySize {
		return nil, errors.New("not an Ed25519 private key")
	}
	vkey, err := note.NewEd25519VerifierKey(name, priv.Public().(ed25519.PublicKey))
	if err != nil {
		return nil, err
	}
	// vkey is name+hash+key; the key's base64 may itself hold '+'.
	parts := strings.SplitN(vkey, "+", 3)
	return note.NewSigner("PRIVATE+KEY+" + name + "+" + parts[1] + "+" +
		base64.StdEncoding.EncodeToString(append([]byte{1}, priv.Seed()...)))
}
