// Package record defines ADP server records (§15): the acceptance metadata a
// host attaches to an envelope, the record hash and the per-room hash chain.
package record

import (
	"bytes"
	"crypto/sha3"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/adpnode/adpnode/adp"
	"github.com/adpnode/adpnode/adp/identity"
	"github.com/adpnode/adpnode/adp/jsonobj"
)

// Record is a server acceptance record. Its JSON form has exactly the fields
// room_id, seq, pre_hash, hash, received_at and envelope (DECISIONS 17).
type Record struct {
	RoomID     string
	Seq        int64
	PreHash    string // "" for seq 1 (JSON null)
	Hash       string
	ReceivedAt int64
	Envelope   json.RawMessage // canonical (JCS) envelope bytes
}

var b64 = base64.RawURLEncoding

// ValidRoomID reports whether s is an Xid-style room ID: 20 characters of
// the lowercase base32hex alphabet (DECISIONS 5).
func ValidRoomID(s string) bool {
	if len(s) != 20 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'v') {
			return false
		}
	}
	return true
}

// ComputeHash returns the record hash of DECISIONS 1 / §15:
// b64url(SHA3-256(JCS({room_id, seq, pre_hash, envelope_hash, received_at}))).
// roomID must be a valid room ID and the hashes canonical base64url strings,
// so no JSON escaping is needed; callers validate them first.
func ComputeHash(roomID string, seq int64, preHash, envelopeHash string, receivedAt int64) string {
	var buf [256]byte
	b := buf[:0]
	// JCS member order: envelope_hash, pre_hash, received_at, room_id, seq.
	b = append(b, `{"envelope_hash":"`...)
	b = append(b, envelopeHash...)
	b = append(b, `","pre_hash":`...)
	if preHash == "" {
		b = append(b, "null"...)
	} else {
		b = append(b, '"')
		b = append(b, preHash...)
		b = append(b, '"')
	}
	b = append(b, `,"received_at":`...)
	b = strconv.AppendInt(b, receivedAt, 10)
	b = append(b, `,"room_id":"`...)
	b = append(b, roomID...)
	b = append(b, `","seq":`...)
	b = strconv.AppendInt(b, seq, 10)
	b = append(b, '}')
	sum := sha3.Sum256(b)
	return b64.EncodeToString(sum[:])
}

// New builds the record for env accepted at seq after preHash.
func New(roomID string, seq int64, preHash string, env *identity.Envelope, receivedAt int64) *Record {
	return &Record{
		RoomID:     roomID,
		Seq:        seq,
		PreHash:    preHash,
		Hash:       ComputeHash(roomID, seq, preHash, env.Hash, receivedAt),
		ReceivedAt: receivedAt,
		Envelope:   env.Raw,
	}
}

// MarshalJSON writes the record in the spec's field order with the stored
// envelope bytes embedded unchanged.
func (r *Record) MarshalJSON() ([]byte, error) {
	b := make([]byte, 0, len(r.Envelope)+200)
	b = append(b, `{"room_id":"`...)
	b = append(b, r.RoomID...)
	b = append(b, `","seq":`...)
	b = strconv.AppendInt(b, r.Seq, 10)
	b = append(b, `,"pre_hash":`...)
	b = appendNullable(b, r.PreHash)
	b = append(b, `,"hash":"`...)
	b = append(b, r.Hash...)
	b = append(b, `","received_at":`...)
	b = strconv.AppendInt(b, r.ReceivedAt, 10)
	b = append(b, `,"envelope":`...)
	b = append(b, r.Envelope...)
	b = append(b, '}')
	return b, nil
}

// AppendCanonical appends JCS(record) to b. It relies on Envelope being
// canonical already (it is for every record built by New or Parse).
func (r *Record) AppendCanonical(b []byte) []byte {
	// JCS member order: envelope, hash, pre_hash, received_at, room_id, seq.
	b = append(b, `{"envelope":`...)
	b = append(b, r.Envelope...)
	b = append(b, `,"hash":"`...)
	b = append(b, r.Hash...)
	b = append(b, `","pre_hash":`...)
	b = appendNullable(b, r.PreHash)
	b = append(b, `,"received_at":`...)
	b = strconv.AppendInt(b, r.ReceivedAt, 10)
	b = append(b, `,"room_id":"`...)
	b = append(b, r.RoomID...)
	b = append(b, `","seq":`...)
	b = strconv.AppendInt(b, r.Seq, 10)
	b = append(b, '}')
	return b
}

