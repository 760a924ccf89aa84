package seal

import (
	"encoding/json"

	"github.com/adpnode/adpnode/adp"
)

// The room setting: policy.extra.confidentiality.
const (
	ExtraKey   = "confidentiality"
	HubTrusted = "hub-trusted" // the default: the host relays plaintext
	MemberOnly = "member-only" // message content is sealed for members
)

// Event types and the sealed content type.
const (
	TypeKey     = "seal.key"
	TypeEpoch   = "seal.epoch"
	ContentType = "application/vnd.adpnode.sealed+json"
)

// ModeOf reads the confidentiality of a room from its policy.extra (raw
// JSON, possibly empty). An absent setting is HubTrusted; an unknown value
// is an invalid_event error.
func ModeOf(policyExtra json.RawMessage) (string, error) {
	if len(policyExtra) == 0 {
		return HubTrusted, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(policyExtra, &m); err != nil || m == nil {
		return HubTrusted, nil // not an object: no setting of ours
	}
	raw, ok := m[ExtraKey]
	if !ok {
		return HubTrusted, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil || (s != HubTrusted && s != MemberOnly) {
		return "", adp.Reason(adp.CodeInvalidEvent, "seal_mode",
			`policy.extra.confidentiality must be "hub-trusted" or "member-only"`)
	}
	return s, nil
}

// TypeDeclarations are the inline type definitions a member-only room
// declares in room.create.payload.types (the host requires both). Their
// schemas document the shapes; the host checks the shapes itself.
func TypeDeclarations() []json.RawMessage {
	return []json.RawMessage{json.RawMessage(keyTypeJSON), json.RawMessage(epochTypeJSON)}
}

const b64_32 = `{"type":"string","pattern":"^[A-Za-z0-9_-]{43}$"}`

const keyTypeJSON = `{"type":"seal.key","kind":"signal","title":"Sealing key",` +
	`"description":"The sender's X25519 public key for member-only rooms; the signature on the event binds it to the Agent ID.",` +
	`"schema":{"type":"object","required":["public_key"],"properties":{"public_key":` + b64_32 + `},"additionalProperties":false},` +
	`"instructions":"Publish one before reading or sending in a member-only room; publishing a new one replaces the old and starts a new epoch at the next send."}`

const epochTypeJSON = `{"type":"seal.epoch","kind":"signal","title":"Epoch key",` +
	`"description":"A new room epoch: a fresh key wrapped (HPKE X25519) for every active member with a published key.",` +
	`"schema":{"type":"object","required":["epoch","commit","wraps"],"properties":{` +
	`"epoch":{"type":"integer","minimum":1},"commit":` + b64_32 + `,` +
	`"wraps":{"type":"array","items":{"type":"object","required":["member","key_seq","wrap"],"properties":{` +
	`"member":{"type":"string"},"key_seq":{"type":"integer","minimum":1},"wrap":{"type":"string","pattern":"^[A-Za-z0-9_-]{107}$"}},` +
	`"additionalProperties":false}}},"additionalProperties":false},` +
	`"max_payload_hint":262144,` +
	`"instructions":"Sent by a member's client before sealing when the current epoch does not cover exactly the active members with published keys; the epoch number is the current one plus one."}`
