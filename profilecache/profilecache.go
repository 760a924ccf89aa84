// Package profilecache resolves the profiles of agents this node does not
// hold (docs/profiles.md): the agents of rooms it mirrors or lists, whose
// profiles their rooms' hosts serve. A profile is fetched from the room's
// host with the guarded outbound client (internal/safehttp: public
// addresses only, every phase bounded), verified (adp/profile: the signed
// profile.update, signer == payload.id == the agent asked for) before it
// is kept, and cached with bounds on count and bytes, least recently used
// out first; a cached answer (a profile, or its absence) is asked again
// lazily, on the first lookup after it has aged. An update never replaces
// a newer one of the same agent (nonce order), whichever host served it.
package profilecache

import (
	"container/list"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/adpnode/adpnode/adp/identity"
	"github.com/adpnode/adpnode/adp/profile"
	"github.com/adpnode/adpnode/hostport"
)

// Config configures a Cache.
type Config struct {
	// Origins returns the origins that serve the profiles of the agents
	// of roomID: its host, for a room this node mirrors or lists (none
	// for a room it does not know).
	Origins func(roomID string) []string
	// Client is the outbound client (internal/safehttp's).
	Client *http.Client
	// MaxEntries and MaxBytes bound the cache (defaults 10,000 and 8 MiB);
	// TTL is how long a profile is served before it is asked again
	// (default 10 min), MissTTL the same for an agent without one
	// (default 1 min).
	MaxEntries   int
	MaxBytes     int64
	TTL, MissTTL time.Duration
	// MaxInFlight bounds concurrent fetches (default 4) and
	// FetchesPerMinute their rate (default 120): a lookup beyond either
	// answers from the cache alone, so lookups cannot make this node send
	// hosts more than that.
	MaxInFlight      int
	FetchesPerMinute int
	Now              func() time.Time
	Log              *slog.Logger
}

// MaxIDsPerFetch is the agents asked of a host in one request (the
// batch lookup's cap).
const MaxIDsPerFetch = 100

// maxAnswerBytes bounds one fetch's answer: MaxIDsPerFetch profiles of
// profile.MaxEnvelopeBytes each, with room for their wrappers.
const maxAnswerBytes = MaxIDsPerFetch * (profile.MaxEnvelopeBytes*2 + 1024)

// Cache is the bounded cache of remote profiles; safe for concurrent use.
type Cache struct {
	cfg      Config
	inflight chan struct{}

	mu    sync.Mutex
	m     map[identity.AgentID]*list.Element // of *entry
	lru   *list.List                         // front: most recently used
	bytes int64

	fetches, refused int64
	recent           []time.Time // fetch start times within the last minute
}

type entry struct {
	id    identity.AgentID
	p     *hostport.Profile // nil: the host has none
	nonce int64
	at    time.Time
	size  int64
}

// New returns an empty cache.
func New(cfg Config) *Cache {
	if cfg.MaxEntries <= 0 {
		cfg.MaxEntries = 10_000
	}
	if cfg.MaxBytes <= 0 {
		cfg.MaxBytes = 8 << 20
	}
	if cfg.TTL <= 0 {
		cfg.TTL = 10 * time.Minute
	}
	if cfg.MissTTL <= 0 {
		cfg.MissTTL = time.Minute
	}
	if cfg.MaxInFlight <= 0 {
		cfg.MaxInFlight = 4
	}
	if cfg.FetchesPerMinute <= 0 {
		cfg.FetchesPerMinute = 120
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.Origins == nil {
		cfg.Origins = func(string) []string { return nil }
	}
	return &Cache{cfg: cfg, inflight: make(chan struct{}, cfg.MaxInFlight), m: map[identity.AgentID]*list.Element{}, lru: list.New()}
}

// Stats are the cache's size and work so far.
type Stats struct {
	Entries          int
	Bytes            int64
	Fetches, Refused int64
}

// Stats reports the cache's size and counters.
func (c *Cache) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return Stats{Entries: c.lru.Len(), Bytes: c.bytes, Fetches: c.fetches, Refused: c.refused}
}

// Resolve answers the profiles of ids it can: cached ones, and, when
// roomID names a room whose host is known, those fetched from that host
// for the agents not cached or aged. Agents without a profile are absent.
func (c *Cache) Resolve(ctx context.Context, roomID string, ids []identity.AgentID) map[identity.AgentID]*hostport.Profile {
	now := c.cfg.Now()
	out := make(map[identity.AgentID]*hostport.Profile, len(ids))
	var stale []identity.AgentID
	c.mu.Lock()
	for _, id := range ids {
		el, ok := c.m[id]
		if !ok {
			stale = append(stale, id)
			continue
		}
		e := el.Value.(*entry)
		c.lru.MoveToFront(el)
		if e.p != nil {
			out[id] = e.p
		}
		ttl := c.cfg.TTL
		if e.p == nil {
			ttl = c.cfg.MissTTL
		}
		if now.Sub(e.at) >= ttl {
			stale = append(stale, id)
		}
	}
	c.mu.Unlock()
	if len(stale) == 0 || roomID == "" {
		return out
	}
	origins := c.cfg.Origins(roomID)
	for _, origin := range origins {
		for len(stale) > 0 {
			n := min(len(stale), MaxIDsPerFetch)
			batch := stale[:n]
			stale = stale[n:]
			if !c.allowFetch(now) {
				return out // over the rate: the cache alone
			}
			select {
			case c.inflight <- struct{}{}:
			default:
				return out // busy: the cache alone
			}
			got, err := c.fetch(ctx, origin, batch)
			<-c.inflight
			if err != nil {
				c.cfg.Log.Debug("profile fetch failed", "origin", origin, "err", err)
				continue
			}
			for id, p := range c.store(batch, got, now) {
				out[id] = p
			}
		}
		break // the room's host; a room has one
	}
	return out
}

