package tlogwitness

import (
	"errors"
	"fmt"

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
