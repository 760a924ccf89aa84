package tlogwitness

import (
	"bytes"
	"encoding/base64"
	"strconv"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/adpnode/adpnode/adp"
)

// Limits of an add-checkpoint request.
const (
	// MaxProofHashes bounds the consistency proof: c2sp.org/tlog-witness
	// allows at most 63 proof lines (enough for any tree of fewer than
	// 2^63 leaves); a request with more is malformed.
	MaxProofHashes = 63
	// MaxRequestBytes bounds a whole add-checkpoint body.
	MaxRequestBytes = MaxNoteBytes + MaxProofHashes*45 + 32
)

// Request is a parsed tlog-witness add-checkpoint body:
// "old N\n", one base64 consistency proof hash per line, an empty line,
// then the signed checkpoint note.
type Request struct {
	OldSize uint64
	Proof   []tlog.Hash
	Note    []byte
}

// ParseRequest parses an add-checkpoint body.
func ParseRequest(body []byte) (*Request, error) {
	bad := func(msg string) error { return adp.Reason(adp.CodeInvalidRequest, "malformed_add_checkpoint", msg) }
	if len(body) > MaxRequestBytes {
		return nil, adp.Reason(adp.CodePayloadTooLarge, "body_too_large", "add-checkpoint body is larger than "+strconv.Itoa(MaxRequestBytes)+" bytes")
	}
	line, rest, ok := bytes.Cut(body, []byte("\n"))
	if !ok || !bytes.HasPrefix(line, []byte("old ")) {
		return nil, bad(`the body does not start with "old <size>"`)
	}
	num := string(line[4:])
	old, err := strconv.ParseUint(num, 10, 64)
	if err != nil || strconv.FormatUint(old, 10) != num {
		return nil, bad("old size is not a decimal number")
	}
	req := &Request{OldSize: old}
	for {
		line, rest, ok = bytes.Cut(rest, []byte("\n"))
		if !ok {
			return nil, bad("the proof is not followed by an empty line")
		}
		if len(line) == 0 {
			break
		}
		if len(req.Proof) == MaxProofHashes {
			return nil, bad("the consistency proof has more than " + strconv.Itoa(MaxProofHashes) + " hashes")
		}
		h, err := base64.StdEncoding.Strict().DecodeString(string(line))
		if err != nil || len(h) != tlog.HashSize {
			return nil, bad("a proof line is not a base64 SHA-256 hash")
		}
		req.Proof = append(req.Proof, tlog.Hash(h))
	}
	if len(rest) == 0 {
		return nil, bad("no checkpoint follows the proof")
	}
	req.Note = rest
	return req, nil
}

// FormatRequest is ParseRequest's inverse, for clients.
func FormatRequest(oldSize uint64, proof []tlog.Hash, signedNote []byte) []byte {
	b := make([]byte, 0, 24+len(proof)*45+len(signedNote))
	b = append(b, "old "...)
	b = strconv.AppendUint(b, oldSize, 10)
	b = append(b, '\n')
	for _, h := range proof {
		b = base64.StdEncoding.AppendEncode(b, h[:])
		b = append(b, '\n')
	}
	b = append(b, '\n')
	return append(b, signedNote...)
}

// State is what a witness keeps per origin: the last checkpoint it
// cosigned, as the log signed it (the note with the log's signature), and
// its size and root. The zero State means "never cosigned". SplitView,
// once set, is proof the witness holds that the log forked: it cosigns
// nothing more of that log.
type State struct {
	Size      uint64
	Hash      [32]byte
	Note      []byte
	SplitView *SplitView
}

// Log is a log the witness vouches for: its origin and the verifier of
// its checkpoint signatures.
type Log struct {
	Origin   string
	Verifier note.Verifier
}

// Decision is the outcome of Check.
type Decision struct {
	// Checkpoint and Body are the accepted checkpoint and its note text,
	// which the witness cosigns; Next is the state to store.
	Checkpoint *Checkpoint
	Body       []byte
	Next       State
	// SplitView is set when the request proves the log signed two
	// checkpoints that cannot both be true (the error is then
	// CodeInconsistentCheckpoint).
	SplitView *SplitView
}

// Signed is an add-checkpoint request whose checkpoint note carries a
// valid signature of the log's key (OpenRequest): what a witness may
// spend its per-log budget on.
type Signed struct {
	req *Request
	cp  *Checkpoint
	n   *note.Note
	v   note.Verifier
}

// Checkpoint returns the signed checkpoint's body.
func (s *Signed) Checkpoint() *Checkpoint { return s.cp }

