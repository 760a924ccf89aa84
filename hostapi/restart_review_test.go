//go:build e2e

package hostapi_test

import (
	"testing"
	"time"

	"github.com/adpnode/adpnode/adp"
	"github.com/adpnode/adpnode/internal/adptest"
	"github.com/adpnode/adpnode/node"
)

// TestRestartAfterJoinReviews replays a failure seen in the field: a node whose
// rooms went through join reviews (approved, rejected, consumed, pending)
// must restart, and its join requests and members must be what they were.
// Recovery judges the chain alone, never the live join-request store.
func TestRestartAfterJoinReviews(t *testing.T) {
	for _, vis := range []string{"restricted", "private"} {
		t.Run(vis, func(t *testing.T) {
			h := adptest.StartHostAt(t, node.Config{DataDir: t.TempDir()}, adptest.NewClock())
			c, ok1, ok2, no, wait := adptest.NewAgent(vis+"-c"), adptest.NewAgent(vis+"-ok1"), adptest.NewAgent(vis+"-ok2"),
				adptest.NewAgent(vis+"-no"), adptest.NewAgent(vis+"-wait")
			id := createRoom(t, h, c, roomPayload(vis, h.Clock.Ms(), time.Hour))
			jr1 := createJR(t, h, ok1, id, "speaker")
			review(t, h, c, id, jr1, "approve", "speaker")
			h.MustPost(t, ok1, id, "room.join", map[string]any{"role": "speaker", "request_id": jr1.id()})
			jr2 := createJR(t, h, ok2, id, "speaker")
			review(t, h, c, id, jr2, "approve", "observer") // approved, not yet consumed
			jr3 := createJR(t, h, no, id, "speaker")
			review(t, h, c, id, jr3, "reject", "")
			jr4 := createJR(t, h, wait, id, "observer") // still pending

			h = h.Restart(t)
			status := func(a *adptest.Agent, jr jrView) string {
				return decode[jrView](t, get(t, h, a, "/v1/rooms/"+id+"/join-requests/"+jr.id())).Status
			}
			for _, tc := range []struct {
				a    *adptest.Agent
				jr   jrView
				want string
			}{{ok1, jr1, "approved"}, {ok2, jr2, "approved"}, {no, jr3, "rejected"}, {wait, jr4, "pending"}} {
				if got := status(tc.a, tc.jr); got != tc.want {
					t.Errorf("after restart %s's request is %q, want %q", tc.a.Name, got, tc.want)
				}
			}
			// The flows go on: the approved request is consumed, the
			// consumed one cannot be reused, the pending one is reviewed.
			h.MustPost(t, ok2, id, "room.join", map[string]any{"role": "observer", "request_id": jr2.id()})
			expectCode(t, h.Post(t, ok1, id, "room.join", map[string]any{"role": "speaker", "request_id": jr1.id()}), adp.CodePermissionDenied)
			// A rejected applicant of a private room cannot even read its head: sign on the creator's view.
			head := h.Head(t, c, id)
			env := no.Envelope(h.Clock.Ms(), "room.join", id, head.Seq, head.Hash, map[string]any{"role": "speaker", "request_id": jr3.id()})
			expectCode(t, submit(t, h, id, env), adp.CodeJoinRequestNotApproved)
			review(t, h, c, id, jr4, "approve", "observer")
			h.MustPost(t, wait, id, "room.join", map[string]any{"role": "observer", "request_id": jr4.id()})
			h.MustPost(t, c, id, "room.member.remove", map[string]any{"member": string(ok1.ID), "ban": true})

			h = h.Restart(t)
			members := decode[struct {
				Result []struct {
					AgentID string `json:"agent_id"`
					Role    string `json:"role"`
				}
			}](t, get(t, h, c, "/v1/rooms/"+id+"/members")).Result
			got := map[string]string{}
			for _, m := range members {
				got[m.AgentID] = m.Role
			}
			want := map[string]string{string(c.ID): "moderator", string(ok2.ID): "observer", string(wait.ID): "observer"}
			if len(got) != len(want) {
				t.Fatalf("members after second restart: %v, want %v", got, want)
			}
			for k, v := range want {
				if got[k] != v {
					t.Errorf("member %s role %q, want %q", k, got[k], v)
				}
			}
			// The ban survived: a new request is not auto-approved, a direct join refused.
			head = h.Head(t, c, id)
			env = ok1.Envelope(h.Clock.Ms(), "room.join", id, head.Seq, head.Hash, map[string]any{"role": "speaker"})
			expectCode(t, submit(t, h, id, env), adp.CodeMemberBanned)
		})
	}
}
