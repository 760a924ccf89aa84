//go:build e2e

package hostapi_test

import (
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/adpnode/adpnode/internal/adptest"
	"github.com/adpnode/adpnode/node"
)

// TestStatusClearedOnLeaveRace: a status write racing the writer's own
// room.leave must never outlive the membership (§17.4: leaving clears the
// status). Either the write lands first and the leave clears it, or the
// leave lands first and the write is refused.
func TestStatusClearedOnLeaveRace(t *testing.T) {
	h := adptest.StartHost(t, node.Config{Rates: highRates()})
	c := adptest.NewAgent("sr-creator")
	id := createRoom(t, h, c, roomPayload("public", h.Clock.Ms(), time.Hour))
	const rounds = 40
	for i := 0; i < rounds; i++ {
		a := adptest.NewAgent("sr-" + fmtSeq(int64(i)))
		joinRoom(t, h, a, id, "speaker")
		head := h.Head(t, a, id)
		leave := a.Envelope(h.Clock.Ms(), "room.leave", id, head.Seq, head.Hash, map[string]any{})
		token := tok(h, a)
		var wg sync.WaitGroup
		var leaveResp, putResp *adptest.Response
		var leaveErr, putErr error
		wg.Add(2)
		go func() {
			defer wg.Done()
			putResp, putErr = tryDo(http.MethodPut, h.URL+"/v1/rooms/"+id+"/agent-status", token, []byte(`{"state":"drafting"}`))
		}()
		go func() {
			defer wg.Done()
			leaveResp, leaveErr = tryDo(http.MethodPost, h.URL+"/v1/rooms/"+id, "", leave)
		}()
		wg.Wait()
		if putErr != nil || leaveErr != nil {
			t.Fatal(putErr, leaveErr)
		}
		expectStatus(t, leaveResp, http.StatusCreated)
		if putResp.Status != http.StatusOK && putResp.ErrorCode() != "membership_required" {
			t.Fatalf("status write: %s", short(putResp))
		}
		if r := get(t, h, nil, "/v1/rooms/"+id+"/agent-status/"+string(a.ID)); r.Status != http.StatusNotFound {
			t.Fatalf("round %d: a left member still has a status: %s", i, short(r))
		}
	}
}
