package stack

import (
	"context"
	"net/url"
	"time"

	"github.com/adpnode/adpnode/adp/identity"
	"github.com/adpnode/adpnode/attention"
	"github.com/adpnode/adpnode/federation"
	"github.com/adpnode/adpnode/hostapi"
	"github.com/adpnode/adpnode/hostlog"
	"github.com/adpnode/adpnode/metrics"
	"github.com/adpnode/adpnode/mirror"
	"github.com/adpnode/adpnode/profilecache"
	"github.com/adpnode/adpnode/witness"
)

// The ports the root wires, each declared where it is used, and what
// fills it.
var (
	_ hostapi.Federation   = (*federation.Federation)(nil)
	_ hostapi.Mirror       = mirrorPort{}
	_ hostapi.MirroredRoom = (*mirror.Room)(nil)
	_ hostapi.TlogWitness  = (*witness.Witness)(nil)
	_ hostapi.HostLog      = (*hostlog.Log)(nil)
	_ hostapi.Cosigned     = (*witness.Submitter)(nil)
	_ metrics.Federation   = (*federation.Federation)(nil)
	_ metrics.Mirror       = (*mirror.Mirror)(nil)
	_ mirror.Federation    = (*federation.Federation)(nil)
	_ attention.Source     = mirrorSource{}
	_ hostapi.Profiles     = (*profilecache.Cache)(nil)
)

// mirrorPort is the mirror as the HTTP API sees it (hostapi.Mirror): its
// rooms and its witness as the API's interfaces.
type mirrorPort struct{ *mirror.Mirror }

func (p mirrorPort) Room(roomID string, host identity.AgentID) (hostapi.MirroredRoom, bool) {
	r, ok := p.Mirror.Room(roomID, host)
	if !ok {
		return nil, false
	}
	return r, true
}

func (p mirrorPort) Rooms() []hostapi.MirroredRoom {
	rs := p.Mirror.Rooms()
	out := make([]hostapi.MirroredRoom, len(rs))
	for i, r := range rs {
		out[i] = r
	}
	return out
}

func (p mirrorPort) Witness() hostapi.TlogWitness {
	if w := p.Mirror.Witness(); w != nil {
		return w
	}
	return nil // a typed nil is not nil
}

// mirrorSource is the mirror as a source of attention: its change feed,
// and its rooms' verified heads and records.
type mirrorSource struct{ *mirror.Mirror }

func (m mirrorSource) Heads() []attention.Head {
	rs := m.Rooms()
	out := make([]attention.Head, len(rs))
	for i, r := range rs {
		out[i] = attention.Head{ID: r.ID(), Seq: r.Info().VerifiedSeq}
	}
	return out
}

func (m mirrorSource) Records(roomID string, after int64, limit int) ([][]byte, error) {
	for _, r := range m.Rooms() {
		if r.ID() == roomID {
			raws, _, err := r.Events(after, limit)
			out := make([][]byte, len(raws))
			for i, raw := range raws {
				out[i] = raw
			}
			return out, err
		}
	}
	return nil, nil
}

// profileFetchTimeout bounds one fetch of remote profiles.
const profileFetchTimeout = 5 * time.Second

// profileOrigins is where the profiles of roomID's agents are asked: the
// origin of the room's host, for a room this node mirrors or its
// federated directory lists (not this node's own rooms, whose profiles it
// holds or nobody does).
func (s *Stack) profileOrigins(roomID string) []string {
	if s.Node.HostsRoom(roomID) {
		return nil
	}
	if s.Mir != nil {
		if r, ok := s.Mir.Room(roomID, ""); ok {
			if o := originOf(r.Info().RoomURL); o != "" {
				return []string{o}
			}
		}
	}
	if s.Fed != nil {
		for _, e := range s.Fed.Directory() {
			if e.ID == roomID {
				if o := originOf(e.URL); o != "" && o != s.Node.Origin() {
					return []string{o}
				}
			}
		}
	}
	return nil
}

// originOf is the origin of a Room URL ("" if it has none).
func originOf(roomURL string) string {
	u, err := url.Parse(roomURL)
	if err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
		return ""
	}
	return u.Scheme + "://" + u.Host
}

// profileNames is the mirror's source of names for its transcripts: the
// profiles of a mirrored room's agents, as its host serves them.
func (s *Stack) profileNames(roomID string, ids []identity.AgentID) map[identity.AgentID]string {
	ctx, cancel := context.WithTimeout(context.Background(), 2*profileFetchTimeout)
	defer cancel()
	out := map[identity.AgentID]string{}
	for id, p := range s.Profiles.Resolve(ctx, roomID, ids) {
		out[id] = p.Name
	}
	return out
}
