package node

import (
	"encoding/json"
	"sort"

	"github.com/adpnode/adpnode/adp"
	"github.com/adpnode/adpnode/adp/identity"
	"github.com/adpnode/adpnode/adp/room"
	"github.com/adpnode/adpnode/directory"
	"github.com/adpnode/adpnode/hostport"
)

// Read rules (§16, DECISIONS 21). viewer is the authenticated agent, or ""
// for an anonymous read.

// canReadRoom: the room resource. Public and restricted rooms' metadata is
// public; a private room is readable by its creator, active members and
// applicants holding an approved, unexpired join request.
func (n *Node) canReadRoom(hr *hostedRoom, viewer identity.AgentID) bool {
	vis, creator, s, err := n.standingOf(hr, viewer)
	if err != nil {
		return false
	}
	member := s.member && s.m.Active
	if vis != room.Private || viewer == creator && viewer != "" || member {
		return true
	}
	if viewer == "" {
		return false
	}
	now := n.NowMs()
	for _, r := range n.joins.forRoom(hr.id) {
		if r.Applicant == viewer && r.Status == "approved" && r.ConsumedSeq == 0 && now < r.ExpiresAt {
			return true
		}
	}
	return false
}

// canReadEvents: events, agent status, members and archives. Public rooms
// are open; restricted and private rooms only to the creator and members.
func (n *Node) canReadEvents(hr *hostedRoom, viewer identity.AgentID) bool {
	vis, creator, s, err := n.standingOf(hr, viewer)
	if err != nil {
		return false
	}
	if vis == room.Public {
		return true
	}
	return viewer != "" && (viewer == creator || s.member && s.m.Active)
}

// readableEvents resolves a room for an events-class read: room_not_found
// when the viewer may not even see the room, membership_required when it
// may see the room but not its events.
func (n *Node) readableEvents(roomID string, viewer identity.AgentID) (*hostedRoom, error) {
	hr, ok := n.room(roomID)
	if !ok || !n.canReadRoom(hr, viewer) {
		return nil, n.noRoom(roomID)
	}
	if !n.canReadEvents(hr, viewer) {
		return nil, adp.Errorf(adp.CodeMembershipRequired, "reading this room's records requires membership (send a request JWT)")
	}
	return hr, nil
}

// Room returns the room resource (§16).
func (n *Node) Room(roomID string, viewer identity.AgentID) (*room.Resource, error) {
	hr, ok := n.room(roomID)
	if !ok || !n.canReadRoom(hr, viewer) {
		return nil, n.noRoom(roomID)
	}
	var res *room.Resource
	if err := n.view(hr, func(st *room.State) { res = st.Resource(n.NowMs(), n.RoomURL(roomID)) }); err != nil {
		return nil, err
	}
	return res, nil
}

// Events returns records with seq > after, at most limit, and whether more
// follow.
func (n *Node) Events(roomID string, viewer identity.AgentID, after int64, limit int) ([]json.RawMessage, bool, error) {
	hr, err := n.readableEvents(roomID, viewer)
	if err != nil {
		return nil, false, err
	}
	last := n.lastSeq(hr)
	raws, err := n.readRecords(hr.id, after, limit)
	if err != nil {
		return nil, false, internal(err)
	}
	out := make([]json.RawMessage, len(raws))
	for i, r := range raws {
		out[i] = r
	}
	more := len(out) == limit && after+int64(limit) < last
	return out, more, nil
}

