package seal

import (
	"sort"

	"github.com/adpnode/adpnode/adp"
	"github.com/adpnode/adpnode/adp/identity"
)

// MemberKey is a member's latest published key.
type MemberKey struct {
	Seq    int64  // seq of its seal.key record
	Public []byte // 32 bytes
}

// RoomState is what the host (and a client) folds from a member-only
// room's accepted seal.key and seal.epoch records: the latest key of each
// agent and the current epoch with the key each member got. It holds no
// secret. The zero value is a room before any record.
type RoomState struct {
	Keys     map[identity.AgentID]MemberKey
	Epoch    int64                      // current epoch, 0 before the first
	EpochSeq int64                      // seq of its seal.epoch record
	Wraps    map[identity.AgentID]int64 // member -> key_seq in the current epoch
}

// Apply folds one accepted record (seq, actor, type, payload) into s.
// Records of other types, and payloads that do not parse (the host never
// accepts them in a member-only room), leave s unchanged.
func (s *RoomState) Apply(seq int64, actor identity.AgentID, typ string, payload []byte) {
	switch typ {
	case TypeKey:
		// The host checked the key when it accepted the record (CheckKey);
		// a client folding a hostile host's records finds a bad key when
		// it wraps for it (WrapKey checks again).
		pub, err := parseKeyShape(payload)
		if err != nil {
			return
		}
		if s.Keys == nil {
			s.Keys = map[identity.AgentID]MemberKey{}
		}
		s.Keys[actor] = MemberKey{Seq: seq, Public: pub}
	case TypeEpoch:
		p, err := ParseEpoch(payload)
		if err != nil {
			return
		}
		s.Epoch, s.EpochSeq = p.Epoch, seq
		s.Wraps = make(map[identity.AgentID]int64, len(p.Wraps))
		for _, w := range p.Wraps {
			s.Wraps[w.Member] = w.KeySeq
		}
	}
}

// Expected is the set a new epoch must cover: the active members (in the
// order given) that have published a key, with the seq of that key.
func (s *RoomState) Expected(active []identity.AgentID) map[identity.AgentID]int64 {
	out := make(map[identity.AgentID]int64, len(active))
	for _, a := range active {
		if k, ok := s.Keys[a]; ok {
			out[a] = k.Seq
		}
	}
	return out
}

// Diff compares a wrap set with the expected one: missing are expected
// members without a wrap for their current key, unexpected are wrapped
// agents that are not expected (non-members, members without a key) or
// wrapped for an old key. Both are sorted.
func Diff(wraps, expected map[identity.AgentID]int64) (missing, unexpected []identity.AgentID) {
	for a, seq := range expected {
		if wraps[a] != seq {
			missing = append(missing, a)
		}
	}
	for a, seq := range wraps {
		if e, ok := expected[a]; !ok || e != seq {
			unexpected = append(unexpected, a)
		}
	}
	sort.Slice(missing, func(i, j int) bool { return missing[i] < missing[j] })
	sort.Slice(unexpected, func(i, j int) bool { return unexpected[i] < unexpected[j] })
	return missing, unexpected
}

// Fresh reports whether the current epoch covers exactly the expected set.
func (s *RoomState) Fresh(active []identity.AgentID) bool {
	if s.Epoch == 0 {
		return false
	}
	m, u := Diff(s.Wraps, s.Expected(active))
	return len(m) == 0 && len(u) == 0
}

func ids(a []identity.AgentID) []string {
	out := make([]string, len(a))
	for i, x := range a {
		out[i] = string(x)
	}
	return out
}

// CheckKey is the host rule for seal.key: a usable public key.
func (s *RoomState) CheckKey(payload []byte) error {
	_, err := ParseKey(payload)
	return err
}

// CheckEpoch is the host rule for seal.epoch: the shape, the next epoch
// number, and wraps for exactly the active members with published keys,
// each for the member's current key.
func (s *RoomState) CheckEpoch(payload []byte, active []identity.AgentID) error {
	p, err := ParseEpoch(payload)
	if err != nil {
		return err
	}
	if p.Epoch != s.Epoch+1 {
		return adp.Reason(adp.CodePermissionDenied, "seal_epoch_stale",
			"seal.epoch must carry the current epoch plus one; read the room and rotate again").
			WithData("current_epoch", s.Epoch)
	}
	wraps := make(map[identity.AgentID]int64, len(p.Wraps))
	for _, w := range p.Wraps {
		wraps[w.Member] = w.KeySeq
	}
	if m, u := Diff(wraps, s.Expected(active)); len(m) > 0 || len(u) > 0 {
		return adp.Reason(adp.CodePermissionDenied, "seal_wraps_mismatch",
			"seal.epoch must wrap the key for exactly the active members with published keys, each for its latest seal.key").
			WithData("current_epoch", s.Epoch).WithData("missing", ids(m)).WithData("unexpected", ids(u))
	}
	return nil
}

// CheckMessage is the host rule for message.create in a member-only room:
// sealed shape, the current epoch, an epoch that still covers exactly the
// active members with keys (otherwise the client must rotate), and a
// sender that holds the epoch key.
func (s *RoomState) CheckMessage(actor identity.AgentID, payload []byte, active []identity.AgentID) error {
	sd, err := ParseSealed(payload)
	if err != nil {
		return err
	}
	if s.Epoch == 0 {
		return adp.Reason(adp.CodePermissionDenied, "seal_rotation_required",
			"this member-only room has no epoch yet: publish a seal.epoch first").WithData("current_epoch", int64(0))
	}
	if sd.Epoch != s.Epoch {
		return adp.Reason(adp.CodePermissionDenied, "seal_epoch_stale",
			"the sealed message names an epoch that is not the current one").WithData("current_epoch", s.Epoch)
	}
	if m, u := Diff(s.Wraps, s.Expected(active)); len(m) > 0 || len(u) > 0 {
		return adp.Reason(adp.CodePermissionDenied, "seal_rotation_required",
			"membership or keys changed since the current epoch: publish a new seal.epoch, then seal under it").
			WithData("current_epoch", s.Epoch).WithData("missing", ids(m)).WithData("unexpected", ids(u))
	}
	if _, ok := s.Wraps[actor]; !ok {
		return adp.Reason(adp.CodePermissionDenied, "seal_key_required",
			"the sender holds no key of the current epoch: publish a seal.key first")
	}
	return nil
}
