package node

import (
	"encoding/json"
	"sync/atomic"

	"github.com/adpnode/adpnode/adp"
	"github.com/adpnode/adpnode/adp/identity"
	"github.com/adpnode/adpnode/adp/room"
	"github.com/adpnode/adpnode/hostport"
	"github.com/adpnode/adpnode/live"
)

// Subscription is one agent's live stream of a room (§17): items on C,
// the close reason in Reason once C closes.
type Subscription = live.Subscription[hostport.StreamMember]

// frameEncodes counts the record frames the node builds (publishRecord),
// for the test that a record is framed once however many subscribers
// (agent and viewer streams together) receive it.
var frameEncodes atomic.Int64

// hub is the node's fan-out of agent room streams: a live.Hub keyed by room
// ID, with the room rules of §17 (membership drops, manager-only items).
type hub struct {
	*live.Hub[hostport.StreamMember]
}

func newHub(buf int) *hub { return &hub{live.NewHub[hostport.StreamMember](buf)} }

func (h *hub) subscribe(roomID string, agent identity.AgentID, manager bool) *Subscription {
	return h.Subscribe(roomID, hostport.StreamMember{Agent: agent, Manager: manager})
}

// refresh re-derives per-subscriber rights after a membership change.
func (h *hub) refresh(roomID string, st *room.State) {
	h.Update(roomID, "membership_ended", func(s *Subscription) bool {
		m, ok := st.Member(s.Meta.Agent)
		if !ok || !m.Active {
			return false
		}
		s.Meta.Manager = s.Meta.Agent == st.Creator || m.Role == adp.RoleModerator
		return true
	})
}

// joinRequest notifies the room's managers of a new request (§17.5).
func (h *hub) joinRequest(roomID string, jr *hostport.JoinRequest) {
	b, _ := json.Marshal(map[string]any{"room_id": roomID, "request_id": jr.ID, "applicant": jr.Applicant,
		"role": jr.Role, "created_at": jr.CreatedAt, "expires_at": jr.ExpiresAt})
	h.Publish(roomID, live.NewItem("room.join_request", b), func(s *Subscription) bool { return s.Meta.Manager })
}
