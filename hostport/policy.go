package hostport

import (
	"time"

	"github.com/adpnode/adpnode/adp/room"
)

// Policy is the part of a host's effective configuration that the HTTP
// API enforces at its edge (the body cap) and publishes in discovery. It
// does not change while the host runs.
type Policy struct {
	// MaxBodyBytes caps request bodies before parsing (DECISIONS 10).
	MaxBodyBytes int64
	Limits       room.Limits
	Rates        Rates
	// Window is the live-write time window (Identity §7).
	Window time.Duration
	// JoinRequestTTL is how long a join request stays valid; StatusTTL
	// is the longest agent status lifetime (§17.4).
	JoinRequestTTL, StatusTTL time.Duration
	// StoredJoinRequests caps the join requests stored per agent per room.
	StoredJoinRequests int
	// PackFailureTTL is how long a failed external pack fetch is
	// remembered (DECISIONS 11).
	PackFailureTTL time.Duration
}

// Rates are the host's write quotas per agent and room per minute by kind
// (ADP §21; 0: no limit), the ceilings a type's rate_hint may raise them
// to, and the host's own quotas: room.create and agent-status writes per
// minute, join requests per hour.
type Rates struct {
	Message, Signal, Control                      int
	MessageCeiling, SignalCeiling, ControlCeiling int
	AgentStatus, Create, JoinRequests             int
	// Profile is profile.update writes per agent per minute.
	Profile int
}
