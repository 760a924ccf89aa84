package seal

import (
	"encoding/json"
	"fmt"

	"github.com/adpnode/adpnode/adp"
	"github.com/adpnode/adpnode/adp/identity"
	"github.com/adpnode/adpnode/adp/jsonobj"
)

// Bounds on the sealed shapes, beyond the host's payload size limit.
const (
	MaxWraps      = 2048      // members one epoch may cover (§21: 100 speakers + 1000 observers fit)
	MaxCiphertext = 256 << 10 // decoded bytes of one sealed message
	maxEpoch      = 1<<53 - 1 // a safe JSON integer
)

// KeyPayload is the payload of seal.key.
type KeyPayload struct {
	PublicKey string `json:"public_key"`
}

// EpochPayload is the payload of seal.epoch.
type EpochPayload struct {
	Epoch  int64  `json:"epoch"`
	Commit string `json:"commit"`
	Wraps  []Wrap `json:"wraps"`
}

// Wrap is one member's copy of the epoch key. KeySeq is the seq of the
// seal.key record whose key it is wrapped for.
type Wrap struct {
	Member identity.AgentID `json:"member"`
	KeySeq int64            `json:"key_seq"`
	Wrap   string           `json:"wrap"`
}

// Sealed is the content object of a sealed message.create.
type Sealed struct {
	Epoch      int64  `json:"epoch"`
	Nonce      string `json:"nonce"`
	Ciphertext string `json:"ciphertext"`
}

// Inner is what a sealed message's ciphertext holds: the content the
// hub-trusted message.create would carry in the clear.
type Inner struct {
	ContentType string          `json:"content_type"`
	Content     json.RawMessage `json:"content"`
	Extra       json.RawMessage `json:"extra,omitempty"`
}

func shapeErr(format string, args ...any) *adp.Error {
	return adp.Reason(adp.CodePayloadSchemaViolation, "seal_shape", fmt.Sprintf(format, args...))
}

// ParseKey checks a seal.key payload and returns the public key bytes.
func ParseKey(payload []byte) ([]byte, error) {
	pub, err := parseKeyShape(payload)
	if err != nil {
		return nil, err
	}
	if !ValidPublicKey(pub) {
		return nil, shapeErr("seal.key public_key is not a usable X25519 key (low-order point)")
	}
	return pub, nil
}

func parseKeyShape(payload []byte) ([]byte, error) {
	var p KeyPayload
	if err := jsonobj.Unmarshal(payload, &p, "public_key"); err != nil {
		return nil, shapeErr("seal.key payload must be {\"public_key\": base64url of 32 bytes}: %v", err)
	}
	pub, err := identity.DecodeB64Len(p.PublicKey, PublicKeySize)
	if err != nil {
		return nil, shapeErr("seal.key public_key must be base64url of 32 bytes")
	}
	return pub, nil
}

// ParseEpoch checks the shape of a seal.epoch payload: closed objects,
// a positive epoch, a 32-byte commitment, well-formed distinct members and
// wraps of exactly WrapSize bytes.
func ParseEpoch(payload []byte) (*EpochPayload, error) {
	var p EpochPayload
	if err := jsonobj.Unmarshal(payload, &p, "epoch", "commit", "wraps"); err != nil {
		return nil, shapeErr("seal.epoch payload must be {epoch, commit, wraps}: %v", err)
	}
	if p.Epoch < 1 || p.Epoch > maxEpoch {
		return nil, shapeErr("seal.epoch epoch must be a positive safe integer")
	}
	if _, err := identity.DecodeB64Len(p.Commit, CommitSize); err != nil {
		return nil, shapeErr("seal.epoch commit must be base64url of 32 bytes")
	}
	if len(p.Wraps) == 0 {
		return nil, shapeErr("seal.epoch wraps must not be empty")
	}
	if len(p.Wraps) > MaxWraps {
		return nil, adp.Reason(adp.CodePayloadTooLarge, "seal_wraps", fmt.Sprintf("seal.epoch carries at most %d wraps", MaxWraps))
	}
	// Each wrap object is closed too.
	var raw struct {
		Wraps []json.RawMessage `json:"wraps"`
	}
	_ = json.Unmarshal(payload, &raw)
	seen := make(map[identity.AgentID]bool, len(p.Wraps))
	for i, w := range p.Wraps {
		if _, err := jsonobj.Closed(raw.Wraps[i], "member", "key_seq", "wrap"); err != nil {
			return nil, shapeErr("seal.epoch wraps[%d] must be {member, key_seq, wrap}: %v", i, err)
		}
		if _, err := identity.ParseAgentID(string(w.Member)); err != nil {
			return nil, shapeErr("seal.epoch wraps[%d].member is not an Agent ID", i)
		}
		if seen[w.Member] {
			return nil, shapeErr("seal.epoch wraps[%d].member appears twice", i)
		}
		seen[w.Member] = true
		if w.KeySeq < 1 || w.KeySeq > maxEpoch {
			return nil, shapeErr("seal.epoch wraps[%d].key_seq must be a positive integer", i)
		}
		if _, err := identity.DecodeB64Len(w.Wrap, WrapSize); err != nil {
			return nil, shapeErr("seal.epoch wraps[%d].wrap must be base64url of %d bytes", i, WrapSize)
		}
	}
	return &p, nil
}

// ParseSealed checks a sealed message.create payload: content_type is
// ContentType and content is {epoch, nonce, ciphertext}. A payload in
// another content type is refused with reason seal_required.
func ParseSealed(payload []byte) (*Sealed, error) {
	var p struct {
		ContentType string          `json:"content_type"`
		Content     json.RawMessage `json:"content"`
	}
	if err := json.Unmarshal(payload, &p); err != nil {
		return nil, shapeErr("message.create payload: %v", err)
	}
	if p.ContentType != ContentType {
		return nil, adp.Reason(adp.CodePayloadSchemaViolation, "seal_required",
			"this room is member-only: message.create content must be sealed (content_type "+ContentType+")")
	}
	var s Sealed
	if err := jsonobj.Unmarshal(p.Content, &s, "epoch", "nonce", "ciphertext"); err != nil {
		return nil, shapeErr("sealed content must be {epoch, nonce, ciphertext}: %v", err)
	}
	if s.Epoch < 1 || s.Epoch > maxEpoch {
		return nil, shapeErr("sealed content epoch must be a positive safe integer")
	}
	if _, err := identity.DecodeB64Len(s.Nonce, NonceSize); err != nil {
		return nil, shapeErr("sealed content nonce must be base64url of %d bytes", NonceSize)
	}
	if len(s.Ciphertext) > b64Len(MaxCiphertext) {
		return nil, adp.Reason(adp.CodePayloadTooLarge, "seal_ciphertext", fmt.Sprintf("sealed ciphertext is limited to %d bytes", MaxCiphertext))
	}
	ct, err := identity.DecodeB64(s.Ciphertext)
	if err != nil || len(ct) < TagSize {
		return nil, shapeErr("sealed content ciphertext must be base64url of at least %d bytes", TagSize)
	}
	return &s, nil
}

func b64Len(n int) int { return (n*8 + 5) / 6 }
