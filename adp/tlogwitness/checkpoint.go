// Package tlogwitness is the pure part of a transparency-log witness over
// the open protocols of C2SP: it parses a tlog-witness add-checkpoint
// request, opens the C2SP tlog-checkpoint note it carries with the log's
// verifier, checks it against the last checkpoint the witness cosigned for
// that origin (size, root, RFC 6962 consistency proof) and cosigns it with
// cosignature/v1 (C2SP tlog-cosignature). It also turns two checkpoints of
// one origin that cannot both be true into proof material (SplitView).
//
// No I/O, no clock: callers store State and pass the time they cosign at.
package tlogwitness

import (
	"bytes"
	"errors"
	"strconv"

	"golang.org/x/mod/sumdb/note"

	"github.com/adpnode/adpnode/adp"
	"github.com/adpnode/adpnode/adp/tlogproof"
)

// Checkpoint is the body of a C2SP tlog-checkpoint note.
type Checkpoint = tlogproof.Checkpoint

// MaxNoteBytes bounds a checkpoint note (body and signature lines).
const MaxNoteBytes = tlogproof.MaxCheckpointBytes

// emptyRoot is RFC 6962's root of the empty tree.
var emptyRoot = tlogproof.EmptyRoot()

// Origin returns the first line of a checkpoint note, its origin.
func Origin(noteText []byte) (string, bool) {
	i := bytes.IndexByte(noteText, '\n')
	if i <= 0 {
		return "", false
	}
	return string(noteText[:i]), true
}

// Open verifies a signed checkpoint note with the log's verifier (other
// signatures, such as cosignatures, are ignored) and parses its body,
// which must name origin.
func Open(noteText []byte, origin string, v note.Verifier) (*Checkpoint, *note.Note, error) {
	if len(noteText) > MaxNoteBytes {
		return nil, nil, adp.Reason(adp.CodePayloadTooLarge, "checkpoint_too_large", "checkpoint note is larger than "+strconv.Itoa(MaxNoteBytes)+" bytes")
	}
	n, err := note.Open(noteText, note.VerifierList(v))
	if err != nil {
		var unverified *note.UnverifiedNoteError
		var invalid *note.InvalidSignatureError
		if errors.As(err, &unverified) || errors.As(err, &invalid) {
			return nil, nil, adp.Reason(adp.CodeUntrustedCheckpoint, "no_log_signature", "no signature on the checkpoint verifies with the log's key")
		}
		return nil, nil, adp.Reason(adp.CodeInvalidRequest, "malformed_note", "checkpoint is not a signed note: "+err.Error())
	}
	cp, err := tlogproof.ParseCheckpoint([]byte(n.Text))
	if err != nil {
		return nil, nil, err
	}
	if cp.Origin != origin {
		return nil, nil, adp.Reason(adp.CodeInvalidRequest, "wrong_origin", "checkpoint origin is not the log's")
	}
	if cp.Size == 0 && cp.Hash != emptyRoot {
		return nil, nil, adp.Reason(adp.CodeInconsistentCheckpoint, "bad_empty_root", "a checkpoint of size zero must carry the empty tree's root")
	}
	return &cp, n, nil
}
