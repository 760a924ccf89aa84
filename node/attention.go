package node

import "github.com/adpnode/adpnode/adp/identity"

// CanReadEvents reports whether viewer may read the events of hosted room
// roomID now (the rule of Events; false for a room this node does not
// serve). The attention inbox checks it on every read.
func (n *Node) CanReadEvents(roomID string, viewer identity.AgentID) bool {
	hr, ok := n.room(roomID)
	return ok && n.canReadRoom(hr, viewer) && n.canReadEvents(hr, viewer)
}
