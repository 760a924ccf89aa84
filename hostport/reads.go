package hostport

import (
	"encoding/json"

	"github.com/adpnode/adpnode/adp"
	"github.com/adpnode/adpnode/adp/identity"
	"github.com/adpnode/adpnode/directory"
)

// MemberView is one entry of GET /v1/rooms/{id}/members (DECISIONS 20).
type MemberView struct {
	AgentID     identity.AgentID `json:"agent_id"`
	Role        adp.Role         `json:"role"`
	Perspective string           `json:"perspective,omitempty"`
	JoinedSeq   int64            `json:"joined_seq"`
	Creator     bool             `json:"creator,omitempty"`
}

// MyRoomsFilter holds the /v1/me/rooms parameters.
type MyRoomsFilter struct {
	Status     string
	Membership string // creator, active, former, pending
	Limit      int
	Cursor     string
}

// MyRoom is one entry of GET /v1/me/rooms: the room's summary when the
// agent may read the room, or else (a pending applicant, a banned or former
// member of a private room) only the agent's own standing in Withheld:
// nothing of the room's contract or activity.
type MyRoom struct {
	Summary  *directory.Entry
	Withheld *WithheldRoom
}

// WithheldRoom is what /v1/me/rooms says of a private room the agent may
// not read: the room ID, the agent's membership and its latest request.
type WithheldRoom struct {
	ID          string        `json:"id"`
	Membership  string        `json:"membership"`
	JoinRequest *RequestState `json:"join_request,omitempty"`
}

// RequestState is a join request's ID and status, without its room.
type RequestState struct {
	ID     string `json:"id"`
	Status string `json:"status"`
}

// View is the JSON value of the entry.
func (m MyRoom) View() any {
	if m.Withheld != nil {
		return m.Withheld
	}
	return m.Summary
}

// AgentStatus is a transient status (§17.4): untrusted, short-lived, never
// in the chain.
type AgentStatus struct {
	RoomID    string           `json:"room_id"`
	AgentID   identity.AgentID `json:"agent_id"`
	State     string           `json:"state,omitempty"`
	Summary   string           `json:"summary,omitempty"`
	SeenSeq   *int64           `json:"seen_seq,omitempty"`
	SeenHash  string           `json:"seen_hash,omitempty"`
	ClaimID   string           `json:"claim_id,omitempty"`
	Activity  string           `json:"activity,omitempty"`
	UpdatedAt int64            `json:"updated_at"`
	ExpiresAt int64            `json:"expires_at"`
	Extra     json.RawMessage  `json:"extra,omitempty"`
}

// StreamMember is what an agent's live stream of a room knows of its
// subscriber: the agent, and whether it manages the room (managers get
// room.join_request items, §17.5). The host re-derives Manager after
// every membership change.
type StreamMember struct {
	Agent   identity.AgentID
	Manager bool
}
