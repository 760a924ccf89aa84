package node

import (
	"crypto/rand"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/dgraph-io/badger/v4"

	"github.com/adpnode/adpnode/adp"
	"github.com/adpnode/adpnode/adp/identity"
	"github.com/adpnode/adpnode/adp/room"
	"github.com/adpnode/adpnode/hostport"
)

type joinFact struct {
	ID          string           `json:"id"`
	RoomID      string           `json:"room_id"`
	Applicant   identity.AgentID `json:"applicant"`
	Role        adp.Role         `json:"role"`
	Perspective string           `json:"perspective,omitempty"`
	Reason      string           `json:"reason,omitempty"`
	CreatedAt   int64            `json:"created_at"`
	ExpiresAt   int64            `json:"expires_at"`
	Extra       json.RawMessage  `json:"extra"`
}

func parseJoinFact(j *hostport.JoinRequest) error {
	var f joinFact
	if err := json.Unmarshal(j.Request, &f); err != nil {
		return err
	}
	j.ID, j.RoomID, j.Applicant, j.Role, j.Perspective, j.CreatedAt, j.ExpiresAt =
		f.ID, f.RoomID, f.Applicant, f.Role, f.Perspective, f.CreatedAt, f.ExpiresAt
	return nil
}

// joinRequests holds every join request in memory, backed by Badger.
type joinRequests struct {
	db *badger.DB
	mu sync.RWMutex
	m  map[string]*hostport.JoinRequest            // id -> request
	by map[string]map[string]*hostport.JoinRequest // room -> id -> request
	// created counts creations per "agent|room" in a sliding hour (the
	// Rates.JoinRequests quota); it is not durable: a restart forgets it,
	// the stored cap (MaxStoredJoinRequests) is what survives.
	created *quotas
}

// MaxStoredJoinRequests caps the requests stored per agent per room. At the
// cap, the applicant's terminal requests (rejected, expired, consumed) are
// pruned oldest first; if none is terminal the new request is refused.
const MaxStoredJoinRequests = 20

// joinQuotaWindow is the window of the join request quota.
const joinQuotaWindow = 3600_000

func newJoinRequests(db *badger.DB) *joinRequests {
	return &joinRequests{db: db, m: map[string]*hostport.JoinRequest{}, by: map[string]map[string]*hostport.JoinRequest{},
		created: &quotas{m: map[string][]int64{}, window: joinQuotaWindow}}
}

// makeRoom prunes applicant's terminal requests in roomID, oldest first,
// until fewer than MaxStoredJoinRequests remain; false if it cannot.
func (j *joinRequests) makeRoom(roomID string, applicant identity.AgentID, now int64) (bool, error) {
	var mine []*hostport.JoinRequest
	for _, r := range j.forRoom(roomID) { // oldest first
		if r.Applicant == applicant {
			mine = append(mine, r)
		}
	}
	var drop []*hostport.JoinRequest
	for _, r := range mine {
		if len(mine)-len(drop) < MaxStoredJoinRequests {
			break
		}
		if r.Terminal(now) {
			drop = append(drop, r)
		}
	}
	if len(drop) > 0 {
		if err := j.db.Update(func(txn *badger.Txn) error {
			for _, r := range drop {
				if err := txn.Delete(joinKey(r.RoomID, r.ID)); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			return false, err
		}
		j.mu.Lock()
		for _, r := range drop {
			delete(j.m, r.ID)
			delete(j.by[r.RoomID], r.ID)
		}
		j.mu.Unlock()
	}
	return len(mine)-len(drop) < MaxStoredJoinRequests, nil
}

func joinKey(roomID, id string) []byte { return []byte(pfxJoinReq + roomID + "/" + id) }

func (j *joinRequests) load() error {
	return j.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{PrefetchValues: true, Prefix: []byte(pfxJoinReq)})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			var r hostport.JoinRequest
			if err := it.Item().Value(func(v []byte) error { return json.Unmarshal(v, &r) }); err != nil {
				return err
			}
			if err := parseJoinFact(&r); err != nil {
				return fmt.Errorf("join request %s: %w", it.Item().Key(), err)
			}
			j.put(&r)
		}
		return nil
	})
}

