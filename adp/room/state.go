package room

import (
	"encoding/json"
	"sort"

	"github.com/adpnode/adpnode/adp"
	"github.com/adpnode/adpnode/adp/identity"
	"github.com/adpnode/adpnode/adp/types"
)

// Status is a room lifecycle state (§8).
type Status string

// The four room states.
const (
	StatusScheduled Status = "scheduled"
	StatusActive    Status = "active"
	StatusEnded     Status = "ended"
	StatusCancelled Status = "cancelled"
)

// Visibility values (§9.2).
const (
	Public     = "public"
	Restricted = "restricted"
	Private    = "private"
)

// Policy is the room policy (§9.3). Absent fields keep their zero values
// and are omitted from JSON.
type Policy struct {
	ModeratorAgentIDs []identity.AgentID `json:"moderator_agent_ids,omitempty"`
	MaxSpeakers       int64              `json:"max_speakers,omitempty"`
	ObserverAllowed   *bool              `json:"observer_allowed,omitempty"`
	Extra             json.RawMessage    `json:"extra,omitempty"`
}

// ObserversAllowed reports the effective observer_allowed (default true).
func (p *Policy) ObserversAllowed() bool { return p.ObserverAllowed == nil || *p.ObserverAllowed }

// ListedModerator reports whether a is in moderator_agent_ids.
func (p *Policy) ListedModerator(a identity.AgentID) bool {
	for _, m := range p.ModeratorAgentIDs {
		if m == a {
			return true
		}
	}
	return false
}

// Contract is the room's current contract (§9.1, §9.4).
type Contract struct {
	Topic      string
	Agenda     string
	Guidance   string
	Visibility string
	StartTime  int64
	EndTime    int64
	Tags       []string
	Language   string
	Policy     Policy
	Extra      json.RawMessage
}

// Member is one agent's membership (§10). Inactive members are kept so that
// history (who was a member) is available.
type Member struct {
	Agent       identity.AgentID `json:"agent_id"`
	Role        adp.Role         `json:"role"`
	Perspective string           `json:"perspective,omitempty"`
	JoinedSeq   int64            `json:"joined_seq"`
	Active      bool             `json:"active"`
	LeftSeq     int64            `json:"left_seq,omitempty"`
}

// ReviewedRequest is a join request as recorded by a room.join.review (§11).
type ReviewedRequest struct {
	ID          string
	Applicant   identity.AgentID
	Approved    bool
	Role        adp.Role // approved role
	Perspective string
	ExpiresAt   int64
	ReviewSeq   int64
}

// Head is the room head (§6.1).
type Head struct {
	Seq  int64  `json:"seq"`
	Hash string `json:"hash"`
}

// State is the state of one room, derived entirely from its records.
type State struct {
	cfg Config

	ID        string
	Creator   identity.AgentID
	CreatedAt int64 // room.create's created_at (DECISIONS 16)
	Contract
	Cancelled bool
	Closed    bool
	ClosedAt  int64

	Registry *types.Registry
	Imports  []types.Import // pack documents used, first use order, deduplicated

	members   map[identity.AgentID]*Member
	speaking  int // active moderators and speakers
	observing int // active observers
	banned    map[identity.AgentID]bool
	requests  map[string]*ReviewedRequest
	consumed  map[string]bool

	Seq            int64
	LastHash       string
	PreHash        string
	LastReceivedAt int64
	Head           Head

	hist   History          // earlier records' hashes (not held here)
	counts map[string]int64 // accepted records by event type
}

// Config is what a State needs besides its records.
type Config struct {
	Limits Limits
	// Packs serves external pack documents for type declarations. Nil means
	// external packs are unavailable (pack_unavailable).
	Packs types.PackSource
	// History holds the room's record hashes; nil means a MemHistory.
	History History
}

// New returns the empty state of a room not yet created. The first record
// admitted must be room.create.
func New(cfg Config) *State {
	hist := cfg.History
	if hist == nil {
		hist = NewMemHistory()
	}
	return &State{
		hist:     hist,
		cfg:      cfg,
		Registry: types.NewRegistry(),
		members:  map[identity.AgentID]*Member{},
		banned:   map[identity.AgentID]bool{},
		requests: map[string]*ReviewedRequest{},
		consumed: map[string]bool{},
		counts:   map[string]int64{},
	}
}

