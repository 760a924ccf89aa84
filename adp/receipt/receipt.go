// Package receipt is the co-signed deal receipt of the bundled pack
// adpnode:deal/1.0 (event type deal.receipt): the one credential an agent
// cannot issue to itself. Both parties sign the same canonical content, and
// the receipt carries only a salted hash of the terms.
//
//	signed bytes = "adpnode.deal.receipt/1" 0x00 JCS(receipt without sigA, sigB)
//	sigA, sigB   = Ed25519 by partyA's and partyB's Agent ID keys (unpadded base64url)
//	termsHash    = base64url(SHA3-256(terms ‖ salt)), salt 32 random bytes
//
// A receipt counts only where it was made: CheckIn is the one verdict on a
// deal.receipt event found in a room. Beyond both signatures, the receipt
// must name that room (context) and a round of it (ref) that was agreed
// before the receipt's seq, and its two parties must be that round's two
// parties. A receipt copied into another room, naming a missing or
// unagreed round, or signed by anyone else does not count there.
//
// The package is pure (kernel rules): it parses, signs and verifies, and
// reads no clock. The host checks a receipt's shape only (the pack schema);
// readers — the Go client, the CLI, adpnode verify — call CheckIn, and the
// viewer applies the same rules in JavaScript.
package receipt

import (
	"crypto/ed25519"
	"crypto/sha3"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/adpnode/adpnode/adp/identity"
	"github.com/adpnode/adpnode/adp/jsonobj"
	"github.com/adpnode/adpnode/adp/rounds"
)

// Names of the receipt type.
const (
	EventType = "deal.receipt"           // the event type in the deal pack
	Type      = "adpnode.deal.receipt/1" // the payload's type member
	PackID    = "adpnode:deal/1.0"
	// Domain prefixes the signed bytes so a receipt signature can never be
	// taken for an event signature (which is over a 32-byte SHA3 digest)
	// or any other message.
	Domain = Type + "\x00"
	// SaltBytes is the length of the terms salt.
	SaltBytes = 32
	// MaxBytes bounds a receipt's JSON (the pack's max_payload_hint).
	MaxBytes = 4096
)

// Receipt is a deal receipt. SigA and SigB are empty while unsigned.
type Receipt struct {
	Type      string `json:"type"`
	PartyA    string `json:"partyA"`
	PartyB    string `json:"partyB"`
	TermsHash string `json:"termsHash"`
	Context   string `json:"context"`
	Ref       string `json:"ref"`
	TS        int64  `json:"ts"`
	SigA      string `json:"sigA,omitempty"`
	SigB      string `json:"sigB,omitempty"`
}

var fields = []string{"type", "partyA", "partyB", "termsHash", "context", "ref", "ts", "sigA", "sigB"}

// TermsHash returns base64url(SHA3-256(terms ‖ salt)). salt must be
// SaltBytes long (a fixed length keeps terms ‖ salt unambiguous).
func TermsHash(terms, salt []byte) (string, error) {
	if len(salt) != SaltBytes {
		return "", fmt.Errorf("receipt: salt must be %d bytes, not %d", SaltBytes, len(salt))
	}
	h := sha3.New256()
	h.Write(terms)
	h.Write(salt)
	return identity.EncodeB64(h.Sum(nil)), nil
}

// Parse decodes a receipt strictly: I-JSON (no duplicate names, no lone
// surrogates, integers in range), at most MaxBytes, a closed object with
// every member, and well-formed members. It does not check signatures (see
// Verify).
func Parse(raw []byte) (*Receipt, error) { return parse(raw, false) }

// ParseUnsigned is Parse for a receipt that may still lack one or both
// signatures (a party's draft).
func ParseUnsigned(raw []byte) (*Receipt, error) { return parse(raw, true) }

