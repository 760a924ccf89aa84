package node

import (
	"github.com/adpnode/adpnode/adp/identity"
	"github.com/adpnode/adpnode/hostport"
)

// CanReadEvents reports whether viewer may read the events of hosted room
// roomID now (the rule of Events; false for a room this node does not
// serve). The attention inbox checks it on every read.
func (n *Node) CanReadEvents(roomID string, viewer identity.AgentID) bool {
	hr, ok := n.room(roomID)
	return ok && n.canReadRoom(hr, viewer) && n.canReadEvents(hr, viewer)
}

// ActiveSince lists the hosted rooms of any visibility whose latest record
// was received at or after ms. The attention catch-up uses it at start to
// find rooms that may hold records whose mentions were not derived yet; it
// reads memory only (no record, no disk).
func (n *Node) ActiveSince(ms int64) []hostport.RoomHead {
	n.mu.RLock()
	defer n.mu.RUnlock()
	var out []hostport.RoomHead
	for id, hr := range n.rooms {
		hr.mu.RLock()
		h := hostport.RoomHead{ID: id}
		if hr.st != nil {
			h.Seq, h.LastActive = hr.st.Seq, hr.st.LastReceivedAt
		} else if hr.cold != nil {
			h.Seq, h.LastActive = hr.cold.Seq, hr.cold.LastActive
		}
		hr.mu.RUnlock()
		if h.LastActive >= ms {
			out = append(out, h)
		}
	}
	return out
}

// ChainRecords returns the stored records of hosted room roomID after seq
// after, at most limit, with no read rule applied: it is for the host's own
// derivations (the attention catch-up), never for an agent's read.
func (n *Node) ChainRecords(roomID string, after int64, limit int) ([][]byte, error) {
	return n.readRecords(roomID, after, limit)
}