// fetch asks origin for ids and returns the profiles that verify, keyed
// by agent; anything else in the answer is refused.
func (c *Cache) fetch(ctx context.Context, origin string, ids []identity.AgentID) (map[identity.AgentID]*hostport.Profile, error) {
	u, err := url.Parse(origin)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.Path != "" || u.RawQuery != "" {
		return nil, fmt.Errorf("not an origin: %q", origin)
	}
	parts := make([]string, len(ids))
	want := make(map[identity.AgentID]bool, len(ids))
	for i, id := range ids {
		parts[i] = string(id)
		want[id] = true
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, origin+"/v1/profiles?ids="+url.QueryEscape(strings.Join(parts, ",")), nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	c.mu.Lock()
	c.fetches++
	c.mu.Unlock()
	resp, err := c.cfg.Client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBytes+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxAnswerBytes {
		c.refuse()
		return nil, fmt.Errorf("answer larger than %d bytes", maxAnswerBytes)
	}
	var page struct {
		Result []struct {
			AgentID  identity.AgentID `json:"agent_id"`
			Envelope json.RawMessage  `json:"envelope"`
		} `json:"result"`
	}
	if err := json.Unmarshal(b, &page); err != nil {
		c.refuse()
		return nil, fmt.Errorf("answer: %w", err)
	}
	now := c.cfg.Now().UnixMilli()
	out := map[identity.AgentID]*hostport.Profile{}
	for _, r := range page.Result {
		p, err := profile.Open(r.Envelope)
		if err != nil || p.ID != r.AgentID || !want[p.ID] {
			c.refuse()
			continue
		}
		if prev := out[p.ID]; prev != nil && prev.Nonce >= p.Nonce() {
			continue
		}
		out[p.ID] = &hostport.Profile{AgentID: p.ID, Name: p.Name, Capabilities: p.Capabilities, Extra: p.Extra,
			Envelope: p.Envelope.Raw, ReceivedAt: now, Source: origin, SelfAsserted: true, Nonce: p.Nonce()}
	}
	return out, nil
}

// allowFetch counts one fetch at now if the last minute has room for it.
func (c *Cache) allowFetch(now time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	i := 0
	for i < len(c.recent) && now.Sub(c.recent[i]) >= time.Minute {
		i++
	}
	c.recent = c.recent[i:]
	if len(c.recent) >= c.cfg.FetchesPerMinute {
		return false
	}
	c.recent = append(c.recent, now)
	return true
}

func (c *Cache) refuse() {
	c.mu.Lock()
	c.refused++
	c.mu.Unlock()
}

// store records the answer for asked (a miss for those without one,
// unless a profile is cached: a host that has none does not erase what
// another served) and returns what is now cached for them.
func (c *Cache) store(asked []identity.AgentID, got map[identity.AgentID]*hostport.Profile, now time.Time) map[identity.AgentID]*hostport.Profile {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[identity.AgentID]*hostport.Profile{}
	for _, id := range asked {
		p := got[id]
		el, ok := c.m[id]
		if ok {
			e := el.Value.(*entry)
			switch {
			case p == nil && e.p != nil, p != nil && e.p != nil && p.Nonce <= e.nonce:
				// Keep the newer profile; it is fresh again.
				e.at = now
			default:
				c.bytes -= e.size
				e.p, e.at, e.size = p, now, entrySize(p)
				if p != nil {
					e.nonce = p.Nonce
				}
				c.bytes += e.size
			}
			c.lru.MoveToFront(el)
			if e.p != nil {
				out[id] = e.p
			}
			continue
		}
		e := &entry{id: id, p: p, at: now, size: entrySize(p)}
		if p != nil {
			e.nonce = p.Nonce
			out[id] = p
		}
		c.m[id] = c.lru.PushFront(e)
		c.bytes += e.size
	}
	for c.lru.Len() > c.cfg.MaxEntries || c.bytes > c.cfg.MaxBytes {
		el := c.lru.Back()
		e := el.Value.(*entry)
		c.lru.Remove(el)
		delete(c.m, e.id)
		c.bytes -= e.size
	}
	return out
}

// entrySize is what an entry costs: its envelope and fields, and a fixed
// overhead for the entry itself.
func entrySize(p *hostport.Profile) int64 {
	const overhead = 256
	if p == nil {
		return overhead
	}
	n := overhead + len(p.Envelope) + len(p.Name) + len(p.Extra) + len(p.Source)
	for _, c := range p.Capabilities {
		n += len(c) + 16
	}
	return int64(n)
}
