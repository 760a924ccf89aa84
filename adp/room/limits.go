package room

import "github.com/adpnode/adpnode/adp/types"

// Limits are the host limits the state machine enforces (ADP §21,
// DECISIONS 9). Rate limits are not here: they are the node's business.
type Limits struct {
	MaxMentions       int   // entries in event.mentions (32; §6 makes 32 a MUST)
	MaxPayloadBytes   int   // default payload cap, bytes of canonical JSON
	MaxPayloadCeiling int   // cap for types whose max_payload_hint raises it, and for room.create / type.define
	MinDuration       int64 // ms
	MaxDuration       int64 // ms
	MaxSpeakers       int   // host cap on speaking members per room
	MaxObservers      int   // host cap on observers per room
	Types             types.Limits
}

// DefaultLimits returns the ADP §21 recommended defaults.
func DefaultLimits() Limits {
	return Limits{
		MaxMentions:       32,
		MaxPayloadBytes:   64 << 10,
		MaxPayloadCeiling: 256 << 10,
		MinDuration:       10 * 60 * 1000,
		MaxDuration:       7 * 24 * 60 * 60 * 1000,
		MaxSpeakers:       100,
		MaxObservers:      1000,
		Types:             types.DefaultLimits(),
	}
}

// ReplayLimits are the limits for verifying a chain someone else accepted
// (mirrors, offline archive verification): host policies that vary by
// deployment — payload sizes, durations, member caps — are relaxed to what
// any host could configure, while protocol MUSTs (32 mentions) stay.
func ReplayLimits() Limits {
	l := DefaultLimits()
	l.MaxPayloadBytes = 1 << 20
	l.MaxPayloadCeiling = 1 << 20
	l.MinDuration, l.MaxDuration = 0, 0
	l.MaxSpeakers, l.MaxObservers = 0, 0
	return l
}