func parse(raw []byte, unsigned bool) (*Receipt, error) {
	if len(raw) > MaxBytes {
		return nil, fmt.Errorf("receipt: %d bytes, limit %d", len(raw), MaxBytes)
	}
	if err := identity.CheckJSON(raw); err != nil {
		return nil, fmt.Errorf("receipt: %v", err)
	}
	obj, err := jsonobj.Closed(raw, fields...)
	if err != nil {
		return nil, fmt.Errorf("receipt: %v", err)
	}
	for _, f := range fields {
		if !obj.Has(f) && !(unsigned && (f == "sigA" || f == "sigB")) {
			return nil, fmt.Errorf("receipt: lacks %q", f)
		}
	}
	var r Receipt
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, fmt.Errorf("receipt: %v", err)
	}
	if err := r.checkFields(); err != nil {
		return nil, err
	}
	for _, s := range []struct{ name, v string }{{"sigA", r.SigA}, {"sigB", r.SigB}} {
		if obj.Has(s.name) {
			if _, err := identity.DecodeB64Len(s.v, ed25519.SignatureSize); err != nil {
				return nil, fmt.Errorf("receipt: %s is not base64url of %d bytes", s.name, ed25519.SignatureSize)
			}
		}
	}
	return &r, nil
}

// checkFields checks the unsigned members.
func (r *Receipt) checkFields() error {
	if r.Type != Type {
		return fmt.Errorf("receipt: type must be %q", Type)
	}
	a, err := identity.ParseAgentID(r.PartyA)
	if err != nil {
		return fmt.Errorf("receipt: partyA: %v", err)
	}
	b, err := identity.ParseAgentID(r.PartyB)
	if err != nil {
		return fmt.Errorf("receipt: partyB: %v", err)
	}
	if a == b {
		return errors.New("receipt: partyA and partyB are the same agent")
	}
	if _, err := identity.DecodeB64Len(r.TermsHash, 32); err != nil {
		return errors.New("receipt: termsHash is not base64url of 32 bytes")
	}
	if _, err := identity.DecodeB64Len(r.Ref, 32); err != nil {
		return errors.New("receipt: ref is not base64url of 32 bytes (an event hash)")
	}
	if r.Context == "" || len(r.Context) > 256 {
		return errors.New("receipt: context must be 1..256 bytes")
	}
	if r.TS < 0 || r.TS > 253402300799 {
		return errors.New("receipt: ts must be epoch seconds in 0..253402300799")
	}
	return nil
}

// SigningBytes returns Domain followed by the JCS form of the receipt
// without sigA and sigB: what both parties sign.
func (r *Receipt) SigningBytes() ([]byte, error) {
	if err := r.checkFields(); err != nil {
		return nil, err
	}
	u := *r
	u.SigA, u.SigB = "", ""
	j, err := json.Marshal(u)
	if err != nil {
		return nil, err
	}
	canon, err := identity.Canonicalize(j)
	if err != nil {
		return nil, err
	}
	return append([]byte(Domain), canon...), nil
}

// Sign adds the signature of priv, which must be partyA's or partyB's key.
func (r *Receipt) Sign(priv ed25519.PrivateKey) error {
	msg, err := r.SigningBytes()
	if err != nil {
		return err
	}
	id := identity.AgentIDFromKey(priv.Public().(ed25519.PublicKey)).String()
	sig := identity.EncodeB64(ed25519.Sign(priv, msg))
	switch id {
	case r.PartyA:
		r.SigA = sig
	case r.PartyB:
		r.SigB = sig
	default:
		return fmt.Errorf("receipt: %s is neither partyA nor partyB", id)
	}
	return nil
}

// Result is the outcome of Verify for each signature.
type Result struct {
	A, B error // nil when that party's signature verifies
}

// OK reports whether both signatures verify.
func (v Result) OK() bool { return v.A == nil && v.B == nil }

// Err returns nil or an error naming each bad signature.
func (v Result) Err() error {
	var msgs []string
	if v.A != nil {
		msgs = append(msgs, "sigA: "+v.A.Error())
	}
	if v.B != nil {
		msgs = append(msgs, "sigB: "+v.B.Error())
	}
	if msgs == nil {
		return nil
	}
	return errors.New("receipt: " + strings.Join(msgs, "; "))
}

