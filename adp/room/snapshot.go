package room

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"

	"github.com/adpnode/adpnode/adp/identity"
	"github.com/adpnode/adpnode/adp/types"
)

// snapshotVersion changes whenever the encoding below does; a host that
// finds another version discards the snapshot and replays the chain.
const snapshotVersion = 1

// stateSnapshot is the encoding of everything a State derives from its
// records, except the History (which the host keeps beside the records).
type stateSnapshot struct {
	V              int                `json:"v"`
	ID             string             `json:"id"`
	Creator        identity.AgentID   `json:"creator"`
	CreatedAt      int64              `json:"created_at"`
	Topic          string             `json:"topic"`
	Agenda         string             `json:"agenda,omitempty"`
	Guidance       string             `json:"guidance,omitempty"`
	Visibility     string             `json:"visibility"`
	StartTime      int64              `json:"start_time"`
	EndTime        int64              `json:"end_time"`
	Tags           []string           `json:"tags,omitempty"`
	Language       string             `json:"language,omitempty"`
	Policy         Policy             `json:"policy"`
	Extra          json.RawMessage    `json:"extra,omitempty"`
	Cancelled      bool               `json:"cancelled,omitempty"`
	Closed         bool               `json:"closed,omitempty"`
	ClosedAt       int64              `json:"closed_at,omitempty"`
	Types          []json.RawMessage  `json:"types,omitempty"`
	Imports        []snapshotImport   `json:"imports,omitempty"`
	Members        []Member           `json:"members,omitempty"`
	Banned         []identity.AgentID `json:"banned,omitempty"`
	Requests       []ReviewedRequest  `json:"requests,omitempty"`
	Consumed       []string           `json:"consumed,omitempty"`
	Seq            int64              `json:"seq"`
	LastHash       string             `json:"last_hash"`
	PreHash        string             `json:"pre_hash,omitempty"`
	LastReceivedAt int64              `json:"last_received_at"`
	Head           Head               `json:"head"`
	Counts         map[string]int64   `json:"counts,omitempty"`
}

type snapshotImport struct {
	Pack   string `json:"pack"`
	Digest string `json:"digest,omitempty"`
	// Raw is the document's exact bytes (base64: as a JSON value they would
	// be re-encoded, and an external pack's digest is over its raw bytes);
	// absent for registered packs, which the program has.
	Raw []byte `json:"raw,omitempty"`
}

// Encode returns the state as bytes that Decode turns back into an equal
// state (one whose Snapshot is byte-identical and which admits exactly the
// same envelopes), so that a host restarts from it instead of replaying
// the whole chain. It does not include the History.
func (s *State) Encode() []byte {
	w := stateSnapshot{
		V: snapshotVersion, ID: s.ID, Creator: s.Creator, CreatedAt: s.CreatedAt,
		Topic: s.Topic, Agenda: s.Agenda, Guidance: s.Guidance, Visibility: s.Visibility,
		StartTime: s.StartTime, EndTime: s.EndTime, Tags: s.Tags, Language: s.Language,
		Policy: s.Policy, Extra: s.Extra, Cancelled: s.Cancelled, Closed: s.Closed, ClosedAt: s.ClosedAt,
		Members: s.AllMembers(), Seq: s.Seq, LastHash: s.LastHash, PreHash: s.PreHash,
		LastReceivedAt: s.LastReceivedAt, Head: s.Head, Counts: s.counts,
	}
	for _, d := range s.Registry.List() {
		b, err := d.MarshalJSON()
		if err != nil {
			panic(err) // every definition marshals
		}
		w.Types = append(w.Types, b)
	}
	for _, imp := range s.Imports {
		si := snapshotImport{Pack: imp.Pack, Digest: imp.Digest}
		if p, ok := types.RegisteredPack(imp.Pack); !ok || imp.Digest != "" || !bytes.Equal(p.Raw, imp.Raw) {
			si.Raw = imp.Raw
		}
		w.Imports = append(w.Imports, si)
	}
	for a := range s.banned {
		w.Banned = append(w.Banned, a)
	}
	sort.Slice(w.Banned, func(i, j int) bool { return w.Banned[i] < w.Banned[j] })
	for _, r := range s.requests {
		w.Requests = append(w.Requests, *r)
	}
	sort.Slice(w.Requests, func(i, j int) bool { return w.Requests[i].ID < w.Requests[j].ID })
	for id := range s.consumed {
		w.Consumed = append(w.Consumed, id)
	}
	sort.Strings(w.Consumed)
	b, err := json.Marshal(w)
	if err != nil {
		panic(err) // every value above marshals
	}
	return b
}

// Decode rebuilds a state that Encode wrote, under cfg (whose History must
// hold the room's records up to at least the snapshot's seq).
func Decode(cfg Config, b []byte) (*State, error) {
	var w stateSnapshot
	if err := json.Unmarshal(b, &w); err != nil {
		return nil, fmt.Errorf("room snapshot: %w", err)
	}
	if w.V != snapshotVersion {
		return nil, fmt.Errorf("room snapshot: version %d, want %d", w.V, snapshotVersion)
	}
	if w.Seq < 1 || w.ID == "" {
		return nil, fmt.Errorf("room snapshot: no room")
	}
	s := New(cfg)
	s.ID, s.Creator, s.CreatedAt = w.ID, w.Creator, w.CreatedAt
	s.Contract = Contract{Topic: w.Topic, Agenda: w.Agenda, Guidance: w.Guidance, Visibility: w.Visibility,
		StartTime: w.StartTime, EndTime: w.EndTime, Tags: w.Tags, Language: w.Language, Policy: w.Policy, Extra: w.Extra}
	s.Cancelled, s.Closed, s.ClosedAt = w.Cancelled, w.Closed, w.ClosedAt
	defs := make([]*types.Definition, 0, len(w.Types))
	for _, raw := range w.Types {
		d, err := types.RestoreDefinition(raw)
		if err != nil {
			return nil, fmt.Errorf("room snapshot: type: %w", err)
		}
		defs = append(defs, d)
	}
	reg, err := types.RestoreRegistry(defs)
	if err != nil {
		return nil, fmt.Errorf("room snapshot: %w", err)
	}
	s.Registry = reg
	for _, si := range w.Imports {
		imp := types.Import{Pack: si.Pack, Digest: si.Digest, Raw: json.RawMessage(si.Raw)}
		if si.Raw == nil {
			p, ok := types.RegisteredPack(si.Pack)
			if !ok || si.Digest != "" {
				return nil, fmt.Errorf("room snapshot: import %q has no document", si.Pack)
			}
			imp.Raw = p.Raw
		}
		s.Imports = append(s.Imports, imp)
	}
	for _, m := range w.Members {
		m := m
		if _, dup := s.members[m.Agent]; dup {
			return nil, fmt.Errorf("room snapshot: member %s repeated", m.Agent)
		}
		s.members[m.Agent] = &m
		if m.Active {
			s.count(m.Role)
		}
	}
	for _, a := range w.Banned {
		s.banned[a] = true
	}
	for _, r := range w.Requests {
		r := r
		s.requests[r.ID] = &r
	}
	for _, id := range w.Consumed {
		s.consumed[id] = true
	}
	s.Seq, s.LastHash, s.PreHash, s.LastReceivedAt, s.Head = w.Seq, w.LastHash, w.PreHash, w.LastReceivedAt, w.Head
	if w.Counts != nil {
		s.counts = w.Counts
	}
	return s, nil
}