// Created reports whether the room.create record has been applied.
func (s *State) Created() bool { return s.Seq > 0 }

// Lifecycle is what a room's status depends on besides the clock: a
// compact value a host can keep for a room whose state it does not hold.
type Lifecycle struct {
	StartTime int64 `json:"start_time"`
	EndTime   int64 `json:"end_time"`
	Cancelled bool  `json:"cancelled,omitempty"`
	Closed    bool  `json:"closed,omitempty"`
	ClosedAt  int64 `json:"closed_at,omitempty"`
}

// Lifecycle returns the room's lifecycle facts.
func (s *State) Lifecycle() Lifecycle {
	return Lifecycle{StartTime: s.StartTime, EndTime: s.EndTime, Cancelled: s.Cancelled, Closed: s.Closed, ClosedAt: s.ClosedAt}
}

// StatusAt returns the room's lifecycle state at now (Unix ms). Time
// transitions (§8) are a function of the contract and the clock, so they are
// idempotent and need no record.
func (l Lifecycle) StatusAt(now int64) Status {
	switch {
	case l.Cancelled:
		return StatusCancelled
	case l.Closed, now >= l.EndTime:
		return StatusEnded
	case now >= l.StartTime:
		return StatusActive
	}
	return StatusScheduled
}

// EndedAt returns when the room ended (close time or end_time), valid when
// StatusAt reports ended.
func (l Lifecycle) EndedAt() int64 {
	if l.Closed {
		return l.ClosedAt
	}
	return l.EndTime
}

// NextTransition returns the next time after now at which StatusAt changes,
// or false when the room is in a final state.
func (l Lifecycle) NextTransition(now int64) (int64, bool) {
	switch l.StatusAt(now) {
	case StatusScheduled:
		return l.StartTime, true
	case StatusActive:
		return l.EndTime, true
	}
	return 0, false
}

// Terminal reports whether a status is final (ended or cancelled).
func (st Status) Terminal() bool { return st == StatusEnded || st == StatusCancelled }

// StatusAt returns the room's lifecycle state at now (Unix ms).
func (s *State) StatusAt(now int64) Status { return s.Lifecycle().StatusAt(now) }

// EndedAt returns when the room ended (close time or end_time), valid when
// StatusAt reports ended.
func (s *State) EndedAt() int64 { return s.Lifecycle().EndedAt() }

// NextTransition returns the next time after now at which StatusAt changes,
// or false when the room is in a final state.
func (s *State) NextTransition(now int64) (int64, bool) { return s.Lifecycle().NextTransition(now) }

// Member returns the membership of a (active or former).
func (s *State) Member(a identity.AgentID) (Member, bool) {
	m, ok := s.members[a]
	if !ok {
		return Member{}, false
	}
	return *m, true
}

// IsActiveMember reports whether a is an active member.
func (s *State) IsActiveMember(a identity.AgentID) bool {
	m, ok := s.members[a]
	return ok && m.Active
}

// Members returns the active members ordered by joined seq.
func (s *State) Members() []Member {
	out := make([]Member, 0, s.speaking+s.observing)
	for _, m := range s.members {
		if m.Active {
			out = append(out, *m)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].JoinedSeq < out[j].JoinedSeq })
	return out
}

// AllMembers returns every agent that ever was a member, by joined seq.
func (s *State) AllMembers() []Member {
	out := make([]Member, 0, len(s.members))
	for _, m := range s.members {
		out = append(out, *m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].JoinedSeq < out[j].JoinedSeq })
	return out
}

// Banned reports whether a is banned (§10.5).
func (s *State) Banned(a identity.AgentID) bool { return s.banned[a] }

// Reviewed returns the review recorded for a join request, if any.
func (s *State) Reviewed(id string) (ReviewedRequest, bool) {
	r, ok := s.requests[id]
	if !ok {
		return ReviewedRequest{}, false
	}
	return *r, true
}

// Consumed reports whether a room.join has consumed join request id.
func (s *State) Consumed(id string) bool { return s.consumed[id] }

// RecordHash returns the hash of the record at seq. The latest record and
// the head are answered from memory, older ones from the History; a History
// that cannot be read answers an unavailable *adp.Error, never "absent".
func (s *State) RecordHash(seq int64) (string, bool, error) {
	switch {
	case seq < 1 || seq > s.Seq:
		return "", false, nil
	case seq == s.Seq:
		return s.LastHash, true, nil
	case seq == s.Head.Seq:
		return s.Head.Hash, true, nil
	}
	h, ok, err := s.hist.RecordHash(seq)
	if err != nil {
		return "", false, historyUnavailable()
	}
	if !ok {
		return "", false, nil
	}
	return identity.EncodeB64(h[:]), true, nil
}

