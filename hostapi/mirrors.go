package hostapi

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/adpnode/adpnode/adp"
	"github.com/adpnode/adpnode/adp/identity"
	"github.com/adpnode/adpnode/internal/optoken"
)

func (s *Server) mirrorRoutes() {
	v1 := s.engine.Group("/v1/mirrors")
	v1.GET("", s.mirrorList)
	v1.POST("", s.mirrorAdd)
	v1.DELETE("/targets/*id", s.mirrorRemove)
	v1.GET("/evidence", s.mirrorEvidence)
	v1.GET("/rooms/:room_id", s.mirrorRoom)
	v1.GET("/rooms/:room_id/events", s.mirrorEvents)
	v1.GET("/rooms/:room_id/events/live", s.mirrorLive)
	v1.GET("/rooms/:room_id/archive", s.mirrorArchive)
	v1.GET("/rooms/:room_id/archive.jsonl", s.mirrorArchiveJSONL)
	v1.GET("/rooms/:room_id/archive.md", s.mirrorArchiveMD)
	s.engine.POST("/v1/witness/add-checkpoint", s.witnessAddCheckpoint)
}

// witnessAddCheckpoint is the mirror's C2SP tlog-witness endpoint
// (submission prefix <origin>/v1/witness) for the logs of hosts it
// mirrors.
func (s *Server) witnessAddCheckpoint(c *gin.Context) {
	if s.opts.Mirror == nil || s.opts.Mirror.Witness() == nil {
		s.fail(c, adp.Errorf(adp.CodeNotFound, "this node runs no witness"))
		return
	}
	s.opts.Mirror.Witness().ServeHTTP(c.Writer, c.Request)
}

func (s *Server) mirrorOrFail(c *gin.Context) Mirror {
	if s.opts.Mirror == nil {
		s.fail(c, adp.Errorf(adp.CodeNotFound, "mirroring is not enabled on this node"))
		return nil
	}
	return s.opts.Mirror
}

// operator is the one guard of every operator endpoint: the request must
// carry Authorization: Bearer <operator token> (the token in the data
// directory's operator.token). The peer address is never trusted: a
// reverse proxy on the node's machine makes every client look local.
func (s *Server) operator(c *gin.Context) bool {
	h := c.GetHeader("Authorization")
	scheme, tok, _ := strings.Cut(h, " ")
	if strings.EqualFold(scheme, "Bearer") && optoken.Equal(strings.TrimSpace(tok), s.opts.OperatorToken) {
		return true
	}
	s.fail(c, adp.Reason(adp.CodePermissionDenied, "operator_token_required",
		"this endpoint needs Authorization: Bearer <operator token> (the token in the node's data directory, operator.token)"))
	return false
}

func (s *Server) mirroredRoom(c *gin.Context) (MirroredRoom, bool) {
	m := s.mirrorOrFail(c)
	if m == nil {
		return nil, false
	}
	var host identity.AgentID
	if h := c.Query("host"); h != "" {
		id, err := identity.ParseAgentID(h)
		if err != nil {
			s.fail(c, adp.Reason(adp.CodeInvalidRequest, "host", "host must be a host key"))
			return nil, false
		}
		host = id
	}
	r, ok := m.Room(c.Param("room_id"), host)
	if !ok {
		s.fail(c, adp.Errorf(adp.CodeRoomNotFound, "this node does not mirror that room"))
		return nil, false
	}
	return r, true
}

func (s *Server) mirrorList(c *gin.Context) {
	m := s.mirrorOrFail(c)
	if m == nil {
		return
	}
	rooms := []any{}
	for _, r := range m.Rooms() {
		rooms = append(rooms, gin.H{"id": r.ID(), "mirror": r.Info()})
	}
	st := m.Stats()
	writeJSON(c, http.StatusOK, gin.H{"targets": m.Targets(), "rooms": rooms, "stats": gin.H{
		"verified": st.Verified.Load(), "backfilled": st.Backfilled.Load(), "refused": st.Refused.Load(), "evidence": st.Evidence.Load()}})
}

