package hostapi

import (
	"io"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/adpnode/adpnode/adp"
	"github.com/adpnode/adpnode/adp/identity"
	"github.com/adpnode/adpnode/adp/record"
	"github.com/adpnode/adpnode/adp/room"
	"github.com/adpnode/adpnode/directory"
	"github.com/adpnode/adpnode/hostport"
	"github.com/adpnode/adpnode/metrics"
)

// live serves the SSE stream (§17): bearer JWT, active membership at
// subscribe, no replay, heartbeats; the stream ends when the node drops the
// subscription (membership ended, slow consumer, room ended, shutdown).
func (s *Server) live(c *gin.Context) {
	a, err := s.agent(c)
	if err != nil {
		s.fail(c, err)
		return
	}
	sub, err := s.n.Subscribe(c.Param("room_id"), a)
	if err != nil {
		s.fail(c, err)
		return
	}
	defer s.n.Unsubscribe(sub)
	s.pump(c, "subscribed", sub.C, sub.Reason)
}

// agentBody authenticates the caller's request JWT and reads the body,
// answering the error itself when either fails.
func (s *Server) agentBody(c *gin.Context) (identity.AgentID, []byte, bool) {
	a, err := s.agent(c)
	if err == nil {
		var b []byte
		if b, err = s.body(c); err == nil {
			return a, b, true
		}
	}
	s.fail(c, err)
	return "", nil, false
}

func (s *Server) createJoinRequest(c *gin.Context) {
	a, b, ok := s.agentBody(c)
	if !ok {
		return
	}
	jr, err := s.n.CreateJoinRequest(c.Param("room_id"), a, b)
	if err != nil {
		s.fail(c, err)
		return
	}
	writeJSON(c, http.StatusCreated, jr.View(s.n.NowMs()))
}

func (s *Server) listJoinRequests(c *gin.Context) {
	a, err := s.agent(c)
	if err != nil {
		s.fail(c, err)
		return
	}
	list, err := s.n.JoinRequests(c.Param("room_id"), a, c.Query("status"))
	if err != nil {
		s.fail(c, err)
		return
	}
	now := s.n.NowMs()
	out := make([]any, len(list))
	for i, r := range list {
		out[i] = r.View(now)
	}
	writeJSON(c, http.StatusOK, gin.H{"result": out})
}

func (s *Server) getJoinRequest(c *gin.Context) {
	a, err := s.agent(c)
	if err != nil {
		s.fail(c, err)
		return
	}
	jr, err := s.n.JoinRequest(c.Param("room_id"), c.Param("request_id"), a)
	if err != nil {
		s.fail(c, err)
		return
	}
	writeJSON(c, http.StatusOK, jr.View(s.n.NowMs()))
}

func (s *Server) listStatus(c *gin.Context) {
	v, err := s.viewer(c)
	if err != nil {
		s.fail(c, err)
		return
	}
	list, err := s.n.AgentStatuses(c.Param("room_id"), v)
	if err != nil {
		s.fail(c, err)
		return
	}
	writeJSON(c, http.StatusOK, gin.H{"result": list})
}

func (s *Server) getStatus(c *gin.Context) {
	v, err := s.viewer(c)
	if err != nil {
		s.fail(c, err)
		return
	}
	target, err := identity.ParseAgentID(c.Param("agent_id"))
	if err != nil {
		s.fail(c, adp.Reason(adp.CodeInvalidRequest, "agent_id", "agent_id is not a valid Agent ID"))
		return
	}
	st, err := s.n.AgentStatusOf(c.Param("room_id"), v, target)
	if err != nil {
		s.fail(c, err)
		return
	}
	writeJSON(c, http.StatusOK, st)
}

func (s *Server) putStatus(c *gin.Context) {
	a, b, ok := s.agentBody(c)
	if !ok {
		return
	}
	st, err := s.n.SetAgentStatus(c.Param("room_id"), a, b)
	if err != nil {
		s.fail(c, err)
		return
	}
	writeJSON(c, http.StatusOK, st)
}

func (s *Server) archiveJSON(c *gin.Context) {
	v, err := s.viewer(c)
	if err != nil {
		s.fail(c, err)
		return
	}
	a, err := s.n.Archive(c.Param("room_id"), v)
	if err != nil {
		s.fail(c, err)
		return
	}
	writeJSON(c, http.StatusOK, a)
}

func (s *Server) archiveJSONL(c *gin.Context) {
	s.archiveStream(c, "application/x-ndjson", s.n.WriteArchiveJSONL)
}

func (s *Server) archiveMD(c *gin.Context) {
	s.archiveStream(c, "text/markdown; charset=utf-8", s.n.WriteArchiveMarkdown)
}

// archiveStream renders into memory first so that an error still gets the
// error shape rather than a truncated 200.
func (s *Server) archiveStream(c *gin.Context, ctype string, write func(w io.Writer, roomID string, viewer identity.AgentID) error) {
	v, err := s.viewer(c)
	if err != nil {
		s.fail(c, err)
		return
	}
	var buf strings.Builder
	if err := write(&buf, c.Param("room_id"), v); err != nil {
		s.fail(c, err)
		return
	}
	c.Header("X-Content-Type-Options", "nosniff")
	c.Data(http.StatusOK, ctype, []byte(buf.String()))
}

