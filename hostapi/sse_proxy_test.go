//go:build e2e

package hostapi_test

import (
	"testing"
	"time"

	"github.com/adpnode/adpnode/internal/adptest"
	"github.com/adpnode/adpnode/node"
)

// TestSSETellsProxiesNotToBuffer: nginx buffers proxied responses unless
// told otherwise, which would hold back every live event until a buffer
// fills. The one SSE writer sends X-Accel-Buffering: no (docs/operator.md, Behind
// nginx or Caddy).
func TestSSETellsProxiesNotToBuffer(t *testing.T) {
	h := adptest.StartHost(t, node.Config{})
	a := adptest.NewAgent("proxy-creator")
	id := createRoom(t, h, a, roomPayload("public", time.Now().UnixMilli(), time.Hour))
	s := openSSE(t, h, a, id)
	if got := s.resp.Header.Get("X-Accel-Buffering"); got != "no" {
		t.Fatalf("SSE X-Accel-Buffering %q, want \"no\"", got)
	}
}
