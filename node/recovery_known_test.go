//go:build e2e

package node_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/adpnode/adpnode/internal/adptest"
	"github.com/adpnode/adpnode/node"
)

// TestRecoveryKeepsAutoApprovedPerspective is a known bug found by
// TestRecoveryProperty. A room.join with request_id must not
// carry a perspective (§10.2): the join request's perspective is
// authoritative. For a request that a room.join.review decided, the chain
// holds it (the review carries the request). For an auto-approved request
// (public room, or a listed moderator asking for moderator) no record holds
// it: the live node takes it from its join-request store. Recovery judges
// the record from the chain alone but takes that immutable fact from the
// store, so the member's perspective survives a restart. (An offline replay
// — archive verification, a mirror — has no store and shows none: no record
// carries it.)
func TestRecoveryKeepsAutoApprovedPerspective(t *testing.T) {
	for _, vis := range []string{"public", "restricted"} {
		t.Run(vis, func(t *testing.T) {
			h := adptest.StartHostAt(t, node.Config{DataDir: t.TempDir()}, adptest.NewClock())
			c, a := adptest.NewAgent("persp-creator-"+vis), adptest.NewAgent("persp-applicant-"+vis)
			p := h.RoomPayload(vis)
			p["policy"] = map[string]any{"moderator_agent_ids": []string{string(a.ID)}}
			id := h.CreateRoom(t, c, p)
			body, _ := json.Marshal(map[string]any{"role": "moderator", "perspective": "security reviewer"})
			r := adptest.Do(t, http.MethodPost, h.URL+"/v1/rooms/"+id+"/join-requests", a.Token(h.URL, h.Clock.Ms()), body)
			var jr struct {
				Status  string `json:"status"`
				Request struct {
					ID string `json:"id"`
				} `json:"request"`
			}
			if r.Status != http.StatusCreated || r.JSON(&jr) != nil || jr.Status != "approved" {
				t.Fatalf("join request: %s", r)
			}
			h.MustPost(t, a, id, "room.join", map[string]any{"role": "moderator", "request_id": jr.Request.ID})
			perspective := func(h *adptest.Host) string {
				r := adptest.Do(t, http.MethodGet, h.URL+"/v1/rooms/"+id+"/members", c.Token(h.URL, h.Clock.Ms()), nil)
				var out struct {
					Result []struct {
						AgentID     string `json:"agent_id"`
						Perspective string `json:"perspective"`
					} `json:"result"`
				}
				if r.Status != http.StatusOK || r.JSON(&out) != nil {
					t.Fatalf("members: %s", r)
				}
				for _, m := range out.Result {
					if m.AgentID == string(a.ID) {
						return m.Perspective
					}
				}
				t.Fatalf("%s is not a member: %s", a.Name, r)
				return ""
			}
			if got := perspective(h); got != "security reviewer" {
				t.Fatalf("before the restart the perspective is %q", got)
			}
			h = h.Restart(t)
			if got := perspective(h); got != "security reviewer" {
				t.Errorf("after the restart the perspective is %q, was %q", got, "security reviewer")
			}
		})
	}
}