func (j *joinRequests) put(r *hostport.JoinRequest) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.m[r.ID] = r
	if j.by[r.RoomID] == nil {
		j.by[r.RoomID] = map[string]*hostport.JoinRequest{}
	}
	j.by[r.RoomID][r.ID] = r
}

func (j *joinRequests) get(id string) (*hostport.JoinRequest, bool) {
	j.mu.RLock()
	defer j.mu.RUnlock()
	r, ok := j.m[id]
	if !ok {
		return nil, false
	}
	c := *r
	return &c, true
}

// forRoom lists a room's requests, newest last (IDs sort by time).
func (j *joinRequests) forRoom(roomID string) []*hostport.JoinRequest {
	j.mu.RLock()
	defer j.mu.RUnlock()
	out := make([]*hostport.JoinRequest, 0, len(j.by[roomID]))
	for _, r := range j.by[roomID] {
		c := *r
		out = append(out, &c)
	}
	sort.Slice(out, func(a, b int) bool { return out[a].ID < out[b].ID })
	return out
}

// byApplicant lists the rooms where agent has requests.
func (j *joinRequests) byApplicant(agent identity.AgentID) []*hostport.JoinRequest {
	j.mu.RLock()
	defer j.mu.RUnlock()
	var out []*hostport.JoinRequest
	for _, r := range j.m {
		if r.Applicant == agent {
			c := *r
			out = append(out, &c)
		}
	}
	return out
}

func (j *joinRequests) kv(r *hostport.JoinRequest) kv {
	b, _ := json.Marshal(r)
	return kv{K: joinKey(r.RoomID, r.ID), V: b}
}

func (j *joinRequests) save(r *hostport.JoinRequest) error {
	e := j.kv(r)
	if err := j.db.Update(func(txn *badger.Txn) error { return txn.Set(e.K, e.V) }); err != nil {
		return err
	}
	j.put(r)
	return nil
}

// lookup adapts the store to the kernel's room.JoinRequests for one room.
func (j *joinRequests) lookup(roomID string) room.JoinRequests { return roomJoinLookup{j, roomID} }

type roomJoinLookup struct {
	j      *joinRequests
	roomID string
}

func (l roomJoinLookup) JoinRequest(id string) (*room.JoinRequest, bool) {
	r, ok := l.j.get(id)
	if !ok || r.RoomID != l.roomID {
		return nil, false
	}
	return &room.JoinRequest{ID: r.ID, RoomID: r.RoomID, Applicant: r.Applicant, Role: r.Role, Perspective: r.Perspective,
		ExpiresAt: r.ExpiresAt, Status: r.Status, ApprovedRole: r.ApprovedRole, Fact: r.Request}, true
}

const crockford = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"

// newJoinRequestID returns "jr_" + a ULID-style id: 48 bits of Unix ms then
// 80 random bits in Crockford base32, so ids sort by creation time
// (DECISIONS 5).
func newJoinRequestID(nowMs int64) string {
	var b [16]byte
	for i := 5; i >= 0; i-- {
		b[i] = byte(nowMs)
		nowMs >>= 8
	}
	rand.Read(b[6:])
	// 128 bits -> 26 base32 characters (the first carries 3 bits).
	var sb strings.Builder
	sb.WriteString("jr_")
	var acc uint64
	bits := 0
	// Process as a big-endian bit stream, left-padded to 130 bits.
	acc, bits = 0, 2
	for _, x := range b {
		acc = acc<<8 | uint64(x)
		bits += 8
		for bits >= 5 {
			bits -= 5
			sb.WriteByte(crockford[(acc>>uint(bits))&31])
		}
	}
	return sb.String()
}

// CreateJoinRequest is the body of POST /v1/rooms/{id}/join-requests.
type CreateJoinRequest struct {
	Role        string          `json:"role"`
	Perspective string          `json:"perspective,omitempty"`
	Reason      string          `json:"reason,omitempty"`
	Extra       json.RawMessage `json:"extra,omitempty"`
}

