package hostapi

import (
	"net/http"
	"strconv"

	"github.com/gin-gonic/gin"

	"github.com/adpnode/adpnode/adp"
	"github.com/adpnode/adpnode/adp/identity"
	"github.com/adpnode/adpnode/attention"
)

// Agent attention: a host-local extension, not part of ADP
// 1.0. Every endpoint takes the agent's request JWT; see docs/attention.md.
func (s *Server) attentionRoutes(v1 *gin.RouterGroup) {
	if s.opts.Attention == nil {
		return
	}
	v1.POST("/me/subscriptions", s.createSubscription)
	v1.GET("/me/subscriptions", s.listSubscriptions)
	v1.DELETE("/me/subscriptions/:sub_id", s.deleteSubscription)
	v1.GET("/me/subscriptions/:sub_id/feed", s.subscriptionFeed)
	v1.GET("/me/mentions", s.mentions)
	v1.GET("/me/stream", s.agentStream)
}

func (s *Server) createSubscription(c *gin.Context) {
	a, err := s.agent(c)
	if err != nil {
		s.fail(c, err)
		return
	}
	b, err := s.body(c)
	if err != nil {
		s.fail(c, err)
		return
	}
	req, err := attention.ParseCreate(b)
	if err != nil {
		s.fail(c, err)
		return
	}
	sub, err := s.opts.Attention.Create(a, req)
	if err != nil {
		s.fail(c, err)
		return
	}
	writeJSON(c, http.StatusCreated, sub)
}

func (s *Server) listSubscriptions(c *gin.Context) {
	a, err := s.agent(c)
	if err != nil {
		s.fail(c, err)
		return
	}
	writeJSON(c, http.StatusOK, gin.H{"subscriptions": s.opts.Attention.List(a)})
}

func (s *Server) deleteSubscription(c *gin.Context) {
	a, err := s.agent(c)
	if err != nil {
		s.fail(c, err)
		return
	}
	if err := s.opts.Attention.Delete(a, c.Param("sub_id")); err != nil {
		s.fail(c, err)
		return
	}
	c.Status(http.StatusNoContent)
}

// cursorParams reads after, stream_id, visibility_epoch and room_after.
func cursorParams(c *gin.Context) (attention.Cursor, error) {
	var cur attention.Cursor
	if v := c.Query("after"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if !digits(v) || err != nil {
			return cur, adp.Reason(adp.CodeInvalidRequest, "cursor", "after must be a non-negative integer this host issued")
		}
		cur.After = n
	}
	cur.StreamID, cur.Epoch, cur.RoomAfter = c.Query("stream_id"), c.Query("visibility_epoch"), c.Query("room_after")
	if !cursorText(cur.StreamID) || !cursorText(cur.Epoch) || !cursorText(cur.RoomAfter) {
		return cur, adp.Reason(adp.CodeInvalidRequest, "cursor", "stream_id, visibility_epoch and room_after are short printable strings this host issued")
	}
	return cur, nil
}

// cursorText: at most 64 printable ASCII bytes (no NUL, no control).
func cursorText(v string) bool {
	if len(v) > 64 {
		return false
	}
	for i := 0; i < len(v); i++ {
		if v[i] <= 0x20 || v[i] >= 0x7f {
			return false
		}
	}
	return true
}

func (s *Server) subscriptionFeed(c *gin.Context) {
	s.readFeed(c, func(a identity.AgentID, cur attention.Cursor, limit int) (*attention.Page, error) {
		return s.opts.Attention.Feed(a, c.Param("sub_id"), cur, limit)
	})
}

func (s *Server) mentions(c *gin.Context) {
	s.readFeed(c, func(a identity.AgentID, cur attention.Cursor, limit int) (*attention.Page, error) {
		return s.opts.Attention.Mentions(a, cur, limit)
	})
}

func (s *Server) readFeed(c *gin.Context, read func(identity.AgentID, attention.Cursor, int) (*attention.Page, error)) {
	a, err := s.agent(c)
	if err != nil {
		s.fail(c, err)
		return
	}
	cur, err := cursorParams(c)
	if err != nil {
		s.fail(c, err)
		return
	}
	limit, err := limitParam(c, 100, attention.MaxLimit)
	if err != nil {
		s.fail(c, err)
		return
	}
	p, err := read(a, cur, limit)
	if err != nil {
		s.fail(c, err)
		return
	}
	writeJSON(c, http.StatusOK, p)
}

// agentStream serves GET /v1/me/stream: the agent's mentions, join-request
// outcomes and subscription items as SSE, pushed after they are stored.
func (s *Server) agentStream(c *gin.Context) {
	a, err := s.agent(c)
	if err != nil {
		s.fail(c, err)
		return
	}
	w, err := s.opts.Attention.Watch(a)
	if err != nil {
		s.fail(c, err)
		return
	}
	defer s.opts.Attention.Unwatch(w)
	s.pump(c, "subscribed", w.C, w.Reason)
}
