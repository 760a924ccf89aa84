package seal

import (
	"encoding/json"
	"errors"
	"io"

	"github.com/adpnode/adpnode/adp/identity"
)

// Recipient is an active member with its published key.
type Recipient struct {
	Member identity.AgentID
	Key    MemberKey
}

// Recipients lists the expected members of the next epoch with their keys,
// in the order of active.
func (s *RoomState) Recipients(active []identity.AgentID) []Recipient {
	var out []Recipient
	for _, a := range active {
		if k, ok := s.Keys[a]; ok {
			out = append(out, Recipient{Member: a, Key: k})
		}
	}
	return out
}

// NewEpoch makes a fresh epoch key from r and the seal.epoch payload that
// wraps it for each recipient. The wrap size is fixed (WrapSize), so the
// payload grows linearly with the members.
func NewEpoch(r io.Reader, roomID string, epoch int64, to []Recipient) (*EpochPayload, []byte, error) {
	if len(to) == 0 {
		return nil, nil, errors.New("seal: an epoch needs at least one recipient")
	}
	key := make([]byte, EpochKeySize)
	if _, err := io.ReadFull(r, key); err != nil {
		return nil, nil, err
	}
	p := &EpochPayload{Epoch: epoch, Commit: identity.EncodeB64(Commit(roomID, epoch, key))}
	for _, rc := range to {
		w, err := WrapKey(rc.Key.Public, roomID, epoch, string(rc.Member), key)
		if err != nil {
			return nil, nil, err
		}
		p.Wraps = append(p.Wraps, Wrap{Member: rc.Member, KeySeq: rc.Key.Seq, Wrap: identity.EncodeB64(w)})
	}
	return p, key, nil
}

// OpenEpoch finds member's wrap in p and opens it with priv. It fails with
// ErrOpen when p has no wrap for member (a removed member) or it does not
// open with priv.
func OpenEpoch(priv *PrivateKey, roomID string, member identity.AgentID, p *EpochPayload) ([]byte, error) {
	commit, err := identity.DecodeB64Len(p.Commit, CommitSize)
	if err != nil {
		return nil, ErrOpen
	}
	for _, w := range p.Wraps {
		if w.Member != member {
			continue
		}
		b, err := identity.DecodeB64Len(w.Wrap, WrapSize)
		if err != nil {
			return nil, ErrOpen
		}
		return priv.Unwrap(b, roomID, p.Epoch, string(member), commit)
	}
	return nil, ErrOpen
}

// SealedPayload is a sealed message.create payload.
type SealedPayload struct {
	ContentType string   `json:"content_type"`
	Content     Sealed   `json:"content"`
	References  []string `json:"references,omitempty"`
}

// SealMessage seals inner under the epoch key for sender in roomID.
func SealMessage(r io.Reader, key []byte, roomID string, epoch int64, sender identity.AgentID, inner Inner) (*SealedPayload, error) {
	pt, err := json.Marshal(inner)
	if err != nil {
		return nil, err
	}
	nonce, ct, err := SealBytes(r, key, roomID, epoch, string(sender), pt)
	if err != nil {
		return nil, err
	}
	return &SealedPayload{ContentType: ContentType, Content: Sealed{
		Epoch: epoch, Nonce: identity.EncodeB64(nonce), Ciphertext: identity.EncodeB64(ct)}}, nil
}

// OpenMessage opens a sealed content object sent by sender in roomID.
func OpenMessage(key []byte, roomID string, sender identity.AgentID, s *Sealed) (*Inner, error) {
	nonce, err := identity.DecodeB64Len(s.Nonce, NonceSize)
	if err != nil {
		return nil, ErrOpen
	}
	ct, err := identity.DecodeB64(s.Ciphertext)
	if err != nil {
		return nil, ErrOpen
	}
	pt, err := OpenBytes(key, roomID, s.Epoch, string(sender), nonce, ct)
	if err != nil {
		return nil, err
	}
	var in Inner
	if err := json.Unmarshal(pt, &in); err != nil {
		return nil, ErrOpen
	}
	return &in, nil
}
