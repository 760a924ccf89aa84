// Package tlogproof is the pure half of the host log: the C2SP
// tlog-checkpoint text, its signed note with the host's Ed25519 key, RFC
// 6962 leaf and node hashing of record hashes, per-room roots, and offline
// verification of inclusion and consistency proofs.
//
// A log leaf's data is the 32 raw bytes of a record hash (ADP §15, the
// SHA3-256 the record's "hash" field encodes in base64url); its Merkle leaf
// hash is RFC 6962's SHA-256(0x00 || data). Standard tooling
// (golang.org/x/mod/sumdb/tlog, transparency-dev/merkle) verifies the same
// proofs.
//
// Wire encodings: hashes inside checkpoints and proofs are standard base64
// with padding (as in C2SP tlog-checkpoint); record hashes stay ADP's
// base64url.
package tlogproof

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"
	"golang.org/x/mod/sumdb/note"

	"github.com/adpnode/adpnode/adp"
)

// OriginSuffix follows the host's public host[:port] in its log's origin:
// the host https://example.org:8443 has the log "example.org:8443/adp-log".
const OriginSuffix = "/adp-log"

// MaxCheckpointBytes bounds a signed checkpoint this package parses.
const MaxCheckpointBytes = 16 << 10

// MaxProofHashes bounds a proof's length: a tree of 2^63 leaves needs at
// most 2·63 hashes for a consistency proof.
const MaxProofHashes = 128

// Origin returns the log origin of a host (its public URL's host[:port]).
func Origin(host string) string { return host + OriginSuffix }

// Checkpoint is the body of a C2SP tlog-checkpoint.
type Checkpoint struct {
	Origin string
	Size   uint64
	Hash   [32]byte // RFC 6962 root of the first Size leaves
	// Extensions are the optional lines after the root hash (none today).
	Extensions []string
}

// Marshal returns the checkpoint text (what the note signs).
func (c Checkpoint) Marshal() []byte {
	var b bytes.Buffer
	b.WriteString(c.Origin)
	b.WriteByte('\n')
	b.WriteString(strconv.FormatUint(c.Size, 10))
	b.WriteByte('\n')
	b.WriteString(base64.StdEncoding.EncodeToString(c.Hash[:]))
	b.WriteByte('\n')
	for _, e := range c.Extensions {
		b.WriteString(e)
		b.WriteByte('\n')
	}
	return b.Bytes()
}

func bad(reason, format string, args ...any) *adp.Error {
	return adp.Reason(adp.CodeInvalidRequest, reason, fmt.Sprintf(format, args...))
}

// ParseCheckpoint parses checkpoint text (a note's text, without
// signatures).
func ParseCheckpoint(text []byte) (Checkpoint, error) {
	var c Checkpoint
	if len(text) > MaxCheckpointBytes {
		return c, bad("checkpoint_invalid", "checkpoint is larger than %d bytes", MaxCheckpointBytes)
	}
	s := string(text)
	if !strings.HasSuffix(s, "\n") {
		return c, bad("checkpoint_invalid", "checkpoint text does not end with a newline")
	}
	lines := strings.Split(strings.TrimSuffix(s, "\n"), "\n")
	if len(lines) < 3 {
		return c, bad("checkpoint_invalid", "checkpoint has %d lines; want origin, size and root hash", len(lines))
	}
	if lines[0] == "" {
		return c, bad("checkpoint_invalid", "checkpoint origin is empty")
	}
	size, err := strconv.ParseUint(lines[1], 10, 64)
	if err != nil || (len(lines[1]) > 1 && lines[1][0] == '0') || size > 1<<63 {
		return c, bad("checkpoint_invalid", "checkpoint size %q is not a decimal tree size", lines[1])
	}
	h, err := base64.StdEncoding.Strict().DecodeString(lines[2])
	if err != nil || len(h) != 32 {
		return c, bad("checkpoint_invalid", "checkpoint root hash is not 32 bytes of base64")
	}
	for _, e := range lines[3:] {
		if e == "" {
			return c, bad("checkpoint_invalid", "checkpoint has an empty extension line")
		}
	}
	c.Origin, c.Size, c.Hash = lines[0], size, [32]byte(h)
	c.Extensions = lines[3:]
	return c, nil
}

