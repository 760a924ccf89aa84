package hostapi

import (
	"context"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/adpnode/adpnode/adp"
	"github.com/adpnode/adpnode/adp/identity"
	"github.com/adpnode/adpnode/adp/profile"
	"github.com/adpnode/adpnode/hostport"
	"github.com/adpnode/adpnode/httpwire"
)

// Agent profiles (docs/profiles.md). POST /v1/profiles takes an agent's
// signed profile.update; GET /v1/profiles/{agent_id} answers one profile
// and GET /v1/profiles?ids=… several, each with the original envelope so
// the reader can verify it. Profiles this host does not hold are asked of
// the Profiles resolver (the hosts of mirrored and listed rooms), when one
// is set.

// MaxProfileIDs caps the agents of one GET /v1/profiles?ids=….
const MaxProfileIDs = 100

// Profiles resolves profiles this host does not hold: from the host of
// the room named (room, optional) or of rooms the agent appears in. It
// answers only verified profiles, nil for an agent it cannot resolve.
type Profiles interface {
	Resolve(ctx context.Context, roomID string, ids []identity.AgentID) map[identity.AgentID]*hostport.Profile
}

func (s *Server) profileRoutes(v1 *gin.RouterGroup) {
	v1.POST("/profiles", s.putProfile)
	v1.GET("/profiles", s.listProfiles)
	v1.GET("/profiles/:agent_id", s.getProfile)
}

func (s *Server) putProfile(c *gin.Context) {
	b, err := s.body(c)
	if err != nil {
		s.fail(c, err)
		return
	}
	p, err := s.n.PutProfile(b)
	if err != nil && adp.CodeOf(err) == adp.CodeInternal {
		s.log.Error("internal error", "path", c.FullPath(), "err", err)
	}
	httpwire.Profile(p, err).Write(c.Writer)
}

func (s *Server) getProfile(c *gin.Context) {
	id, err := identity.ParseAgentID(c.Param("agent_id"))
	if err != nil {
		s.fail(c, adp.Reason(adp.CodeInvalidRequest, "agent_id", "the path names no valid Agent ID"))
		return
	}
	got, err := s.profiles(c.Request.Context(), c.Query("room"), []identity.AgentID{id})
	if err != nil {
		s.fail(c, err)
		return
	}
	if p := got[id]; p != nil {
		writeJSON(c, http.StatusOK, p)
		return
	}
	s.fail(c, adp.Reason(adp.CodeNotFound, "no_profile", "no profile of that agent is known here"))
}

// listProfiles answers {"result": [...]} with the profiles found of the
// agents in ids (comma-separated, at most MaxProfileIDs), in that order;
// an agent without one is left out.
func (s *Server) listProfiles(c *gin.Context) {
	raw := c.Query("ids")
	if raw == "" {
		s.fail(c, adp.Reason(adp.CodeInvalidRequest, "ids", "ids lists the Agent IDs to resolve, comma-separated"))
		return
	}
	parts := strings.Split(raw, ",")
	if len(parts) > MaxProfileIDs {
		s.fail(c, adp.Reason(adp.CodeInvalidRequest, "ids", "at most 100 Agent IDs per request").WithData("limit", MaxProfileIDs))
		return
	}
	ids := make([]identity.AgentID, 0, len(parts))
	seen := map[identity.AgentID]bool{}
	for _, p := range parts {
		id, err := identity.ParseAgentID(p)
		if err != nil {
			s.fail(c, adp.Reason(adp.CodeInvalidRequest, "ids", "ids holds a malformed Agent ID"))
			return
		}
		if !seen[id] {
			seen[id] = true
			ids = append(ids, id)
		}
	}
	got, err := s.profiles(c.Request.Context(), c.Query("room"), ids)
	if err != nil {
		s.fail(c, err)
		return
	}
	out := make([]*hostport.Profile, 0, len(got))
	for _, id := range ids {
		if p := got[id]; p != nil {
			out = append(out, p)
		}
	}
	writeJSON(c, http.StatusOK, gin.H{"result": out})
}

// profiles resolves ids: this host's own profiles first, then the
// resolver for the rest.
func (s *Server) profiles(ctx context.Context, roomID string, ids []identity.AgentID) (map[identity.AgentID]*hostport.Profile, error) {
	out := make(map[identity.AgentID]*hostport.Profile, len(ids))
	var rest []identity.AgentID
	for _, id := range ids {
		p, err := s.n.Profile(id)
		switch {
		case err == nil:
			out[id] = p
		case adp.CodeOf(err) == adp.CodeNotFound:
			rest = append(rest, id)
		default:
			return nil, err
		}
	}
	if len(rest) > 0 && s.opts.Profiles != nil {
		for id, p := range s.opts.Profiles.Resolve(ctx, roomID, rest) {
			if p != nil && p.AgentID == id {
				out[id] = p
			}
		}
	}
	return out, nil
}

// profileDiscovery is discovery's profile member (ADP §5.2, §16.1).
func (s *Server) profileDiscovery() gin.H {
	o := s.n.Origin()
	return gin.H{"mode": "local", "service": o, "protocol": profile.Protocol,
		"endpoints":       gin.H{"update": o + "/v1/profiles", "lookup": o + "/v1/profiles/{agent_id}", "batch": o + "/v1/profiles?ids={agent_id},…"},
		"resolves_remote": s.opts.Profiles != nil,
		"limits": gin.H{"envelope_bytes": profile.MaxEnvelopeBytes, "name_chars": profile.MaxNameRunes,
			"capabilities": profile.MaxCapabilities, "capability_bytes": profile.MaxCapabilityBytes,
			"extra_bytes": profile.MaxExtraBytes, "updates_per_minute": s.policy.Rates.Profile, "ids_per_lookup": MaxProfileIDs},
	}
}
