package tlogwitness

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"strconv"
	"strings"

	"golang.org/x/mod/sumdb/note"
)

// algCosignatureV1 is the signature type byte of cosignature/v1 in key IDs
// and verifier keys (C2SP signed-note, tlog-cosignature).
const algCosignatureV1 = 0x04

// cosignatureKeyID is the 4-byte key ID of a cosignature/v1 key:
// SHA-256(name || "\n" || 0x04 || public key)[:4].
func cosignatureKeyID(name string, pub ed25519.PublicKey) uint32 {
	h := sha256.New()
	h.Write([]byte(name))
	h.Write([]byte{'\n', algCosignatureV1})
	h.Write(pub)
	return binary.BigEndian.Uint32(h.Sum(nil))
}

// cosignedMessage is what a cosignature/v1 signs: the header line, the
// time line, then the checkpoint body.
func cosignedMessage(t uint64, body []byte) []byte {
	msg := make([]byte, 0, 40+len(body))
	msg = append(msg, "cosignature/v1\ntime "...)
	msg = strconv.AppendUint(msg, t, 10)
	msg = append(msg, '\n')
	return append(msg, body...)
}

// Cosigner signs checkpoints with cosignature/v1.
type Cosigner struct {
	name string
	key  ed25519.PrivateKey
	id   uint32
}

// NewCosigner returns a cosigner named name (a witness name, conventionally
// a schemaless URL) with key.
func NewCosigner(name string, key ed25519.PrivateKey) (*Cosigner, error) {
	if !validKeyName(name) {
		return nil, errors.New("witness name must be non-empty and contain no spaces, newlines or '+'")
	}
	if len(key) != ed25519.PrivateKeySize {
		return nil, errors.New("witness key is not an Ed25519 private key")
	}
	pub := key.Public().(ed25519.PublicKey)
	return &Cosigner{name: name, key: key, id: cosignatureKeyID(name, pub)}, nil
}

// Name is the witness name in its signature lines.
func (c *Cosigner) Name() string { return c.name }

// VerifierKey is the cosigner's verifier key in the C2SP vkey encoding:
// name+hex key ID+base64(0x04 || public key).
func (c *Cosigner) VerifierKey() string {
	return CosignatureVerifierKey(c.name, c.key.Public().(ed25519.PublicKey))
}

// CosignatureVerifierKey encodes a cosignature/v1 verifier key.
func CosignatureVerifierKey(name string, pub ed25519.PublicKey) string {
	return name + "+" + strconv.FormatUint(uint64(cosignatureKeyID(name, pub))|1<<32, 16)[1:] + "+" +
		base64.StdEncoding.EncodeToString(append([]byte{algCosignatureV1}, pub...))
}

// Cosign returns the note signature line ("— name base64\n") cosigning
// checkpoint body at time t (seconds since the Unix epoch).
func (c *Cosigner) Cosign(body []byte, t uint64) string {
	sig := ed25519.Sign(c.key, cosignedMessage(t, body))
	raw := make([]byte, 0, 4+8+ed25519.SignatureSize)
	raw = binary.BigEndian.AppendUint32(raw, c.id)
	raw = binary.BigEndian.AppendUint64(raw, t)
	raw = append(raw, sig...)
	return "— " + c.name + " " + base64.StdEncoding.EncodeToString(raw) + "\n"
}

// CosignatureVerifier verifies cosignature/v1 signatures; it is a
// note.Verifier, so note.Open checks witness lines with it.
type CosignatureVerifier struct {
	name string
	id   uint32
	pub  ed25519.PublicKey
}

var _ note.Verifier = (*CosignatureVerifier)(nil)

// NewCosignatureVerifier parses a cosignature/v1 verifier key
// (name+hex key ID+base64(0x04 || 32-byte key)).
func NewCosignatureVerifier(vkey string) (*CosignatureVerifier, error) {
	name, rest, ok1 := strings.Cut(vkey, "+")
	hexID, b64, ok2 := strings.Cut(rest, "+")
	if !ok1 || !ok2 || !validKeyName(name) || len(hexID) != 8 {
		return nil, errors.New("malformed cosignature verifier key")
	}
	id, err := strconv.ParseUint(hexID, 16, 32)
	if err != nil {
		return nil, errors.New("malformed cosignature verifier key ID")
	}
	raw, err := base64.StdEncoding.Strict().DecodeString(b64)
	if err != nil || len(raw) != 1+ed25519.PublicKeySize || raw[0] != algCosignatureV1 {
		return nil, errors.New("verifier key is not a cosignature/v1 Ed25519 key")
	}
	pub := ed25519.PublicKey(raw[1:])
	if uint32(id) != cosignatureKeyID(name, pub) {
		return nil, errors.New("verifier key ID does not match its name and key")
	}
	return &CosignatureVerifier{name: name, id: uint32(id), pub: pub}, nil
}

// Name implements note.Verifier.
func (v *CosignatureVerifier) Name() string { return v.name }

// Key returns the verifier key in the C2SP vkey encoding.
func (v *CosignatureVerifier) Key() string { return CosignatureVerifierKey(v.name, v.pub) }

// PublicKey returns the witness's Ed25519 key.
func (v *CosignatureVerifier) PublicKey() ed25519.PublicKey { return v.pub }

// KeyHash implements note.Verifier.
func (v *CosignatureVerifier) KeyHash() uint32 { return v.id }

// Verify implements note.Verifier: sig is the 8-byte big-endian time then
// the Ed25519 signature (note.Open strips the key ID).
func (v *CosignatureVerifier) Verify(msg, sig []byte) bool {
	if len(sig) != 8+ed25519.SignatureSize {
		return false
	}
	t := binary.BigEndian.Uint64(sig)
	return ed25519.Verify(v.pub, cosignedMessage(t, msg), sig[8:])
}

// CosignatureTime returns the time a verified cosignature/v1 signature
// (note.Signature.Base64) carries.
func CosignatureTime(sigBase64 string) (uint64, bool) {
	raw, err := base64.StdEncoding.DecodeString(sigBase64)
	if err != nil || len(raw) != 4+8+ed25519.SignatureSize {
		return 0, false
	}
	return binary.BigEndian.Uint64(raw[4:]), true
}

// validKeyName is note's rule for key names: non-empty, no Unicode spaces
// or '+'.
func validKeyName(name string) bool {
	return name != "" && strings.IndexFunc(name, func(r rune) bool {
		return r == '+' || r <= ' ' || r == 0x85 || r == 0xa0 || (r >= 0x2000 && r <= 0x200a) || r == 0x2028 || r == 0x2029 || r == 0x3000
	}) < 0
}

func b64(s string) ([]byte, error) { return base64.StdEncoding.DecodeString(s) }
