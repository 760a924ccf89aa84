package room

import (
	"encoding/json"
	"sort"

	"github.com/adpnode/adpnode/adp/identity"
	"github.com/adpnode/adpnode/adp/types"
)

// Resource is the room resource of §16 (GET /v1/rooms/{room_id}).
type Resource struct {
	ID         string              `json:"id"`
	Status     Status              `json:"status"`
	URL        string              `json:"url"`
	Creator    identity.AgentID    `json:"creator"`
	CreatedAt  int64               `json:"created_at"`
	Topic      string              `json:"topic"`
	Agenda     string              `json:"agenda,omitempty"`
	Guidance   string              `json:"guidance,omitempty"`
	Visibility string              `json:"visibility"`
	StartTime  int64               `json:"start_time"`
	EndTime    int64               `json:"end_time"`
	Tags       []string            `json:"tags,omitempty"`
	Language   string              `json:"language,omitempty"`
	Policy     Policy              `json:"policy"`
	Extra      json.RawMessage     `json:"extra,omitempty"`
	Types      []*types.Definition `json:"types"`
	Seq        int64               `json:"seq"`
	PreHash    *string             `json:"pre_hash"`
	Hash       string              `json:"hash"`
	ReceivedAt int64               `json:"received_at"`
	Head       Head                `json:"head"`
	EndedAt    int64               `json:"ended_at,omitempty"`
}

// Resource returns the room resource at time now; url is the Room URL.
func (s *State) Resource(now int64, url string) *Resource {
	r := &Resource{
		ID: s.ID, Status: s.StatusAt(now), URL: url, Creator: s.Creator, CreatedAt: s.CreatedAt,
		Topic: s.Topic, Agenda: s.Agenda, Guidance: s.Guidance, Visibility: s.Visibility,
		StartTime: s.StartTime, EndTime: s.EndTime, Tags: s.Tags, Language: s.Language,
		Policy: s.Policy, Extra: s.Extra, Types: s.Registry.List(),
		Seq: s.Seq, Hash: s.LastHash, ReceivedAt: s.LastReceivedAt, Head: s.Head,
	}
	if r.Types == nil {
		r.Types = []*types.Definition{}
	}
	if s.PreHash != "" {
		p := s.PreHash
		r.PreHash = &p
	}
	if r.Status == StatusEnded {
		r.EndedAt = s.EndedAt()
	}
	return r
}

// Snapshot returns a deterministic JSON rendering of the whole state, for
// comparing replays and for debugging. Two states with equal snapshots
// admit exactly the same envelopes.
func (s *State) Snapshot() []byte {
	type req struct {
		ReviewedRequest
		Consumed bool `json:"consumed"`
	}
	reqs := make([]req, 0, len(s.requests))
	for _, r := range s.requests {
		reqs = append(reqs, req{*r, s.consumed[r.ID]})
	}
	sort.Slice(reqs, func(i, j int) bool { return reqs[i].ID < reqs[j].ID })
	consumed := make([]string, 0, len(s.consumed))
	for id := range s.consumed {
		consumed = append(consumed, id)
	}
	sort.Strings(consumed)
	banned := make([]string, 0, len(s.banned))
	for a := range s.banned {
		banned = append(banned, string(a))
	}
	sort.Strings(banned)
	b, err := json.Marshal(map[string]any{
		"resource":  s.Resource(s.LastReceivedAt, ""),
		"cancelled": s.Cancelled, "closed": s.Closed, "closed_at": s.ClosedAt,
		"members": s.AllMembers(), "speaking": s.speaking, "observing": s.observing,
		"banned": banned, "requests": reqs, "consumed": consumed,
		"imports": s.Imports, "counts": s.counts,
	})
	if err != nil {
		panic(err) // every value above marshals
	}
	return b
}
