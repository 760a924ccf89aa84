package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/adpnode/adpnode/adp/identity"
	"github.com/adpnode/adpnode/adp/profile"
)

// Profile is an agent's profile (agent-profile/1.0, docs/profiles.md) as
// this client verified it: the fields are read from the signed envelope
// the host served, never from the host's wrapper, so a host cannot put a
// name on an agent the agent did not sign. A name is self-asserted: show
// it with the key fragment (Label) and decide nothing by it.
type Profile struct {
	AgentID      identity.AgentID
	Name         string
	Capabilities []string
	Extra        json.RawMessage
	// Envelope is the signed profile.update, as served.
	Envelope json.RawMessage
	// ReceivedAt and Source are the serving host's assertions: when the
	// profile was accepted or fetched, and the origin it was fetched from
	// ("" when the host accepted it itself).
	ReceivedAt int64
	Source     string
}

// Label is the name as it may be shown (inert) with the key fragment.
func (p *Profile) Label() string { return profile.Label(p.AgentID, p.Name) }

type wireProfile struct {
	AgentID    identity.AgentID `json:"agent_id"`
	Envelope   json.RawMessage  `json:"envelope"`
	ReceivedAt int64            `json:"received_at"`
	Source     string           `json:"source"`
}

func (w *wireProfile) verify(want identity.AgentID) (*Profile, error) {
	p, err := profile.Open(w.Envelope)
	if err != nil {
		return nil, fmt.Errorf("profile of %s: the served envelope does not verify: %w", want, err)
	}
	if p.ID != want || w.AgentID != want {
		return nil, fmt.Errorf("profile of %s: the host served the profile of %s", want, p.ID)
	}
	return &Profile{AgentID: p.ID, Name: p.Name, Capabilities: p.Capabilities, Extra: p.Extra,
		Envelope: p.Envelope.Raw, ReceivedAt: w.ReceivedAt, Source: w.Source}, nil
}

// SetProfile signs a profile.update of this client's agent and stores it
// on the host (POST /v1/profiles). capabilities and extra may be nil.
func (c *Client) SetProfile(ctx context.Context, name string, capabilities []string, extra json.RawMessage) (*Profile, error) {
	pl, err := profile.Payload(c.Key.ID, name, capabilities, extra)
	if err != nil {
		return nil, err
	}
	canon, err := identity.Canonicalize(pl)
	if err != nil {
		return nil, err
	}
	now := c.nowMs()
	env, err := c.Sign(identity.Event{Protocol: profile.Protocol, Type: profile.Type, Actor: c.Key.ID,
		CreatedAt: now, Nonce: c.Key.nextNonce(now), Payload: canon})
	if err != nil {
		return nil, err
	}
	var w wireProfile
	if err := c.submit(ctx, "/v1/profiles", env, &w); err != nil {
		return nil, err
	}
	return w.verify(c.Key.ID)
}

// Profile looks up one agent's profile (GET /v1/profiles/{agent_id}) and
// verifies it; an agent without one is a not_found *Error. roomID, when
// set, names a room the agent appears in, so a host that does not hold the
// profile may fetch it from that room's host.
func (c *Client) Profile(ctx context.Context, id identity.AgentID, roomID string) (*Profile, error) {
	path := "/v1/profiles/" + url.PathEscape(string(id))
	if roomID != "" {
		path += "?room=" + url.QueryEscape(roomID)
	}
	var w wireProfile
	if _, err := c.do(ctx, http.MethodGet, path, nil, false, &w); err != nil {
		return nil, err
	}
	return w.verify(id)
}

// Profiles looks up several agents' profiles (GET /v1/profiles?ids=…, in
// batches of 100) and verifies each; agents without one are absent from
// the map. A served profile that does not verify, or names another agent,
// is an error.
func (c *Client) Profiles(ctx context.Context, ids []identity.AgentID, roomID string) (map[identity.AgentID]*Profile, error) {
	out := make(map[identity.AgentID]*Profile, len(ids))
	for len(ids) > 0 {
		n := min(len(ids), 100)
		batch := ids[:n]
		ids = ids[n:]
		want := make(map[identity.AgentID]bool, n)
		parts := make([]string, n)
		for i, id := range batch {
			want[id] = true
			parts[i] = string(id)
		}
		path := "/v1/profiles?ids=" + url.QueryEscape(strings.Join(parts, ","))
		if roomID != "" {
			path += "&room=" + url.QueryEscape(roomID)
		}
		var page struct {
			Result []wireProfile `json:"result"`
		}
		if _, err := c.do(ctx, http.MethodGet, path, nil, false, &page); err != nil {
			return nil, err
		}
		for i := range page.Result {
			w := &page.Result[i]
			if !want[w.AgentID] {
				return nil, fmt.Errorf("profiles: the host served a profile of %s, which was not asked for", w.AgentID)
			}
			p, err := w.verify(w.AgentID)
			if err != nil {
				return nil, err
			}
			out[p.AgentID] = p
		}
	}
	return out, nil
}
