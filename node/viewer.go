package node

import (
	"github.com/adpnode/adpnode/adp"
	"github.com/adpnode/adpnode/adp/room"
	"github.com/adpnode/adpnode/live"
)

// Viewer streams are a host-local extension for the web viewer (docs/viewer.md; §17.1
// allows a documented local alternative for browsers, which
// cannot send a request JWT). A viewer stream is a read-only live stream of
// one public room: it carries the room.event items agent streams carry and
// nothing else (no agent status, no join requests).
//
// Viewer streams have a hub of their own (Node.viewers, opened in Open and
// closed in Close), because the agent hub re-checks every stream against
// the membership after each membership change and would drop a subscriber
// that is not a member. A viewer stream ends when its room ends or is
// cancelled, on DrainViewers, and when the node closes.

// ViewerSubscription is one viewer stream.
type ViewerSubscription = live.Subscription[struct{}]

// publishRecord offers a committed record's JSON to the room's agent and
// viewer streams, framed once for both; nothing is built for a room nobody
// watches.
func (n *Node) publishRecord(roomID string, recJSON []byte) {
	agents, viewers := n.hub.Watched(roomID), n.viewers.Watched(roomID)
	if !agents && !viewers {
		return
	}
	frameEncodes.Add(1)
	it := live.NewItem("room.event", recJSON)
	if agents {
		n.hub.Publish(roomID, it, nil)
	}
	if viewers {
		n.viewers.Publish(roomID, it, nil)
	}
}

// endViewers ends a room's viewer streams once the room has ended or was
// cancelled (by its closing record or by its schedule).
func (n *Node) endViewers(roomID string, status room.Status) {
	if status == room.StatusEnded || status == room.StatusCancelled {
		n.viewers.CloseTopic(roomID, "room_"+string(status))
	}
}

// SubscribeViewer opens a viewer stream of a public room that has not ended:
// room_not_found for an unknown or private room, membership_required for a
// restricted one, room_ended once it has ended or was cancelled. Records
// accepted after SubscribeViewer returns are delivered (§17.3 bootstrap:
// subscribe first, then read history).
func (n *Node) SubscribeViewer(roomID string) (*ViewerSubscription, error) {
	if n.closing.Load() {
		return nil, adp.Errorf(adp.CodeUnavailable, "the node is shutting down")
	}
	hr, ok := n.room(roomID)
	if !ok || !n.canReadRoom(hr, "") {
		return nil, n.noRoom(roomID)
	}
	// Hold the sequencer so that no record is published between the checks
	// and the registration.
	hr.seqMu.Lock()
	defer hr.seqMu.Unlock()
	vis, _, _, _ := n.standingOf(hr, "")
	status := n.lifecycle(hr).StatusAt(n.NowMs())
	if vis != room.Public {
		return nil, adp.Errorf(adp.CodeMembershipRequired, "viewer streams are for public rooms; members use the live stream")
	}
	if status == room.StatusEnded || status == room.StatusCancelled {
		return nil, adp.Errorf(adp.CodeRoomEnded, "room is no longer live")
	}
	return n.viewers.Subscribe(roomID, struct{}{}), nil
}

// UnsubscribeViewer ends a viewer stream (idempotent).
func (n *Node) UnsubscribeViewer(s *ViewerSubscription) { s.Close() }

// DrainViewers ends every viewer stream (graceful shutdown, like
// DrainStreams).
func (n *Node) DrainViewers() { n.viewers.Drain(live.ReasonShutdown) }