// SeqOf returns the seq of the record whose envelope hash or record hash is
// h; a History that cannot be read answers an unavailable *adp.Error.
func (s *State) SeqOf(h string) (int64, bool, error) {
	b, err := identity.DecodeB64Len(h, 32)
	if err != nil {
		return 0, false, nil
	}
	return s.seqOf([32]byte(b))
}

func (s *State) seqOf(id [32]byte) (int64, bool, error) {
	seq, ok, err := s.hist.SeqOf(id)
	if err != nil {
		return 0, false, historyUnavailable()
	}
	if !ok || seq < 1 || seq > s.Seq {
		return 0, false, nil
	}
	return seq, true, nil
}

// Counts returns the number of accepted records per event type.
func (s *State) Counts() map[string]int64 {
	out := make(map[string]int64, len(s.counts))
	for k, v := range s.counts {
		out[k] = v
	}
	return out
}

// Speaking returns the number of active moderators and speakers.
func (s *State) Speaking() int { return s.speaking }

// Limits returns the limits the state enforces.
func (s *State) Limits() Limits { return s.cfg.Limits }

// maxSpeakers is the effective speaking-role cap: policy.max_speakers bounded
// by the host cap.
func (s *State) maxSpeakers() int64 {
	lim := int64(s.cfg.Limits.MaxSpeakers)
	if p := s.Policy.MaxSpeakers; p > 0 && (lim <= 0 || p < lim) {
		return p
	}
	return lim
}

// roleAdmissible checks that a member may newly hold role r (§10.2, §10.4,
// §11): policy allows it and the speaking or observer caps hold. current is
// the agent's current active role ("" if none).
func (s *State) roleAdmissible(r, current adp.Role) error {
	if r == adp.RoleObserver {
		if !s.Policy.ObserversAllowed() {
			return adp.Reason(adp.CodeRoleNotAllowed, "observer_not_allowed", "this room does not allow observers")
		}
		if current != adp.RoleObserver && s.cfg.Limits.MaxObservers > 0 && s.observing >= s.cfg.Limits.MaxObservers {
			return adp.Reason(adp.CodeRoleNotAllowed, "max_observers", "this room has reached its observer limit").WithData("limit", "max_observers")
		}
		return nil
	}
	if !current.Speaking() {
		if m := s.maxSpeakers(); m > 0 && int64(s.speaking) >= m {
			return &adp.Error{Code: adp.CodeMaxSpeakersExceeded, Message: "the room's speaker limit would be exceeded",
				Data: map[string]any{"max_speakers": m, "speaking": s.speaking}}
		}
	}
	return nil
}

// setRole changes (or creates) an active membership, keeping counts right.
func (s *State) setRole(a identity.AgentID, r adp.Role, perspective string, seq int64, join bool) {
	m, ok := s.members[a]
	if ok && m.Active {
		s.uncount(m.Role)
	}
	if !ok {
		m = &Member{Agent: a}
		s.members[a] = m
	}
	if join {
		m.JoinedSeq = seq
		m.Perspective = perspective
		m.LeftSeq = 0
	}
	m.Active = true
	m.Role = r
	s.count(r)
}

func (s *State) deactivate(a identity.AgentID, seq int64) {
	m, ok := s.members[a]
	if !ok || !m.Active {
		return
	}
	s.uncount(m.Role)
	m.Active = false
	m.LeftSeq = seq
}

func (s *State) count(r adp.Role) {
	if r.Speaking() {
		s.speaking++
	} else {
		s.observing++
	}
}

func (s *State) uncount(r adp.Role) {
	if r.Speaking() {
		s.speaking--
	} else {
		s.observing--
	}
}

// SetHistory replaces the state's History, which must hold the same
// records (a host replays into a MemHistory, then hands over to its store).
func (s *State) SetHistory(h History) { s.hist = h }

// SetPackSource replaces the source of external pack documents used by
// later admissions (a host fetches the packs an envelope names before it
// admits it).
func (s *State) SetPackSource(src types.PackSource) { s.cfg.Packs = src }