// CreateJoinRequest creates a join request by applicant (§11), auto-approving
// it where the rules say so.
func (n *Node) CreateJoinRequest(roomID string, applicant identity.AgentID, body []byte) (*hostport.JoinRequest, error) {
	if err := n.writable(); err != nil {
		return nil, err
	}
	if err := identity.CheckJSON(body); err != nil {
		return nil, adp.Reason(adp.CodeInvalidRequest, "json", "join request body: "+err.Error())
	}
	var in CreateJoinRequest
	dec := json.NewDecoder(strings.NewReader(string(body)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		return nil, adp.Reason(adp.CodeInvalidRequest, "shape", "join request body: "+err.Error())
	}
	role := adp.Role(in.Role)
	if !role.Valid() {
		return nil, adp.Reason(adp.CodeInvalidRequest, "role", "role must be moderator, speaker or observer")
	}
	if len(in.Extra) > 0 && in.Extra[0] != '{' {
		return nil, adp.Reason(adp.CodeInvalidRequest, "extra", "extra must be an object")
	}
	if len(in.Perspective) > 256 || len(in.Reason) > 4096 {
		return nil, adp.Reason(adp.CodeInvalidRequest, "size", "perspective or reason too long")
	}
	hr, ok := n.room(roomID)
	if !ok {
		return nil, n.noRoom(roomID)
	}
	now := n.NowMs()
	hr.seqMu.Lock() // decisions below must not race membership changes
	defer hr.seqMu.Unlock()
	switch n.lifecycle(hr).StatusAt(now) { // before loading a cold room's state
	case room.StatusEnded:
		return nil, adp.Errorf(adp.CodeRoomEnded, "room has ended")
	case room.StatusCancelled:
		return nil, adp.Errorf(adp.CodeRoomNotActive, "room was cancelled")
	}
	st, err := n.seqView(hr)
	if err != nil {
		return nil, err
	}
	if st.IsActiveMember(applicant) {
		return nil, adp.Reason(adp.CodePermissionDenied, "already_member", "applicant is already an active member")
	}
	if role == adp.RoleObserver && !st.Policy.ObserversAllowed() {
		return nil, adp.Reason(adp.CodeRoleNotAllowed, "observer_not_allowed", "this room does not allow observers")
	}
	for _, r := range n.joins.forRoom(roomID) {
		if r.Applicant == applicant && r.Status == "pending" && now < r.ExpiresAt {
			return nil, &adp.Error{Code: adp.CodePermissionDenied, Message: "applicant already has a pending join request",
				Data: map[string]any{"reason": "pending_request", "request_id": r.ID}}
		}
		// A moderator's approval not yet used is what the applicant needs:
		// a second request would only queue again for moderators (an
		// auto-approved request costs nobody anything to repeat). The answer names
		// it, so a client can join with it (adpnode join does).
		if r.Applicant == applicant && r.Status == "approved" && r.ReviewedBy != nil && r.ConsumedSeq == 0 && now < r.ExpiresAt {
			return nil, &adp.Error{Code: adp.CodePermissionDenied, Message: "applicant already has an approved join request; join with its request_id",
				Data: map[string]any{"reason": "approved_request", "request_id": r.ID}}
		}
	}
	// Quota and stored cap: an agent cannot fill a
	// room's request store or its moderators' queue.
	qkey, qlimit := string(applicant)+"|"+roomID, n.cfg.Rates.JoinRequests
	if !n.joins.created.allow(qkey, qlimit, now) {
		return nil, &adp.Error{Code: adp.CodeRateLimited, Message: fmt.Sprintf("rate limit of %d join requests per room per hour reached", qlimit),
			Data: map[string]any{"limit_per_hour": qlimit, "retry_after_ms": n.joins.created.retryAfter(qkey, now)}}
	}
	if ok, err := n.joins.makeRoom(roomID, applicant, now); err != nil {
		return nil, internal(err)
	} else if !ok {
		return nil, &adp.Error{Code: adp.CodeRateLimited, Message: fmt.Sprintf("this agent already has %d stored join requests for this room", MaxStoredJoinRequests),
			Data: map[string]any{"limit": MaxStoredJoinRequests}}
	}
	expires := now + n.cfg.JoinRequestTTL.Milliseconds()
	if st.EndTime < expires {
		expires = st.EndTime
	}
	extra := in.Extra
	if len(extra) == 0 {
		extra = json.RawMessage(`{}`)
	}
	fact := joinFact{ID: newJoinRequestID(now), RoomID: roomID, Applicant: applicant, Role: role, Perspective: in.Perspective,
		Reason: in.Reason, CreatedAt: now, ExpiresAt: expires, Extra: extra}
	raw, _ := json.Marshal(fact)
	canon, err := identity.Canonicalize(raw)
	if err != nil {
		return nil, adp.Reason(adp.CodeInvalidRequest, "json", err.Error())
	}
	jr := &hostport.JoinRequest{Request: canon, Status: "pending"}
	_ = parseJoinFact(jr) // canon was marshalled from a joinFact just above
	// Auto-approval: public rooms, or a listed moderator asking for
	// moderator (§11, DECISIONS 15), never a banned agent (§10.5).
	if st.AutoApprovable(applicant, role) && (st.Visibility == room.Public || role == adp.RoleModerator) {
		jr.Status, jr.ApprovedRole, jr.ReviewedAt = "approved", role, &now
		if st.Visibility == room.Public {
			jr.ReviewReason = "public room auto-approval"
		} else {
			jr.ReviewReason = "listed in policy.moderator_agent_ids"
		}
	}
	if err := n.joins.save(jr); err != nil {
		return nil, n.storageWriteError(err)
	}
	n.joins.created.hit(qkey, qlimit, now)
	n.hub.joinRequest(roomID, jr)
	return jr, nil
}

// JoinRequest returns one join request, readable by its applicant, the
// room creator and moderators (§11). An unknown room, or a private room the
// viewer may not read, is room_not_found (DECISIONS 21); the applicant
// always sees its own request.
func (n *Node) JoinRequest(roomID, id string, viewer identity.AgentID) (*hostport.JoinRequest, error) {
	hr, ok := n.room(roomID)
	if !ok {
		return nil, n.noRoom(roomID)
	}
	r, ok := n.joins.get(id)
	if ok && r.RoomID == roomID && (r.Applicant == viewer || n.isManager(roomID, viewer)) {
		return r, nil
	}
	if !n.canReadRoom(hr, viewer) {
		return nil, n.noRoom(roomID)
	}
	return nil, adp.Errorf(adp.CodeJoinRequestNotFound, "join request not found")
}

// JoinRequests lists a room's join requests for its creator and moderators.
func (n *Node) JoinRequests(roomID string, viewer identity.AgentID, status string) ([]*hostport.JoinRequest, error) {
	hr, ok := n.room(roomID)
	if !ok || !n.canReadRoom(hr, viewer) {
		return nil, n.noRoom(roomID)
	}
	if !n.isManager(roomID, viewer) {
		return nil, adp.Reason(adp.CodePermissionDenied, "not_moderator", "only the room creator and moderators may list join requests")
	}
	now := n.NowMs()
	var out []*hostport.JoinRequest
	for _, r := range n.joins.forRoom(roomID) {
		if status == "" || r.View(now)["status"] == status {
			out = append(out, r)
		}
	}
	return out, nil
}

// isManager reports whether a is the room's creator or an active moderator.
func (n *Node) isManager(roomID string, a identity.AgentID) bool {
	hr, ok := n.room(roomID)
	if !ok || a == "" {
		return false
	}
	_, creator, s, err := n.standingOf(hr, a)
	if err != nil {
		return false
	}
	return creator == a || s.member && s.m.Active && s.m.Role == adp.RoleModerator
}