// keyHash is the note key ID of an Ed25519 key (C2SP signed-note).
func keyHash(name string, pub ed25519.PublicKey) uint32 {
	h := sha256.New()
	h.Write([]byte(name))
	h.Write([]byte{'\n', 0x01})
	h.Write(pub)
	return binary.BigEndian.Uint32(h.Sum(nil))
}

// Signer returns the note signer of the log origin with the host key.
func Signer(origin string, priv ed25519.PrivateKey) (note.Signer, error) {
	pub := priv.Public().(ed25519.PublicKey)
	skey := fmt.Sprintf("PRIVATE+KEY+%s+%08x+%s", origin, keyHash(origin, pub),
		base64.StdEncoding.EncodeToString(append([]byte{0x01}, priv.Seed()...)))
	return note.NewSigner(skey)
}

// VerifierKey returns the note verifier key ("name+hash+base64") of the log
// origin with the host's public key: what discovery publishes.
func VerifierKey(origin string, pub ed25519.PublicKey) (string, error) {
	return note.NewEd25519VerifierKey(origin, pub)
}

// Verifier returns the note verifier of the log origin with the host's
// public key.
func Verifier(origin string, pub ed25519.PublicKey) (note.Verifier, error) {
	vkey, err := VerifierKey(origin, pub)
	if err != nil {
		return nil, err
	}
	return note.NewVerifier(vkey)
}

// Sign signs the checkpoint as a note with the host key (origin = c.Origin).
func Sign(c Checkpoint, priv ed25519.PrivateKey) ([]byte, error) {
	s, err := Signer(c.Origin, priv)
	if err != nil {
		return nil, err
	}
	return note.Sign(&note.Note{Text: string(c.Marshal())}, s)
}

// Open verifies a signed checkpoint against the log's verifier (the host
// key; other known verifiers, e.g. witnesses, may be passed after it and
// their signatures are reported in the note) and parses it. The origin
// must be the first verifier's name.
func Open(signed []byte, v note.Verifier, others ...note.Verifier) (Checkpoint, *note.Note, error) {
	if len(signed) > MaxCheckpointBytes {
		return Checkpoint{}, nil, bad("checkpoint_invalid", "signed checkpoint is larger than %d bytes", MaxCheckpointBytes)
	}
	n, err := note.Open(signed, note.VerifierList(append([]note.Verifier{v}, others...)...))
	if err != nil {
		return Checkpoint{}, nil, bad("checkpoint_signature_invalid", "checkpoint: %v", err)
	}
	signedByLog := false
	for _, s := range n.Sigs {
		if s.Name == v.Name() && s.Hash == v.KeyHash() {
			signedByLog = true
		}
	}
	if !signedByLog {
		return Checkpoint{}, nil, bad("checkpoint_signature_invalid", "checkpoint is not signed by the log key %s", v.Name())
	}
	c, err := ParseCheckpoint([]byte(n.Text))
	if err != nil {
		return Checkpoint{}, nil, err
	}
	if c.Origin != v.Name() {
		return Checkpoint{}, nil, bad("checkpoint_origin_mismatch", "checkpoint origin %q is not the log %q", c.Origin, v.Name())
	}
	return c, n, nil
}

// LeafHash is the RFC 6962 leaf hash of a record hash's 32 raw bytes.
func LeafHash(recordHash [32]byte) [32]byte {
	var b [1 + 32]byte // RFC 6962: SHA-256(0x00 || leaf data)
	copy(b[1:], recordHash[:])
	return sha256.Sum256(b[:])
}

// RecordLeaf decodes a record's "hash" field (base64url of 32 bytes) into
// the leaf data.
func RecordLeaf(recordHash string) ([32]byte, error) {
	b, err := base64.RawURLEncoding.Strict().DecodeString(recordHash)
	if err != nil || len(b) != 32 {
		return [32]byte{}, bad("record_hash_invalid", "record hash %q is not 32 bytes of base64url", recordHash)
	}
	return [32]byte(b), nil
}

// EmptyRoot is the RFC 6962 root of the empty tree.
func EmptyRoot() [32]byte { return sha256.Sum256(nil) }

// Root returns the RFC 6962 root over record hashes in order: the per-room
// archive_root and a host checkpoint's hash over the same leaves agree.
func Root(recordHashes [][32]byte) [32]byte {
	var b RootBuilder
	for _, rh := range recordHashes {
		b.Add(rh)
	}
	return b.Root()
}

