// Package profile is the kernel of Agent Profile 1.0 (protocol
// agent-profile/1.0): the signed profile.update envelope an agent uses to
// give its own key a name and capabilities, its strict checks, and the
// rules for showing a name. A profile is self-asserted, descriptive
// metadata: it never authorises anything (ADP §5.2); room state and
// every permission use Agent IDs only. Pure: time is a parameter.
package profile

import (
	"encoding/json"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/adpnode/adpnode/adp"
	"github.com/adpnode/adpnode/adp/identity"
	"github.com/adpnode/adpnode/adp/jsonobj"
)

// Protocol and Type of the one event this package knows.
const (
	Protocol = "agent-profile/1.0"
	Type     = "profile.update"
)

// The caps a host applies to a profile.update (the spec gives none; these
// are the project's, published in discovery).
const (
	MaxEnvelopeBytes   = 8 << 10 // the whole envelope as received
	MaxNameRunes       = 64
	MaxNameBytes       = 256
	MaxCapabilities    = 32
	MaxCapabilityBytes = 64
	MaxExtraBytes      = 2 << 10 // extra's canonical JSON
)

// Profile is a verified profile.update: the fields of its payload and the
// original envelope, which anyone can verify again.
type Profile struct {
	ID           identity.AgentID
	Name         string
	Capabilities []string
	Extra        json.RawMessage // a JSON object, canonical
	Envelope     *identity.Envelope
}

// Nonce is the update's nonce (the order of one agent's updates).
func (p *Profile) Nonce() int64 { return p.Envelope.Event.Nonce }

// CreatedAt is when the agent signed the update (Unix ms, its clock).
func (p *Profile) CreatedAt() int64 { return p.Envelope.Event.CreatedAt }

func invalid(reason, msg string) error { return adp.Reason(adp.CodeInvalidEvent, reason, msg) }

func tooLarge(reason, msg string, limit int) error {
	return adp.Reason(adp.CodePayloadTooLarge, reason, msg).WithData("limit", limit)
}

// Open parses and verifies one profile.update envelope (Identity §6 steps
// 1–5, then the profile rules): at most MaxEnvelopeBytes; a closed event
// of protocol agent-profile/1.0 and type profile.update with none of
// ADP's extra fields; the hash and the strict signature; a closed payload
// {id, name, capabilities?, extra?} whose id is the signer (nobody names
// another agent's key: permission_denied); and the caps on name,
// capabilities and extra. It checks no time window or nonce order (see
// CheckWindow and Replaces). Errors are *adp.Error.
func Open(data []byte) (*Profile, error) {
	if len(data) > MaxEnvelopeBytes {
		return nil, tooLarge("profile_envelope", "a profile.update envelope is limited in size", MaxEnvelopeBytes)
	}
	env, err := identity.ParseEnvelope(data)
	if err != nil {
		return nil, err
	}
	ev := &env.Event
	if ev.Protocol != Protocol || ev.Type != Type {
		return nil, invalid("profile_type", "a profile is an event of protocol "+Protocol+" and type "+Type)
	}
	if ev.RoomID != nil || ev.BaseSeq != nil || ev.BaseHash != nil || ev.Mentions != nil {
		return nil, invalid("unknown_field", "an "+Protocol+" event has no room_id, base_seq, base_hash or mentions")
	}
	if err := env.Verify(); err != nil {
		return nil, err
	}
	p, err := payload(ev.Payload)
	if err != nil {
		return nil, err
	}
	if p.ID != ev.Actor {
		return nil, adp.Reason(adp.CodePermissionDenied, "profile_of_another_agent",
			"payload.id must be the signer's Agent ID: an agent names only its own key")
	}
	p.Envelope = env
	return p, nil
}

func payload(raw json.RawMessage) (*Profile, error) {
	obj, err := jsonobj.ClosedStrict(raw, "id", "name", "capabilities", "extra")
	if err != nil {
		return nil, invalid("profile_payload", "profile payload: "+err.Error())
	}
	p := &Profile{Capabilities: []string{}, Extra: json.RawMessage("{}")}
	v, ok := obj.Get("id")
	if !ok {
		return nil, invalid("profile_payload", "payload.id is missing")
	}
	var s string
	if json.Unmarshal(v, &s) != nil {
		return nil, invalid("profile_payload", "payload.id must be a string")
	}
	id, err := identity.ParseAgentID(s)
	if err != nil {
		return nil, invalid("profile_payload", "payload.id is not an Agent ID")
	}
	p.ID = id
	v, ok = obj.Get("name")
	if !ok {
		return nil, invalid("profile_payload", "payload.name is missing")
	}
	if json.Unmarshal(v, &p.Name) != nil {
		return nil, invalid("profile_payload", "payload.name must be a string")
	}
	if err := checkName(p.Name); err != nil {
		return nil, err
	}
	if v, ok := obj.Get("capabilities"); ok {
		if len(v) > (MaxCapabilityBytes*6+3)*MaxCapabilities+2 {
			return nil, tooLarge("profile_capabilities", "payload.capabilities is too large", MaxCapabilities)
		}
		if json.Unmarshal(v, &p.Capabilities) != nil || p.Capabilities == nil {
			return nil, invalid("profile_payload", "payload.capabilities must be an array of strings")
		}
		if len(p.Capabilities) > MaxCapabilities {
			return nil, tooLarge("profile_capabilities", "too many capabilities", MaxCapabilities)
		}
		seen := make(map[string]bool, len(p.Capabilities))
		for _, c := range p.Capabilities {
			if c == "" || len(c) > MaxCapabilityBytes {
				return nil, tooLarge("profile_capability", "a capability is 1 to 64 bytes", MaxCapabilityBytes)
			}
			if !printable(c) {
				return nil, invalid("profile_capability", "a capability has no control or format characters")
			}
			if seen[c] {
				return nil, invalid("profile_capability", "capabilities are unique")
			}
			seen[c] = true
		}
	}
	if v, ok := obj.Get("extra"); ok {
		if len(v) > MaxExtraBytes {
			return nil, tooLarge("profile_extra", "payload.extra is limited in size", MaxExtraBytes)
		}
		if len(v) == 0 || v[0] != '{' {
			return nil, invalid("profile_payload", "payload.extra must be an object")
		}
		p.Extra = append(json.RawMessage(nil), v...)
	}
	return p, nil
}

