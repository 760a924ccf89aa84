package node

import (
	"sync"

	"github.com/adpnode/adpnode/adp"
	"github.com/adpnode/adpnode/adp/room"
)

// Viewer streams are a host-local extension for the web viewer (README, "Web
// viewer"; §17.1 allows a documented local alternative for browsers, which
// cannot send a request JWT). A viewer stream is a read-only live stream of
// one public room: it carries the room.event items agent streams carry and
// nothing else (no agent status, no join requests).
//
// Viewer streams have a hub of their own, fed through Listen, because the
// main hub re-checks every stream against the membership after each
// membership change and would drop a subscriber that is not a member. A
// viewer stream ends when its room ends or is cancelled, on DrainViewers, and
// when the node closes.

var viewerHubs = struct {
	sync.Mutex
	m map[*Node]*hub
}{m: map[*Node]*hub{}}

// viewerHub returns the node's viewer hub, creating it when create is set.
func (n *Node) viewerHub(create bool) *hub {
	viewerHubs.Lock()
	defer viewerHubs.Unlock()
	if h, ok := viewerHubs.m[n]; ok || !create {
		return h
	}
	h := newHub(n.cfg.SSEBuffer)
	viewerHubs.m[n] = h
	n.Listen(func(e Event) {
		if e.Kind == EventRecord && e.Record != nil && h.watched(e.RoomID) {
			h.record(e.Record)
		}
		if e.Status == room.StatusEnded || e.Status == room.StatusCancelled {
			h.closeRoom(e.RoomID, "room_"+string(e.Status))
		}
	})
	go func() {
		<-n.ctx.Done()
		h.closeAll()
		viewerHubs.Lock()
		delete(viewerHubs.m, n)
		viewerHubs.Unlock()
	}()
	return h
}

// watched reports whether roomID has subscribers (so that records of rooms
// nobody watches are not encoded for nothing).
func (h *hub) watched(roomID string) bool {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return len(h.subs[roomID]) > 0
}

// SubscribeViewer opens a viewer stream of a public room that has not ended:
// room_not_found for an unknown or private room, membership_required for a
// restricted one, room_ended once it has ended or was cancelled. Records
// accepted after SubscribeViewer returns are delivered (§17.3 bootstrap:
// subscribe first, then read history).
func (n *Node) SubscribeViewer(roomID string) (*Subscription, error) {
	if n.closing.Load() {
		return nil, adp.Errorf(adp.CodeUnavailable, "the node is shutting down")
	}
	hr, ok := n.room(roomID)
	if !ok || !n.canReadRoom(hr, "") {
		return nil, n.noRoom(roomID)
	}
	h := n.viewerHub(true)
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
	return h.subscribe(roomID, "", false), nil
}

// UnsubscribeViewer ends a viewer stream (idempotent).
func (n *Node) UnsubscribeViewer(s *Subscription) {
	if h := n.viewerHub(false); h != nil {
		h.unsubscribe(s, "closed")
		return
	}
	// The hub is gone (the node closed), and with it every stream.
	newHub(0).unsubscribe(s, "closed")
}

// DrainViewers ends every viewer stream (graceful shutdown, like
// DrainStreams).
func (n *Node) DrainViewers() {
	if h := n.viewerHub(false); h != nil {
		h.closeAll()
	}
}
