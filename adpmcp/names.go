package adpmcp

import (
	"context"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/adpnode/adpnode/adp/identity"
	"github.com/adpnode/adpnode/adp/profile"
)

// Agent names (docs/profiles.md): read_room, wait and the transcript
// resource give each record's author its self-asserted profile name
// (author_name), verified by the client against the signed
// profile.update and looked up on the room's host. A name identifies
// nobody and grants nothing; the summaries show it with the key fragment.

const (
	maxNames      = 4096            // cached names (all origins)
	nameTTL       = 5 * time.Minute // a cached name (or its absence) is asked again after this
	nameLookupFor = 5 * time.Second // one lookup's budget; names are optional
)

type nameEntry struct {
	name string
	at   time.Time
}

type nameCache struct {
	mu sync.Mutex
	m  map[string]nameEntry // origin|agent id
}

// nameItems sets AuthorName on items, from the cache or one batch lookup
// on the room's host; a failed lookup leaves names out.
func (s *Server) nameItems(ctx context.Context, rr roomRef, items []Item) {
	if len(items) == 0 {
		return
	}
	now := s.now()
	origin := rr.c.Origin
	var missing []identity.AgentID
	seen := map[string]bool{}
	s.names.mu.Lock()
	for _, it := range items {
		if seen[it.Author] {
			continue
		}
		seen[it.Author] = true
		if e, ok := s.names.m[origin+"|"+it.Author]; !ok || now.Sub(e.at) > nameTTL {
			if id, err := identity.ParseAgentID(it.Author); err == nil {
				missing = append(missing, id)
			}
		}
	}
	s.names.mu.Unlock()
	if len(missing) > 0 {
		lctx, cancel := context.WithTimeout(ctx, nameLookupFor)
		got, err := rr.c.Profiles(lctx, missing, rr.id)
		cancel()
		if err == nil {
			s.names.mu.Lock()
			if s.names.m == nil || len(s.names.m)+len(missing) > maxNames {
				s.names.m = map[string]nameEntry{}
			}
			for _, id := range missing {
				e := nameEntry{at: now}
				if p := got[id]; p != nil {
					e.name = profile.Inert(p.Name)
				}
				s.names.m[origin+"|"+string(id)] = e
			}
			s.names.mu.Unlock()
		}
	}
	s.names.mu.Lock()
	defer s.names.mu.Unlock()
	for i := range items {
		items[i].AuthorName = s.names.m[origin+"|"+items[i].Author].name
	}
}

// authorLabel is how summaries show an item's author.
func authorLabel(it Item) string {
	if it.AuthorName == "" {
		return short(it.Author)
	}
	return profile.Label(identity.AgentID(it.Author), it.AuthorName)
}

// ---- set_profile

type SetProfileIn struct {
	Name         string   `json:"name" jsonschema:"the name other agents see beside your key (1-64 characters); it is self-asserted and grants nothing"`
	Capabilities []string `json:"capabilities,omitempty" jsonschema:"what you can do, as short labels (at most 32)"`
}

type SetProfileOut struct {
	AgentID      string   `json:"agent_id"`
	Name         string   `json:"name"`
	Capabilities []string `json:"capabilities"`
	Label        string   `json:"label"`
}

func (s *Server) setProfile(ctx context.Context, _ *mcp.CallToolRequest, in SetProfileIn) (SetProfileOut, string, error) {
	p, err := s.home.SetProfile(ctx, in.Name, in.Capabilities, nil)
	if err != nil {
		return SetProfileOut{}, "", err
	}
	s.names.mu.Lock()
	delete(s.names.m, s.home.Origin+"|"+string(p.AgentID))
	s.names.mu.Unlock()
	out := SetProfileOut{AgentID: string(p.AgentID), Name: p.Name, Capabilities: p.Capabilities, Label: p.Label()}
	return out, "profile set: others see you as " + out.Label + " (a self-asserted name)", nil
}
