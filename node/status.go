package node

import (
	"encoding/json"
	"sort"
	"strings"
	"sync"

	"github.com/adpnode/adpnode/adp"
	"github.com/adpnode/adpnode/adp/identity"
	"github.com/adpnode/adpnode/hostport"
	"github.com/adpnode/adpnode/live"
)

type statusBoard struct {
	mu sync.Mutex
	m  map[string]map[identity.AgentID]*hostport.AgentStatus
}

func newStatusBoard() *statusBoard {
	return &statusBoard{m: map[string]map[identity.AgentID]*hostport.AgentStatus{}}
}

func (b *statusBoard) set(s *hostport.AgentStatus) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.m[s.RoomID] == nil {
		b.m[s.RoomID] = map[identity.AgentID]*hostport.AgentStatus{}
	}
	b.m[s.RoomID][s.AgentID] = s
}

func (b *statusBoard) clear(roomID string, a identity.AgentID) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.m[roomID], a)
}

func (b *statusBoard) list(roomID string, now int64) []*hostport.AgentStatus {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := []*hostport.AgentStatus{}
	for a, s := range b.m[roomID] {
		if now >= s.ExpiresAt {
			delete(b.m[roomID], a)
			continue
		}
		c := *s
		out = append(out, &c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].AgentID < out[j].AgentID })
	return out
}

func (b *statusBoard) get(roomID string, a identity.AgentID, now int64) (*hostport.AgentStatus, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	s, ok := b.m[roomID][a]
	if !ok || now >= s.ExpiresAt {
		return nil, false
	}
	c := *s
	return &c, true
}

func (b *statusBoard) sweep(now int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for r, m := range b.m {
		for a, s := range m {
			if now >= s.ExpiresAt {
				delete(m, a)
			}
		}
		if len(m) == 0 {
			delete(b.m, r)
		}
	}
}

// SetAgentStatus stores agent's own status (PUT /v1/rooms/{id}/agent-status):
// only active moderators and speakers, expiry capped at the maximum TTL.
func (n *Node) SetAgentStatus(roomID string, agent identity.AgentID, body []byte) (*hostport.AgentStatus, error) {
	if err := identity.CheckJSON(body); err != nil {
		return nil, adp.Reason(adp.CodeInvalidRequest, "json", "agent status body: "+err.Error())
	}
	if len(body) > 8<<10 {
		return nil, adp.Errorf(adp.CodePayloadTooLarge, "agent status body exceeds 8 KiB")
	}
	if t := strings.TrimSpace(string(body)); t == "" || t[0] != '{' {
		return nil, adp.Reason(adp.CodeInvalidRequest, "shape", "agent status body must be a JSON object")
	}
	var in struct {
		State     string          `json:"state"`
		Summary   string          `json:"summary"`
		SeenSeq   *int64          `json:"seen_seq"`
		SeenHash  string          `json:"seen_hash"`
		ClaimID   string          `json:"claim_id"`
		Activity  string          `json:"activity"`
		ExpiresAt *int64          `json:"expires_at"`
		Extra     json.RawMessage `json:"extra"`
	}
	dec := json.NewDecoder(strings.NewReader(string(body)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		return nil, adp.Reason(adp.CodeInvalidRequest, "shape", "agent status body: "+err.Error())
	}
	if len(in.Extra) > 0 && in.Extra[0] != '{' {
		return nil, adp.Reason(adp.CodeInvalidRequest, "extra", "extra must be an object")
	}
	hr, ok := n.room(roomID)
	if !ok {
		return nil, n.noRoom(roomID)
	}
	// Hold the sequencer from the membership check to the write: otherwise
	// a room.leave (or removal, or demotion) committed in between clears
	// the status first and this write then outlives the membership (§17.4).
	hr.seqMu.Lock()
	defer hr.seqMu.Unlock()
	now := n.NowMs()
	status := n.lifecycle(hr).StatusAt(now)
	_, _, sd, err := n.standingOf(hr, agent)
	if err != nil {
		return nil, internal(err)
	}
	m, member := sd.m, sd.member
	if !member || !m.Active {
		if !n.canReadRoom(hr, agent) {
			return nil, n.noRoom(roomID)
		}
		return nil, adp.Errorf(adp.CodeMembershipRequired, "only active members may set agent status")
	}
	if status == "ended" || status == "cancelled" {
		return nil, adp.Errorf(adp.CodeRoomEnded, "room is no longer live")
	}
	if !m.Role.Speaking() {
		return nil, adp.Reason(adp.CodePermissionDenied, "observer", "observers may not write agent status (§17.4)")
	}
	key := "s|" + string(agent) + "|" + roomID
	if !n.quotas.allow(key, n.cfg.Rates.AgentStatus, now) {
		return nil, &adp.Error{Code: adp.CodeRateLimited, Message: "agent status rate limit", Data: map[string]any{"retry_after_ms": n.quotas.retryAfter(key, now)}}
	}
	max := now + n.cfg.StatusTTL.Milliseconds()
	expires := max
	if in.ExpiresAt != nil {
		if *in.ExpiresAt <= now {
			return nil, adp.Reason(adp.CodeInvalidRequest, "expires_at", "expires_at must be in the future")
		}
		expires = min(*in.ExpiresAt, max)
	}
	s := &hostport.AgentStatus{RoomID: roomID, AgentID: agent, State: in.State, Summary: in.Summary, SeenSeq: in.SeenSeq,
		SeenHash: in.SeenHash, ClaimID: in.ClaimID, Activity: in.Activity, UpdatedAt: now, ExpiresAt: expires, Extra: in.Extra}
	n.quotas.hit(key, n.cfg.Rates.AgentStatus, now)
	n.status.set(s)
	b, _ := json.Marshal(s)
	n.hub.Publish(roomID, live.NewItem("room.agent_status", b), nil)
	return s, nil
}

// AgentStatuses lists a room's current statuses, under room read rules.
func (n *Node) AgentStatuses(roomID string, viewer identity.AgentID) ([]*hostport.AgentStatus, error) {
	hr, err := n.readableEvents(roomID, viewer)
	if err != nil {
		return nil, err
	}
	return n.status.list(hr.id, n.NowMs()), nil
}

// AgentStatusOf returns one agent's current status.
func (n *Node) AgentStatusOf(roomID string, viewer, agent identity.AgentID) (*hostport.AgentStatus, error) {
	hr, err := n.readableEvents(roomID, viewer)
	if err != nil {
		return nil, err
	}
	s, ok := n.status.get(hr.id, agent, n.NowMs())
	if !ok {
		return nil, adp.Errorf(adp.CodeAgentStatusNotFound, "no current status for that agent")
	}
	return s, nil
}
