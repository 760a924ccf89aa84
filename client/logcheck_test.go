//go:build e2e

package client_test

import (
	"context"
	"crypto/ed25519"
	"strings"
	"testing"
	"time"

	"github.com/adpnode/adpnode/adp/tlogproof"
	"github.com/adpnode/adpnode/client"
	"github.com/adpnode/adpnode/internal/adptest"
	"github.com/adpnode/adpnode/node"
)

// TestClientVerifiesInclusion: with Log set, History checks every record
// against the host log; a client pinning another key refuses them.
func TestClientVerifiesInclusion(t *testing.T) {
	h := adptest.StartHostLogged(t, node.Config{})
	origin := h.HostLog.Origin()
	vkey := h.HostLog.VerifierKey()

	a := adptest.NewAgent("alice")
	id := h.CreateRoom(t, a, h.RoomPayload("public"))
	for range 4 {
		h.MustPost(t, a, id, "message.create", map[string]any{"content_type": "text/plain", "content": "hi"})
	}
	c := newClient(t, h, "reader")
	lc, err := client.NewLogCheck(vkey)
	if err != nil {
		t.Fatal(err)
	}
	lc.Origin = h.URL
	c.Log = lc
	recs, err := c.History(context.Background(), id, 0)
	if err != nil || len(recs) != 5 {
		t.Fatalf("history: %d records, %v", len(recs), err)
	}
	// Pinning another key: the proofs do not verify.
	other, _, _ := ed25519.GenerateKey(nil)
	vother, _ := tlogproof.VerifierKey(origin, other)
	bad, _ := client.NewLogCheck(vother)
	bad.Origin = h.URL
	c.Log = bad
	if _, err := c.History(context.Background(), id, 0); err == nil || !strings.Contains(err.Error(), "checkpoint") {
		t.Fatalf("history with another key: %v", err)
	}
	// A host without a log: the records are not proven (no waiting on a
	// not_found that is not about freshness beyond Wait).
	plain := adptest.StartHost(t, node.Config{})
	lc2, _ := client.NewLogCheck(vkey)
	lc2.Origin = plain.URL
	lc2.Wait = 200 * time.Millisecond
	c.Log = lc2
	if _, err := c.History(context.Background(), id, 0); err == nil {
		t.Fatal("history verified against a host without a log")
	}
}
