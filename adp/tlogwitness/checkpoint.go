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
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/adpnode/adpnode/adp"
)

// Checkpoint is the body of a C2SP tlog-checkpoint note: origin, tree size,
// RFC 6962 root hash, then optional extension lines.
type Checkpoint struct {
	Origin     string
	Size       uint64
	Hash       tlog.Hash
	Extensions []string
}

// MaxNoteBytes bounds a checkpoint note (body and signature lines).
const MaxNoteBytes = 8 << 10

// ParseCheckpoint parses a checkpoint body (the note text, ending in a
// newline, without signature lines).
func ParseCheckpoint(body []byte) (*Checkpoint, error) {
	if len(body) == 0 || body[len(body)-1] != '\n' {
		return nil, errors.New("checkpoint body does not end in a newline")
	}
	lines := strings.Split(string(body[:len(body)-1]), "\n")
	if len(lines) < 3 {
		return nil, errors.New("checkpoint has fewer than three lines")
	}
	if lines[0] == "" {
		return nil, errors.New("checkpoint origin is empty")
	}
	size, err := strconv.ParseUint(lines[1], 10, 64)
	if err != nil || strconv.FormatUint(size, 10) != lines[1] {
		return nil, fmt.Errorf("checkpoint size %q is not a decimal number", lines[1])
	}
	h, err := base64.StdEncoding.Strict().DecodeString(lines[2])
	if err != nil || len(h) != tlog.HashSize {
		return nil, errors.New("checkpoint root hash is not 32 bytes of base64")
	}
	cp := &Checkpoint{Origin: lines[0], Size: size}
	copy(cp.Hash[:], h)
	for _, ext := range lines[3:] {
		if ext == "" {
			return nil, errors.New("checkpoint has an empty extension line")
		}
		cp.Extensions = append(cp.Extensions, ext)
	}
	if size == 0 && cp.Hash != emptyRoot {
		return nil, errors.New("a checkpoint of size zero must carry the empty tree's root")
	}
	return cp, nil
}

// emptyRoot is RFC 6962's root of the empty tree, SHA-256 of "".
var emptyRoot = tlog.Hash{0xe3, 0xb0, 0xc4, 0x42, 0x98, 0xfc, 0x1c, 0x14, 0x9a, 0xfb, 0xf4, 0xc8, 0x99, 0x6f, 0xb9, 0x24,
	0x27, 0xae, 0x41, 0xe4, 0x64, 0x9b, 0x93, 0x4c, 0xa4, 0x95, 0x99, 0x1b, 0x78, 0x52, 0xb8, 0x55}

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
	cp, err := ParseCheckpoint([]byte(n.Text))
	if err != nil {
		return nil, nil, adp.Reason(adp.CodeInvalidRequest, "malformed_checkpoint", err.Error())
	}
	if cp.Origin != origin {
		return nil, nil, adp.Reason(adp.CodeInvalidRequest, "wrong_origin", "checkpoint origin is not the log's")
	}
	return cp, n, nil
}