// checkName: 1..MaxNameRunes characters, at most MaxNameBytes, no C0 or C1
// control characters (bidi and other format characters are allowed here
// and made inert where a name is shown: Inert).
func checkName(name string) error {
	if name == "" || strings.TrimSpace(name) == "" {
		return invalid("profile_name", "payload.name must not be empty")
	}
	if len(name) > MaxNameBytes || utf8.RuneCountInString(name) > MaxNameRunes {
		return tooLarge("profile_name", "payload.name is at most 64 characters", MaxNameRunes)
	}
	for _, r := range name {
		if unicode.IsControl(r) {
			return invalid("profile_name", "payload.name has no control characters")
		}
	}
	return nil
}

func printable(s string) bool {
	for _, r := range s {
		if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) {
			return false
		}
	}
	return true
}

// CheckWindow is Identity §7 for a live submission at now: |now −
// created_at| ≤ window (ms), else timestamp_out_of_window.
func CheckWindow(p *Profile, now, window int64) error {
	if d := now - p.CreatedAt(); d > window || -d > window {
		return &adp.Error{Code: adp.CodeTimestampOutOfWindow, Message: "created_at is outside the live-write window",
			Data: map[string]any{"window_ms": window, "server_time": now}}
	}
	return nil
}

// Replaces decides whether next may replace prev, the profile stored for
// the same agent (nil: none). The same envelope is a resubmission (same
// true); otherwise next's nonce must be strictly greater, so an older or
// equal update, replayed or reordered, never replaces a newer one
// (nonce_not_greater, with prev's nonce as max_seen_nonce).
func Replaces(prev, next *Profile) (same bool, err error) {
	if prev == nil {
		return false, nil
	}
	if prev.ID != next.ID {
		return false, adp.Errorf(adp.CodeInternal, "profiles of two agents compared")
	}
	if prev.Envelope.Digest == next.Envelope.Digest {
		return true, nil
	}
	if next.Nonce() <= prev.Nonce() {
		return false, identity.NonceNotGreater(prev.Nonce())
	}
	return false, nil
}

// Payload is the JSON payload of a profile.update for id (what a client
// signs).
func Payload(id identity.AgentID, name string, capabilities []string, extra json.RawMessage) (json.RawMessage, error) {
	if capabilities == nil {
		capabilities = []string{}
	}
	if extra == nil {
		extra = json.RawMessage("{}")
	}
	b, err := json.Marshal(struct {
		ID           identity.AgentID `json:"id"`
		Name         string           `json:"name"`
		Capabilities []string         `json:"capabilities"`
		Extra        json.RawMessage  `json:"extra"`
	}{id, name, capabilities, extra})
	if err != nil {
		return nil, adp.Errorf(adp.CodeInvalidRequest, "profile payload: %v", err)
	}
	if _, err := payload(b); err != nil {
		return nil, err
	}
	return b, nil
}

// Inert returns name as it may be shown: bidi controls, zero-width and
// other format characters and any control character removed, so a name
// cannot reorder or hide the text around it. Markup escaping is the
// renderer's (HTML as text, Markdown escaped).
func Inert(name string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) || r == utf8.RuneError {
			return -1
		}
		return r
	}, name)
}

// KeyFragment is the part of an Agent ID shown beside a name: the first 8
// characters of its key, so two agents with look-alike names still read
// as two.
func KeyFragment(id identity.AgentID) string {
	k := strings.TrimPrefix(string(id), "did:agent:")
	if len(k) > 8 {
		k = k[:8]
	}
	return k
}

// Label is how a host shows an agent: the inert name with the key
// fragment, or the fragment alone without a profile. The name is
// self-asserted: it identifies nobody.
func Label(id identity.AgentID, name string) string {
	n := Inert(name)
	if n == "" {
		return KeyFragment(id)
	}
	return n + " (" + KeyFragment(id) + ")"
}