// OpenRequest verifies the log's signature on the request's checkpoint
// and parses it (else CodeUntrustedCheckpoint, 403, or a malformed-note
// refusal). It reads no witness state.
func OpenRequest(log Log, req *Request) (*Signed, error) {
	cp, n, err := Open(req.Note, log.Origin, log.Verifier)
	if err != nil {
		return nil, err
	}
	return &Signed{req: req, cp: cp, n: n, v: log.Verifier}, nil
}

// Check decides an add-checkpoint request for log against the stored
// state prev (nil: never cosigned): OpenRequest, then Signed.Check.
func Check(log Log, prev *State, req *Request) (*Decision, error) {
	s, err := OpenRequest(log, req)
	if err != nil {
		return nil, err
	}
	return s.Check(prev)
}

// Check decides a signed add-checkpoint request against the stored state
// prev (nil: never cosigned), following C2SP tlog-witness:
//   - a log the witness holds split-view evidence against is no longer
//     trusted (CodeUntrustedCheckpoint, 403, reason log_forked);
//   - the old size must not exceed the checkpoint's size (400) and must
//     equal the stored size (else CodeCheckpointStale, 409, with data.size);
//   - from size zero the proof is empty; at equal sizes the proof is empty
//     (else CodeInconsistentCheckpoint, 422) and the roots must be equal
//     (else CodeCheckpointStale, 409, reason root_mismatch, with
//     data.size); otherwise the proof must be an RFC 6962 consistency
//     proof from the stored root (else CodeInconsistentCheckpoint, 422).
//
// A checkpoint that cannot be consistent with the stored one while both
// carry the log's signature also yields Decision.SplitView.
func (s *Signed) Check(prev *State) (*Decision, error) {
	cp, n, req := s.cp, s.n, s.req
	if prev == nil {
		prev = &State{}
	}
	if prev.SplitView != nil {
		return nil, adp.Reason(adp.CodeUntrustedCheckpoint, "log_forked", "this witness holds proof that the log signed a split view; it cosigns nothing more of it")
	}
	d := &Decision{Checkpoint: cp, Body: []byte(n.Text), Next: State{Size: cp.Size, Hash: cp.Hash, Note: logSigned(n, s.v)}}
	switch {
	case req.OldSize > cp.Size:
		return nil, adp.Reason(adp.CodeInvalidRequest, "old_size_too_large", "old size is larger than the checkpoint's size")
	case req.OldSize != prev.Size:
		e := adp.Errorf(adp.CodeCheckpointStale, "old size %d is not the size %d this witness last cosigned", req.OldSize, prev.Size)
		e.Data = map[string]any{"size": prev.Size}
		return nil, e
	case prev.Size == 0:
		if len(req.Proof) != 0 {
			return nil, adp.Reason(adp.CodeInconsistentCheckpoint, "proof_not_empty", "the proof from size zero must be empty")
		}
		return d, nil
	case cp.Size == prev.Size:
		if len(req.Proof) != 0 {
			return nil, adp.Reason(adp.CodeInconsistentCheckpoint, "proof_not_empty", "the proof between equal sizes must be empty")
		}
		if cp.Hash != prev.Hash {
			d.SplitView = &SplitView{Notes: [2][]byte{prev.Note, d.Next.Note}}
			return d, adp.Reason(adp.CodeCheckpointStale, "root_mismatch", "the log signed two different roots for one size").WithData("size", prev.Size)
		}
		return d, nil
	}
	if err := tlog.CheckTree(req.Proof, int64(cp.Size), tlog.Hash(cp.Hash), int64(prev.Size), tlog.Hash(prev.Hash)); err != nil {
		e := adp.Reason(adp.CodeInconsistentCheckpoint, "bad_consistency_proof", "the consistency proof does not verify")
		// (At a power-of-two old size the proof omits the prefix root, so
		// it cannot show a fork on its own.)
		if old, ok := PrefixRoot(prev.Size, cp.Size, req.Proof, tlog.Hash(cp.Hash)); ok && !isPow2(prev.Size) && old != tlog.Hash(prev.Hash) {
			// The proof is true of the new tree, whose prefix is not the
			// tree the witness cosigned: the log forked.
			d.SplitView = &SplitView{Notes: [2][]byte{prev.Note, d.Next.Note}, Proof: req.Proof}
		}
		return d, e
	}
	return d, nil
}

// logSigned re-encodes a verified note with only the signatures verifier
// accepted (the log's), dropping other witnesses' lines.
func logSigned(n *note.Note, v note.Verifier) []byte {
	out := []byte(n.Text)
	out = append(out, '\n')
	for _, s := range n.Sigs {
		if s.Name == v.Name() && s.Hash == v.KeyHash() {
			out = append(out, "— "+s.Name+" "+s.Base64+"\n"...)
		}
	}
	return out
}
