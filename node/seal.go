package node

import (
	"bytes"
	"encoding/json"

	"github.com/adpnode/adpnode/adp"
	"github.com/adpnode/adpnode/adp/identity"
	"github.com/adpnode/adpnode/adp/record"
	"github.com/adpnode/adpnode/adp/room"
	"github.com/adpnode/adpnode/adp/seal"
)

// The host-local rules of member-only rooms (docs/sealed-rooms.md). They
// run after room.State.Admit, under the sequencer lock, and only on this
// host's write path: mirrors, archives and `adpnode verify` replay the
// records with the kernel alone, which sees ciphertext as ordinary
// message content and seal.key / seal.epoch as ordinary signal types.

// sealRoom is what the host keeps of a member-only room: the folded keys
// and current epoch (no secret). Built lazily from the stored records on a
// room's first write after a start; guarded by the room's seqMu.
type sealRoom struct {
	st seal.RoomState
}

// sealCheck applies the member-only rules to an admitted write.
func (n *Node) sealCheck(hr *hostedRoom, st *room.State, env *identity.Envelope, a *room.Admission) error {
	ev := &env.Event
	switch a.Type {
	case "room.create":
		return sealCreate(ev.Payload)
	case "room.update":
		return sealUpdate(st, ev.Payload)
	}
	if len(st.Policy.Extra) == 0 {
		return nil // the common case: no policy.extra, hub-trusted
	}
	mode, _ := seal.ModeOf(st.Policy.Extra)
	if mode != seal.MemberOnly {
		return nil
	}
	// A custom type of kind message carries content, so it travels sealed
	// inside a message.create (decision 23); its plaintext form is refused.
	// Signal and control types (reactions, votes, seal.*) stay plaintext.
	if a.Def != nil && a.Def.Kind == adp.KindMessage {
		return seal.RequiredErr(a.Type)
	}
	switch a.Type {
	case seal.TypeKey, seal.TypeEpoch, "message.create":
	default:
		return nil
	}
	sr, err := n.sealState(hr, st)
	if err != nil {
		return err
	}
	switch a.Type {
	case seal.TypeKey:
		return sr.st.CheckKey(ev.Payload)
	case seal.TypeEpoch:
		return sr.st.CheckEpoch(ev.Payload, activeIDs(st))
	default:
		return sr.st.CheckMessage(ev.Actor, ev.Payload, activeIDs(st))
	}
}

// sealCommitted folds an accepted record into the room's sealed state
// (if it is held), under seqMu after the durable commit.
func (n *Node) sealCommitted(hr *hostedRoom, env *identity.Envelope, seq int64) {
	if hr.seal == nil {
		return
	}
	switch env.Event.Type {
	case seal.TypeKey, seal.TypeEpoch:
		hr.seal.st.Apply(seq, env.Event.Actor, env.Event.Type, env.Event.Payload)
	}
}

func activeIDs(st *room.State) []identity.AgentID {
	ms := st.Members()
	out := make([]identity.AgentID, len(ms))
	for i, m := range ms {
		out[i] = m.Agent
	}
	return out
}

// sealState returns the room's sealed state, folding it from the stored
// records on first use (one pass over the room, reading only the records
// of the two seal types).
func (n *Node) sealState(hr *hostedRoom, st *room.State) (*sealRoom, error) {
	if hr.seal != nil {
		return hr.seal, nil
	}
	sr := &sealRoom{}
	const page = 1000
	for after := int64(0); after < st.Seq; {
		raws, err := n.readRecords(hr.id, after, page)
		if err != nil {
			return nil, internal(err)
		}
		if len(raws) == 0 {
			break
		}
		for _, raw := range raws {
			after++
			if !bytes.Contains(raw, []byte(`"seal.`)) {
				continue
			}
			rec, env, err := record.Parse(raw)
			if err != nil {
				return nil, internal(err)
			}
			sr.st.Apply(rec.Seq, env.Event.Actor, env.Event.Type, env.Event.Payload)
		}
	}
	hr.seal = sr
	return sr, nil
}

// sealCreate checks a room.create's confidentiality setting; a
// member-only room must declare the seal.key and seal.epoch types as
// signals.
func sealCreate(payload []byte) error {
	var p struct {
		Policy struct {
			Extra json.RawMessage `json:"extra"`
		} `json:"policy"`
		Types []struct {
			Type string `json:"type"`
			Kind string `json:"kind"`
		} `json:"types"`
	}
	if err := json.Unmarshal(payload, &p); err != nil {
		return nil // Admit has checked the shape
	}
	mode, err := seal.ModeOf(p.Policy.Extra)
	if err != nil || mode != seal.MemberOnly {
		return err
	}
	need := map[string]bool{seal.TypeKey: true, seal.TypeEpoch: true}
	for _, t := range p.Types {
		if need[t.Type] && t.Kind == string(adp.KindSignal) {
			delete(need, t.Type)
		}
	}
	if len(need) > 0 {
		return adp.Reason(adp.CodeInvalidEvent, "seal_types_missing",
			"a member-only room must declare the seal.key and seal.epoch types (kind signal) in room.create.payload.types")
	}
	return nil
}

// sealUpdate refuses a room.update that changes the confidentiality: it
// is fixed at creation (earlier plaintext cannot be unsent, and a room
// that turns hub-trusted would send new plaintext to former keys' holders).
func sealUpdate(st *room.State, payload []byte) error {
	var p struct {
		Policy *struct {
			Extra json.RawMessage `json:"extra"`
		} `json:"policy"`
	}
	if err := json.Unmarshal(payload, &p); err != nil || p.Policy == nil {
		return nil
	}
	now, _ := seal.ModeOf(st.Policy.Extra)
	next, err := seal.ModeOf(p.Policy.Extra)
	if err != nil {
		return err
	}
	if next != now {
		return adp.Reason(adp.CodePermissionDenied, "seal_mode_fixed",
			"policy.extra.confidentiality is fixed when the room is created").WithData("confidentiality", now)
	}
	return nil
}