func (s *Server) publicRooms(c *gin.Context) {
	f, err := directoryFilter(c)
	if err != nil {
		s.fail(c, err)
		return
	}
	scope, err := directory.ParseScope(c.Query("scope"), s.opts.Federation != nil)
	if err != nil {
		s.fail(c, err)
		return
	}
	var list []directory.Entry
	var next string
	if scope == directory.ScopeLocal {
		list, next, err = s.n.PublicRooms(f)
	} else {
		list, next, err = directory.Page(s.opts.Federation.Directory(), f)
	}
	if err != nil {
		s.fail(c, err)
		return
	}
	out := gin.H{"result": list}
	if list == nil {
		out["result"] = []directory.Entry{}
	}
	if next != "" {
		out["next_cursor"] = next
	}
	writeJSON(c, http.StatusOK, out)
}

// directoryFilter parses the §18 query parameters.
func directoryFilter(c *gin.Context) (directory.Query, error) {
	var f directory.Query
	var err error
	if f.Limit, err = limitParam(c, 20, 100); err != nil {
		return f, err
	}
	if st := c.Query("status"); st != "" {
		for _, p := range strings.Split(st, ",") {
			switch s := room.Status(strings.TrimSpace(p)); s {
			case room.StatusActive, room.StatusScheduled, room.StatusEnded, room.StatusCancelled:
				f.Status = append(f.Status, s)
			default:
				return f, adp.Reason(adp.CodeInvalidRequest, "status", "status must be scheduled, active, ended or cancelled")
			}
		}
	}
	f.Keyword, f.Language, f.Cursor = c.Query("keyword"), c.Query("language"), c.Query("cursor")
	if tag := c.Query("tag"); tag != "" {
		f.Tags = []string{tag}
	}
	if cr := c.Query("creator"); cr != "" {
		if _, err := identity.ParseAgentID(cr); err != nil {
			return f, adp.Reason(adp.CodeInvalidRequest, "creator", "creator must be an Agent ID")
		}
		f.Creator = cr
	}
	if f.StartsAfter, err = intParam(c, "starts_after"); err != nil {
		return f, err
	}
	if f.EndsBefore, err = intParam(c, "ends_before"); err != nil {
		return f, err
	}
	return f, nil
}

func (s *Server) myRooms(c *gin.Context) {
	a, err := s.agent(c)
	if err != nil {
		s.fail(c, err)
		return
	}
	limit, err := limitParam(c, 50, 200)
	if err != nil {
		s.fail(c, err)
		return
	}
	f := hostport.MyRoomsFilter{Status: c.Query("status"), Membership: c.Query("membership"), Limit: limit, Cursor: c.Query("cursor")}
	if f.Cursor != "" && !record.ValidRoomID(f.Cursor) {
		s.fail(c, adp.Reason(adp.CodeInvalidRequest, "cursor", "cursor is not one this host issued"))
		return
	}
	switch f.Membership {
	case "", "creator", "active", "former", "pending":
	default:
		s.fail(c, adp.Reason(adp.CodeInvalidRequest, "membership", "membership must be creator, active, former or pending"))
		return
	}
	switch room.Status(f.Status) {
	case "", room.StatusScheduled, room.StatusActive, room.StatusEnded, room.StatusCancelled:
	default:
		s.fail(c, adp.Reason(adp.CodeInvalidRequest, "status", "status must be scheduled, active, ended or cancelled"))
		return
	}
	list, next, err := s.n.MyRooms(a, f)
	if err != nil {
		s.fail(c, err)
		return
	}
	views := make([]any, len(list))
	for i, m := range list {
		views[i] = m.View()
	}
	out := gin.H{"result": views}
	if next != "" {
		out["next_cursor"] = next
	}
	writeJSON(c, http.StatusOK, out)
}

// fedPeers lists libp2p peers (operators).
func (s *Server) fedPeers(c *gin.Context) {
	if s.opts.Federation == nil {
		s.fail(c, adp.Errorf(adp.CodeNotFound, "federation is not enabled on this node"))
		return
	}
	out := gin.H{"result": s.opts.Federation.Peers()}
	if d, ok := s.opts.Federation.(metrics.DiscoveryReporter); ok {
		out["discovery"] = d.Discovery()
	}
	writeJSON(c, http.StatusOK, out)
}

// fedHosts lists the remote hosts learned from signed announcements, with
// the result of cross-checking each binding against its discovery document.
func (s *Server) fedHosts(c *gin.Context) {
	if s.opts.Federation == nil {
		s.fail(c, adp.Errorf(adp.CodeNotFound, "federation is not enabled on this node"))
		return
	}
	writeJSON(c, http.StatusOK, gin.H{"result": s.opts.Federation.KnownHosts()})
}

// fedConflicts lists the signed announcements refused for claiming a room
// ID that this node or a verified host holds (kept as evidence).
func (s *Server) fedConflicts(c *gin.Context) {
	if s.opts.Federation == nil {
		s.fail(c, adp.Errorf(adp.CodeNotFound, "federation is not enabled on this node"))
		return
	}
	writeJSON(c, http.StatusOK, gin.H{"result": s.opts.Federation.Conflicts()})
}