func appendNullable(b []byte, s string) []byte {
	if s == "" {
		return append(b, "null"...)
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// Parse strictly parses one server record and its envelope. It checks: the
// strict JSON rules, the closed record shape, field formats, the envelope's
// shape, event hash and signature, and that the record hash recomputes.
// It does not check chain continuity or room rules (see Chain and room.Apply).
func Parse(data []byte) (*Record, *identity.Envelope, error) {
	if err := identity.CheckJSON(data); err != nil {
		return nil, nil, adp.Reason(adp.CodeInvalidEvent, "record_json", "record: "+err.Error())
	}
	obj, err := jsonobj.ClosedStrict(data, "room_id", "seq", "pre_hash", "hash", "received_at", "envelope")
	if err != nil {
		if e := err.(*jsonobj.Error); e.Kind == jsonobj.Unknown {
			return nil, nil, adp.Reason(adp.CodeInvalidEvent, "record_shape", fmt.Sprintf("record has unknown field %q", e.Key))
		}
		return nil, nil, adp.Reason(adp.CodeInvalidEvent, "record_shape", "record "+err.Error())
	}
	member := func(name string) json.RawMessage { v, _ := obj.Get(name); return v }
	bad := func(field, why string) error {
		return adp.Reason(adp.CodeInvalidEvent, "record_"+field, "record "+field+": "+why)
	}
	var r Record
	if err := decodeString(member("room_id"), &r.RoomID); err != nil || !ValidRoomID(r.RoomID) {
		return nil, nil, bad("room_id", "missing or not a room ID")
	}
	var ok bool
	if r.Seq, ok = decodeInt(member("seq")); !ok || r.Seq < 1 {
		return nil, nil, bad("seq", "missing or not a positive integer")
	}
	if r.ReceivedAt, ok = decodeInt(member("received_at")); !ok || r.ReceivedAt < 0 {
		return nil, nil, bad("received_at", "missing or not a non-negative integer")
	}
	if err := decodeString(member("hash"), &r.Hash); err != nil || !validHash(r.Hash) {
		return nil, nil, bad("hash", "missing or not a base64url SHA3-256 digest")
	}
	pre, present := obj.Get("pre_hash")
	switch {
	case !present:
		return nil, nil, bad("pre_hash", "missing")
	case bytes.Equal(pre, []byte("null")):
		if r.Seq != 1 {
			return nil, nil, bad("pre_hash", "null after seq 1")
		}
	default:
		if err := decodeString(pre, &r.PreHash); err != nil || !validHash(r.PreHash) {
			return nil, nil, bad("pre_hash", "not a base64url SHA3-256 digest")
		}
		if r.Seq == 1 {
			return nil, nil, bad("pre_hash", "must be null at seq 1")
		}
	}
	envRaw, present := obj.Get("envelope")
	if !present {
		return nil, nil, bad("envelope", "missing")
	}
	env, err := identity.OpenEnvelope(envRaw)
	if err != nil {
		return nil, nil, err
	}
	r.Envelope = env.Raw
	if want := ComputeHash(r.RoomID, r.Seq, r.PreHash, env.Hash, r.ReceivedAt); want != r.Hash {
		return nil, nil, bad("hash", "does not recompute from the record fields")
	}
	return &r, env, nil
}

func decodeString(raw json.RawMessage, s *string) error {
	v, ok := jsonobj.String(raw)
	if !ok {
		return fmt.Errorf("not a string")
	}
	*s = v
	return nil
}

// decodeInt decodes a JSON integer literal (strict JSON already bounded it).
func decodeInt(raw json.RawMessage) (int64, bool) {
	if len(raw) == 0 {
		return 0, false
	}
	n, err := strconv.ParseInt(string(raw), 10, 64)
	return n, err == nil
}

func validHash(s string) bool {
	_, err := identity.DecodeB64Len(s, 32)
	return err == nil
}

// ChainError names the first record at which a chain check failed.
type ChainError struct {
	Seq    int64
	Reason string
}

func (e *ChainError) Error() string { return fmt.Sprintf("seq %d: %s", e.Seq, e.Reason) }

// Link checks that next continues a chain whose last record is prev (nil
// before the first record): same room, seq+1, pre_hash = prev.hash, and a
// received_at that does not go backwards.
func Link(prev, next *Record) error {
	if prev == nil {
		if next.Seq != 1 {
			return &ChainError{Seq: next.Seq, Reason: "chain does not start at seq 1"}
		}
		if next.PreHash != "" {
			return &ChainError{Seq: next.Seq, Reason: "pre_hash of seq 1 is not null"}
		}
		return nil
	}
	switch {
	case next.RoomID != prev.RoomID:
		return &ChainError{Seq: prev.Seq + 1, Reason: "room_id differs from the previous record"}
	case next.Seq != prev.Seq+1:
		return &ChainError{Seq: prev.Seq + 1, Reason: fmt.Sprintf("seq %d follows seq %d", next.Seq, prev.Seq)}
	case next.PreHash != prev.Hash:
		return &ChainError{Seq: next.Seq, Reason: "pre_hash does not equal the previous record's hash"}
	case next.ReceivedAt < prev.ReceivedAt:
		return &ChainError{Seq: next.Seq, Reason: "received_at goes backwards"}
	}
	return nil
}