// Verify checks both signatures with strict Ed25519 (Identity §3).
func (r *Receipt) Verify() Result {
	msg, err := r.SigningBytes()
	if err != nil {
		return Result{A: err, B: err}
	}
	return Result{A: verifyOne(r.PartyA, r.SigA, msg), B: verifyOne(r.PartyB, r.SigB, msg)}
}

var (
	ErrMissing = errors.New("signature missing")
	ErrBad     = errors.New("signature does not verify")
)

func verifyOne(party, sig string, msg []byte) error {
	if sig == "" {
		return ErrMissing
	}
	id, err := identity.ParseAgentID(party)
	if err != nil {
		return err
	}
	s, err := identity.DecodeB64Len(sig, ed25519.SignatureSize)
	if err != nil {
		return ErrBad
	}
	if !identity.VerifyStrictMessage(id.PublicKey(), msg, s) {
		return ErrBad
	}
	return nil
}

// Check parses raw and verifies both signatures: nil only for a
// well-formed, fully co-signed receipt.
func Check(raw []byte) (*Receipt, error) {
	r, err := Parse(raw)
	if err != nil {
		return nil, err
	}
	return r, r.Verify().Err()
}

// Why a receipt whose signatures verify does not count in a room (Bind).
var (
	ErrOtherRoom  = errors.New("names another room")
	ErrNoRound    = errors.New("names no round of this room")
	ErrNotAgreed  = errors.New("names a round that was not agreed before it")
	ErrNotParties = errors.New("is not signed by its round's two parties")
)

// Bind reports why the receipt would not count in room roomID as the event
// at seq, or nil: its context must be roomID, its ref a round of res (the
// rounds derived from the room's records by adp/rounds) agreed at a seq
// below seq, and partyA and partyB that round's two parties, the author
// of the accepted offer and the acceptor, in either order. A receipt not
// yet in the room is checked at seq math.MaxInt64. Bind does not check the
// signatures (Verify; CheckIn does both).
func (r *Receipt) Bind(roomID string, seq int64, res *rounds.Result) error {
	if r.Context != roomID {
		return fmt.Errorf("receipt: %w: its context is %q, not %s", ErrOtherRoom, r.Context, roomID)
	}
	var rd *rounds.Round
	if res != nil {
		rd, _ = res.Round(r.Ref)
	}
	if rd == nil {
		return fmt.Errorf("receipt: %w: ref %s", ErrNoRound, r.Ref)
	}
	offerer, acceptor, agreed := rd.Parties()
	if !agreed {
		return fmt.Errorf("receipt: %w: round %s is %s and was never agreed", ErrNotAgreed, rd.ID, rd.State)
	}
	if rd.AgreedSeq >= seq {
		return fmt.Errorf("receipt: %w: round %s was agreed at seq %d, after it", ErrNotAgreed, rd.ID, rd.AgreedSeq)
	}
	if !(r.PartyA == offerer && r.PartyB == acceptor) && !(r.PartyA == acceptor && r.PartyB == offerer) {
		return fmt.Errorf("receipt: %w: round %s is between %s and %s", ErrNotParties, rd.ID, offerer, acceptor)
	}
	return nil
}

// CheckIn is the verdict on a deal.receipt event of room roomID at seq,
// given the rounds derived from the room's records: the receipt parsed
// (nil when it does not parse) and nil only when it is well formed, both
// signatures verify and it counts in this room (Bind). The signatures are
// checked first, so a receipt failing both ways reports its signatures.
func CheckIn(roomID string, seq int64, res *rounds.Result, raw []byte) (*Receipt, error) {
	r, err := Parse(raw)
	if err != nil {
		return nil, err
	}
	if err := r.Verify().Err(); err != nil {
		return r, err
	}
	return r, r.Bind(roomID, seq, res)
}

// Marshal returns the receipt's JSON (its members in schema order).
func (r *Receipt) Marshal() []byte {
	b, _ := json.Marshal(r)
	return b
}