// RootBuilder computes Root over record hashes given one at a time, in
// order, holding the compact range of those so far: at most 64 perfect
// subtrees, folded right to left by Root.
type RootBuilder struct {
	stack []subtree
}

type subtree struct {
	h     [32]byte
	count uint64
}

// Add appends the next record hash.
func (b *RootBuilder) Add(recordHash [32]byte) {
	s := subtree{LeafHash(recordHash), 1}
	for len(b.stack) > 0 && b.stack[len(b.stack)-1].count == s.count {
		top := b.stack[len(b.stack)-1]
		b.stack = b.stack[:len(b.stack)-1]
		s = subtree{nodeHash(top.h, s.h), top.count * 2}
	}
	b.stack = append(b.stack, s)
}

// Root returns the root over the hashes added so far.
func (b *RootBuilder) Root() [32]byte {
	if len(b.stack) == 0 {
		return EmptyRoot()
	}
	h := b.stack[len(b.stack)-1].h
	for i := len(b.stack) - 2; i >= 0; i-- {
		h = nodeHash(b.stack[i].h, h)
	}
	return h
}

func nodeHash(l, r [32]byte) [32]byte {
	var b [1 + 32 + 32]byte // RFC 6962: SHA-256(0x01 || left || right)
	b[0] = 1
	copy(b[1:], l[:])
	copy(b[33:], r[:])
	return sha256.Sum256(b[:])
}

// InclusionProof proves that the leaf at LeafIndex is in the tree of
// TreeSize leaves.
type InclusionProof struct {
	LeafIndex uint64   `json:"leaf_index"`
	TreeSize  uint64   `json:"tree_size"`
	Hashes    []string `json:"hashes"` // standard base64, leaf to root
}

// ConsistencyProof proves that the tree of Size1 leaves is a prefix of the
// tree of Size2 leaves.
type ConsistencyProof struct {
	Size1  uint64   `json:"size1"`
	Size2  uint64   `json:"size2"`
	Hashes []string `json:"hashes"`
}

// EncodeHashes encodes proof hashes for the wire.
func EncodeHashes(hs [][]byte) []string {
	out := make([]string, len(hs))
	for i, h := range hs {
		out[i] = base64.StdEncoding.EncodeToString(h)
	}
	return out
}

// DecodeHashes decodes and bounds a proof's hashes.
func DecodeHashes(hs []string) ([][]byte, error) {
	if len(hs) > MaxProofHashes {
		return nil, bad("proof_invalid", "proof has %d hashes; at most %d", len(hs), MaxProofHashes)
	}
	out := make([][]byte, len(hs))
	for i, s := range hs {
		b, err := base64.StdEncoding.Strict().DecodeString(s)
		if err != nil || len(b) != 32 {
			return nil, bad("proof_invalid", "proof hash %d is not 32 bytes of base64", i)
		}
		out[i] = b
	}
	return out, nil
}

// VerifyInclusion checks that recordHash is the leaf at p.LeafIndex of the
// tree of p.TreeSize leaves whose root is root.
func VerifyInclusion(p InclusionProof, recordHash, root [32]byte) error {
	hs, err := DecodeHashes(p.Hashes)
	if err != nil {
		return err
	}
	if p.LeafIndex >= p.TreeSize {
		return bad("proof_invalid", "leaf index %d is not below tree size %d", p.LeafIndex, p.TreeSize)
	}
	lh := LeafHash(recordHash)
	if err := proof.VerifyInclusion(rfc6962.DefaultHasher, p.LeafIndex, p.TreeSize, lh[:], hs, root[:]); err != nil {
		return bad("inclusion_proof_invalid", "inclusion proof: %v", err)
	}
	return nil
}

// VerifyConsistency checks that the tree (p.Size1, root1) is a prefix of
// the tree (p.Size2, root2).
func VerifyConsistency(p ConsistencyProof, root1, root2 [32]byte) error {
	hs, err := DecodeHashes(p.Hashes)
	if err != nil {
		return err
	}
	if p.Size1 > p.Size2 {
		return bad("proof_invalid", "size1 %d is above size2 %d", p.Size1, p.Size2)
	}
	if err := proof.VerifyConsistency(rfc6962.DefaultHasher, p.Size1, p.Size2, hs, root1[:], root2[:]); err != nil {
		return bad("consistency_proof_invalid", "consistency proof: %v", err)
	}
	return nil
}