func (s *Server) mirrorAdd(c *gin.Context) {
	m := s.mirrorOrFail(c)
	if m == nil || !s.operator(c) {
		return
	}
	b, err := s.body(c)
	if err != nil {
		s.fail(c, err)
		return
	}
	var in struct {
		Kind  string `json:"kind"`
		Value string `json:"value"`
	}
	if err := json.Unmarshal(b, &in); err != nil {
		s.fail(c, adp.Reason(adp.CodeInvalidRequest, "body", "body must be {\"kind\":\"room|host|tag|all\",\"value\":...}"))
		return
	}
	t, err := m.AddTarget(in.Kind, in.Value)
	if err != nil {
		s.fail(c, err) // *adp.Error with the reason: bad target, room not public, not found, host unreachable
		return
	}
	writeJSON(c, http.StatusCreated, t)
}

func (s *Server) mirrorRemove(c *gin.Context) {
	m := s.mirrorOrFail(c)
	if m == nil || !s.operator(c) {
		return
	}
	id := c.Param("id")
	if len(id) > 0 && id[0] == '/' {
		id = id[1:]
	}
	purge, _ := strconv.ParseBool(c.DefaultQuery("purge", "false"))
	if err := m.RemoveTarget(id, purge); err != nil {
		s.fail(c, adp.Errorf(adp.CodeNotFound, "%v", err))
		return
	}
	c.Status(http.StatusNoContent)
}

func (s *Server) mirrorEvidence(c *gin.Context) {
	m := s.mirrorOrFail(c)
	if m == nil {
		return
	}
	list := m.EvidenceList()
	if list == nil {
		list = []json.RawMessage{}
	}
	writeJSON(c, http.StatusOK, gin.H{"result": list})
}

func (s *Server) mirrorRoom(c *gin.Context) {
	r, ok := s.mirroredRoom(c)
	if !ok {
		return
	}
	writeJSON(c, http.StatusOK, r.Resource(s.n.NowMs()))
}

func (s *Server) mirrorEvents(c *gin.Context) {
	r, ok := s.mirroredRoom(c)
	if !ok {
		return
	}
	after, limit, err := pageParams(c)
	if err != nil {
		s.fail(c, err)
		return
	}
	recs, more, err := r.Events(after, limit)
	if err != nil {
		s.fail(c, err)
		return
	}
	writePage(c, recs, after, more)
}

// mirrorLive streams verified records of a mirrored public room. Mirrors
// serve public rooms only, so no token is needed.
func (s *Server) mirrorLive(c *gin.Context) {
	r, ok := s.mirroredRoom(c)
	if !ok {
		return
	}
	sub := r.Subscribe()
	defer sub.Close()
	s.pump(c, "subscribed (mirror)", sub.C, sub.Reason)
}

func (s *Server) mirrorArchive(c *gin.Context) {
	r, ok := s.mirroredRoom(c)
	if !ok {
		return
	}
	a, err := r.Archive(s.n.NowMs())
	if err != nil {
		s.fail(c, err)
		return
	}
	writeJSON(c, http.StatusOK, a)
}

func (s *Server) mirrorArchiveJSONL(c *gin.Context) {
	r, ok := s.mirroredRoom(c)
	if !ok {
		return
	}
	var buf bytes.Buffer
	if err := r.WriteJSONL(&buf, s.n.NowMs()); err != nil {
		s.fail(c, err)
		return
	}
	c.Data(http.StatusOK, "application/x-ndjson", buf.Bytes())
}

// mirrorArchiveMD serves the Markdown transcript of an ended mirrored room,
// rendered into memory first so that an error still gets the error shape.
func (s *Server) mirrorArchiveMD(c *gin.Context) {
	r, ok := s.mirroredRoom(c)
	if !ok {
		return
	}
	var buf bytes.Buffer
	if err := r.WriteMarkdown(&buf, s.n.NowMs()); err != nil {
		s.fail(c, err)
		return
	}
	c.Header("X-Content-Type-Options", "nosniff")
	c.Data(http.StatusOK, "text/markdown; charset=utf-8", buf.Bytes())
}
