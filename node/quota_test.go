//go:build e2e

package node_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/adpnode/adpnode/internal/adptest"
	"github.com/adpnode/adpnode/node"
)

// room.create is bounded per agent per minute (a host policy published in
// discovery): the 31st room in a minute is rate_limited with Retry-After,
// another agent is unaffected, and a minute later the agent may create again.
func TestRoomCreateQuota(t *testing.T) {
	h := adptest.StartHost(t, node.Config{Rates: node.DefaultRates()})
	alice, bob := adptest.NewAgent("quota-alice"), adptest.NewAgent("quota-bob")
	for i := 0; i < 30; i++ {
		h.CreateRoom(t, alice, h.RoomPayload("public"))
	}
	r := adptest.Do(t, http.MethodPost, h.URL+"/v1/rooms", "", alice.Envelope(h.Clock.Ms(), "room.create", "", 0, "", h.RoomPayload("public")))
	if r.ErrorCode() != "rate_limited" || r.Status != http.StatusTooManyRequests || r.Header.Get("Retry-After") == "" {
		t.Fatalf("31st room: %s", r)
	}
	h.CreateRoom(t, bob, h.RoomPayload("public"))
	h.Clock.Advance(61 * time.Second)
	h.CreateRoom(t, alice, h.RoomPayload("public"))
}