// RecordProof is everything needed to check one record offline: its hash,
// its inclusion proof and the signed checkpoint the proof is against.
type RecordProof struct {
	RecordHash string         `json:"record_hash"`
	Inclusion  InclusionProof `json:"inclusion"`
	Checkpoint string         `json:"checkpoint"` // the signed note
}

// VerifyRecord checks a record proof against the log's verifier: the
// checkpoint's signature, that the proof is for the checkpoint's size, and
// the inclusion of the record hash. It returns the checkpoint.
func VerifyRecord(rp RecordProof, v note.Verifier, others ...note.Verifier) (Checkpoint, error) {
	leaf, err := RecordLeaf(rp.RecordHash)
	if err != nil {
		return Checkpoint{}, err
	}
	c, _, err := Open([]byte(rp.Checkpoint), v, others...)
	if err != nil {
		return Checkpoint{}, err
	}
	if rp.Inclusion.TreeSize != c.Size {
		return Checkpoint{}, bad("proof_invalid", "proof is for tree size %d; the checkpoint's is %d", rp.Inclusion.TreeSize, c.Size)
	}
	if err := VerifyInclusion(rp.Inclusion, leaf, c.Hash); err != nil {
		return Checkpoint{}, err
	}
	return c, nil
}

// EncodeRecordHash is the inverse of RecordLeaf: ADP's base64url record
// hash of the leaf data.
func EncodeRecordHash(h [32]byte) string { return base64.RawURLEncoding.EncodeToString(h[:]) }

// FileType is the "type" of a record proof file: what GET
// /v1/log/inclusion answers and `adpnode verify` checks offline.
const FileType = "adp.record-proof"

// File is a self-contained record proof: the proof, the log's note
// verifier key (whose Ed25519 key is the host key, so a reader compares
// it with the host key they trust), and optionally the record itself.
type File struct {
	Type string `json:"type"`
	RecordProof
	VerifierKey string `json:"verifier_key"`
	// Witnesses, when present, are the cosignature/v1 verifier keys of
	// witnesses whose lines follow the log's signature on Checkpoint
	// (adp/tlogwitness.VerifyCosigned checks them). They are listed by
	// the host: which of them to trust is the reader's choice.
	Witnesses []string `json:"witnesses,omitempty"`
	// Record, when present, is the full record; its hash must be
	// RecordHash.
	Record json.RawMessage `json:"record,omitempty"`
}

// HostKey returns the Ed25519 public key inside a note verifier key of
// type Ed25519 (name+hash+base64(0x01 || key)).
func HostKey(vkey string) (ed25519.PublicKey, error) {
	// name+hash+key: a name has no '+', base64 may.
	parts := strings.SplitN(vkey, "+", 3)
	if len(parts) != 3 {
		return nil, bad("verifier_key_invalid", "verifier key %q is malformed", vkey)
	}
	b, err := base64.StdEncoding.DecodeString(parts[2])
	if err != nil || len(b) != 1+ed25519.PublicKeySize || b[0] != 0x01 {
		return nil, bad("verifier_key_invalid", "verifier key is not an Ed25519 note key")
	}
	return ed25519.PublicKey(b[1:]), nil
}

// VerifyFile checks a record proof file with the verifier key it carries
// and returns the checkpoint and the host key inside that verifier key
// (which the caller compares with the host key it trusts). It does not
// check f.Record.
func VerifyFile(f File) (Checkpoint, ed25519.PublicKey, error) {
	if f.Type != FileType {
		return Checkpoint{}, nil, bad("proof_invalid", "type is %q, not %q", f.Type, FileType)
	}
	pub, err := HostKey(f.VerifierKey)
	if err != nil {
		return Checkpoint{}, nil, err
	}
	v, err := note.NewVerifier(f.VerifierKey)
	if err != nil {
		return Checkpoint{}, nil, bad("verifier_key_invalid", "verifier key: %v", err)
	}
	c, err := VerifyRecord(f.RecordProof, v)
	return c, pub, err
}
