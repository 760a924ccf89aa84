package node

import (
	"encoding/json"
	"sync"
	"sync/atomic"

	"github.com/adpnode/adpnode/adp"
	"github.com/adpnode/adpnode/adp/identity"
	"github.com/adpnode/adpnode/adp/record"
	"github.com/adpnode/adpnode/adp/room"
)

// Item is one SSE item: an event name and its JSON data. Frame, when
// set, is the whole SSE frame ("event: E\ndata: D\n\n"), built once by
// NewItem and shared read-only by every subscriber the item is offered
// to, so a record is encoded once per room, not once per subscriber.
type Item struct {
	Event string
	Data  []byte
	Frame []byte
}

// NewItem builds an item with its SSE frame. Data must be one line (JSON
// without raw newlines, as every item's data is).
func NewItem(event string, data []byte) Item {
	f := make([]byte, 0, len("event: \ndata: \n\n")+len(event)+len(data))
	f = append(f, "event: "...)
	f = append(f, event...)
	f = append(f, "\ndata: "...)
	f = append(f, data...)
	f = append(f, "\n\n"...)
	return Item{Event: event, Data: data, Frame: f}
}

// frameEncodes counts NewItem calls made by the hub, for the test that a
// record is framed once however many subscribers receive it.
var frameEncodes atomic.Int64

// Subscription is one live stream of a room (§17). Items arrive on C; when
// the subscription is dropped C is closed and Reason says why.
type Subscription struct {
	C      <-chan Item
	c      chan Item
	RoomID string
	Agent  identity.AgentID
	// Managers get room.join_request items (§17.5).
	manager bool
	once    sync.Once
	reason  string
	mu      sync.Mutex
}

// Reason says why a closed subscription ended.
func (s *Subscription) Reason() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reason
}

// hub fans records out to live subscribers. Publishing never blocks: a
// subscriber whose queue is full is dropped (indigo's rule: a slow consumer
// never slows the log).
type hub struct {
	buf  int
	mu   sync.RWMutex
	subs map[string]map[*Subscription]struct{}
}

func newHub(buf int) *hub { return &hub{buf: buf, subs: map[string]map[*Subscription]struct{}{}} }

func (h *hub) subscribe(roomID string, agent identity.AgentID, manager bool) *Subscription {
	c := make(chan Item, h.buf)
	s := &Subscription{C: c, c: c, RoomID: roomID, Agent: agent, manager: manager}
	h.mu.Lock()
	if h.subs[roomID] == nil {
		h.subs[roomID] = map[*Subscription]struct{}{}
	}
	h.subs[roomID][s] = struct{}{}
	h.mu.Unlock()
	return s
}

// unsubscribe ends a subscription with a close reason (idempotent).
func (h *hub) unsubscribe(s *Subscription, reason string) {
	h.mu.Lock()
	if m := h.subs[s.RoomID]; m != nil {
		delete(m, s)
		if len(m) == 0 {
			delete(h.subs, s.RoomID)
		}
	}
	h.mu.Unlock()
	s.once.Do(func() {
		s.mu.Lock()
		s.reason = reason
		s.mu.Unlock()
		close(s.c)
	})
}

// publish offers item to every subscriber of roomID that match accepts.
func (h *hub) publish(roomID string, item Item, match func(*Subscription) bool) {
	var slow []*Subscription
	h.mu.RLock()
	for s := range h.subs[roomID] {
		if match != nil && !match(s) {
			continue
		}
		select {
		case s.c <- item:
		default:
			slow = append(slow, s)
		}
	}
	h.mu.RUnlock()
	for _, s := range slow {
		h.unsubscribe(s, "slow_consumer")
	}
}

func (h *hub) record(rec *record.Record) {
	b, _ := rec.MarshalJSON()
	h.recordJSON(rec.RoomID, b)
}

// recordJSON publishes a record's JSON (as stored) to the room's
// subscribers: framed once here, the same bytes for all of them; nothing
// is built for a room nobody watches.
func (h *hub) recordJSON(roomID string, recJSON []byte) {
	h.mu.RLock()
	none := len(h.subs[roomID]) == 0
	h.mu.RUnlock()
	if none {
		return
	}
	frameEncodes.Add(1)
	h.publish(roomID, NewItem("room.event", recJSON), nil)
}

// dropAgent ends every subscription of agent to roomID (it stopped being a
// member, §17.1).
func (h *hub) dropAgent(roomID string, agent identity.AgentID, reason string) {
	var drop []*Subscription
	h.mu.RLock()
	for s := range h.subs[roomID] {
		if s.Agent == agent {
			drop = append(drop, s)
		}
	}
	h.mu.RUnlock()
	for _, s := range drop {
		h.unsubscribe(s, reason)
	}
}

// refresh re-derives per-subscriber rights after a membership change.
func (h *hub) refresh(roomID string, st *room.State) {
	var drop []*Subscription
	h.mu.Lock()
	for s := range h.subs[roomID] {
		m, ok := st.Member(s.Agent)
		if !ok || !m.Active {
			drop = append(drop, s)
			continue
		}
		s.manager = s.Agent == st.Creator || m.Role == adp.RoleModerator
	}
	h.mu.Unlock()
	for _, s := range drop {
		h.unsubscribe(s, "membership_ended")
	}
}

func (h *hub) closeRoom(roomID, reason string) {
	h.mu.RLock()
	subs := make([]*Subscription, 0, len(h.subs[roomID]))
	for s := range h.subs[roomID] {
		subs = append(subs, s)
	}
	h.mu.RUnlock()
	for _, s := range subs {
		h.unsubscribe(s, reason)
	}
}

func (h *hub) closeAll() {
	h.mu.RLock()
	rooms := make([]string, 0, len(h.subs))
	for r := range h.subs {
		rooms = append(rooms, r)
	}
	h.mu.RUnlock()
	for _, r := range rooms {
		h.closeRoom(r, "shutdown")
	}
}

func (h *hub) count() int {
	h.mu.RLock()
	defer h.mu.RUnlock()
	n := 0
	for _, m := range h.subs {
		n += len(m)
	}
	return n
}

// joinRequest notifies the room's managers of a new request (§17.5).
func (h *hub) joinRequest(roomID string, jr *JoinRequest, st *room.State) {
	b, _ := json.Marshal(map[string]any{"room_id": roomID, "request_id": jr.ID, "applicant": jr.Applicant,
		"role": jr.Role, "created_at": jr.CreatedAt, "expires_at": jr.ExpiresAt})
	h.publish(roomID, NewItem("room.join_request", b), func(s *Subscription) bool { return s.manager })
}