// Members lists active members.
func (n *Node) Members(roomID string, viewer identity.AgentID) ([]hostport.MemberView, error) {
	hr, err := n.readableEvents(roomID, viewer)
	if err != nil {
		return nil, err
	}
	var out []hostport.MemberView
	err = n.view(hr, func(st *room.State) {
		ms := st.Members()
		out = make([]hostport.MemberView, len(ms))
		for i, m := range ms {
			out[i] = hostport.MemberView{AgentID: m.Agent, Role: m.Role, Perspective: m.Perspective, JoinedSeq: m.JoinedSeq, Creator: m.Agent == st.Creator}
		}
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Subscribe opens a live stream for agent (§17.1): the room must exist and
// the agent must be an active member.
func (n *Node) Subscribe(roomID string, agent identity.AgentID) (*Subscription, error) {
	hr, ok := n.room(roomID)
	if !ok || !n.canReadRoom(hr, agent) {
		return nil, n.noRoom(roomID)
	}
	// Hold the sequencer so no record can be published between the
	// membership check and the registration.
	hr.seqMu.Lock()
	defer hr.seqMu.Unlock()
	_, creator, s, err := n.standingOf(hr, agent)
	if err != nil {
		return nil, internal(err)
	}
	m := s.m
	if !s.member || !m.Active {
		return nil, adp.Errorf(adp.CodeMembershipRequired, "live streams are for active members of the room")
	}
	switch n.lifecycle(hr).StatusAt(n.NowMs()) {
	case room.StatusEnded, room.StatusCancelled:
		return nil, adp.Errorf(adp.CodeRoomEnded, "room is no longer live")
	}
	return n.hub.subscribe(roomID, agent, agent == creator || m.Role == adp.RoleModerator), nil
}

// Unsubscribe ends a live stream.
func (n *Node) Unsubscribe(s *Subscription) { s.Close() }

// Subscribers returns the number of live streams.
func (n *Node) Subscribers() int { return n.hub.Count() }

func (n *Node) summary(hr *hostedRoom, now int64) directory.Entry {
	hr.mu.RLock()
	defer hr.mu.RUnlock()
	st := hr.st
	if st == nil {
		c := hr.cold
		return directory.Entry{ID: hr.id, URL: n.RoomURL(hr.id), Host: n.host, Status: c.Life.StatusAt(now), Topic: c.Topic, Agenda: c.Agenda,
			Visibility: c.Visibility, Creator: c.Creator, StartTime: c.Life.StartTime, EndTime: c.Life.EndTime, Tags: c.Tags,
			Language: c.Language, Seq: c.Seq, Head: c.Head, Members: c.Members, LastActive: c.LastActive}
	}
	return directory.Entry{ID: hr.id, URL: n.RoomURL(hr.id), Host: n.host, Status: st.StatusAt(now), Topic: st.Topic, Agenda: st.Agenda,
		Visibility: st.Visibility, Creator: st.Creator, StartTime: st.StartTime, EndTime: st.EndTime, Tags: st.Tags,
		Language: st.Language, Seq: st.Seq, Head: st.Head, Members: len(st.Members()), LastActive: st.LastReceivedAt}
}

// Summaries returns summaries of every hosted public or restricted room
// (the local part of the directory; never private rooms).
func (n *Node) Summaries() []directory.Entry {
	now := n.NowMs()
	var out []directory.Entry
	for _, hr := range n.roomList() {
		s := n.summary(hr, now)
		if s.Listed() {
			out = append(out, s)
		}
	}
	return out
}

// Summary returns one room's summary. Like Summaries, it does not count as
// a use of the room (Node.room): announcing every room at start must not
// read every room's last record.
func (n *Node) Summary(roomID string) (directory.Entry, bool) {
	n.mu.RLock()
	hr, ok := n.rooms[roomID]
	n.mu.RUnlock()
	if !ok {
		return directory.Entry{}, false
	}
	return n.summary(hr, n.NowMs()), true
}

// PublicRooms answers GET /v1/rooms/public from this host's rooms.
func (n *Node) PublicRooms(q directory.Query) ([]directory.Entry, string, error) {
	return directory.Page(n.Summaries(), q)
}

// MyRooms answers GET /v1/me/rooms for agent: rooms it created, is or was a
// member of, or has a pending join request for (§16). A private room the
// agent may not read is listed by ID, membership and request status only,
// and never by a status filter (which would reveal the room's status).
func (n *Node) MyRooms(agent identity.AgentID, f hostport.MyRoomsFilter) ([]hostport.MyRoom, string, error) {
	now := n.NowMs()
	pending := map[string]bool{}
	latest := map[string]*hostport.JoinRequest{}
	for _, r := range n.joins.byApplicant(agent) {
		if r.Status == "pending" && now < r.ExpiresAt {
			pending[r.RoomID] = true
		}
		if l := latest[r.RoomID]; l == nil || r.ID > l.ID {
			latest[r.RoomID] = r
		}
	}
	// Cold rooms answer from the membership index, not their states.
	cold, err := n.coldStandings(agent)
	if err != nil {
		return nil, "", internal(err)
	}
	var out []hostport.MyRoom
	for _, hr := range n.roomList() {
		var sd standing
		hr.mu.RLock()
		if st := hr.st; st != nil {
			sd.m, sd.member = st.Member(agent)
			sd.creator = st.Creator == agent
		} else {
			sd = cold[hr.id]
		}
		hr.mu.RUnlock()
		m, member, creator := sd.m, sd.member, sd.creator
		var membership string
		switch {
		case member && m.Active:
			membership = "active"
		case member:
			membership = "former"
		case pending[hr.id]:
			membership = "pending"
		case creator:
			membership = "former"
		default:
			continue
		}
		if f.Membership != "" && f.Membership != membership && !(f.Membership == "creator" && creator) {
			continue
		}
		if !n.canReadRoom(hr, agent) {
			if f.Status != "" || f.Membership == "creator" {
				continue
			}
			w := &hostport.WithheldRoom{ID: hr.id, Membership: membership}
			if r := latest[hr.id]; r != nil {
				w.JoinRequest = &hostport.RequestState{ID: r.ID, Status: r.View(now)["status"].(string)}
			}
			out = append(out, hostport.MyRoom{Withheld: w})
			continue
		}
		s := n.summary(hr, now)
		s.Membership = membership
		if member && m.Active {
			s.Role = m.Role
		}
		if f.Status != "" && string(s.Status) != f.Status {
			continue
		}
		out = append(out, hostport.MyRoom{Summary: &s})
	}
	id := func(m hostport.MyRoom) string {
		if m.Withheld != nil {
			return m.Withheld.ID
		}
		return m.Summary.ID
	}
	// Newest rooms first; the room ID (time-prefixed) is the cursor.
	sort.Slice(out, func(i, j int) bool { return id(out[i]) > id(out[j]) })
	if f.Cursor != "" {
		i := sort.Search(len(out), func(i int) bool { return id(out[i]) < f.Cursor })
		out = out[i:]
	}
	if len(out) > f.Limit {
		return out[:f.Limit], id(out[f.Limit-1]), nil
	}
	return out, "", nil
}
