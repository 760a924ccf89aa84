package client_test

import (
	"context"
	"crypto/ed25519"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/adpnode/adpnode/adp/tlogproof"
	"github.com/adpnode/adpnode/client"
	"github.com/adpnode/adpnode/hostapi"
	"github.com/adpnode/adpnode/hostport"
	"github.com/adpnode/adpnode/internal/adptest"
	"github.com/adpnode/adpnode/node"
	"github.com/adpnode/adpnode/tlog"
)

// TestClientVerifiesInclusion: with Log set, History checks every record
// against the host log; a client pinning another key refuses them.
func TestClientVerifiesInclusion(t *testing.T) {
	dir := t.TempDir()
	h := adptest.StartHost(t, node.Config{DataDir: dir})
	pub, key, _ := ed25519.GenerateKey(nil)
	origin := tlogproof.Origin(h.Node.Host())
	l, err := tlog.Open(tlog.Config{Dir: filepath.Join(dir, tlog.Dir), DB: h.Node.DB(), Key: key,
		Origin: origin, Source: h.Node, CheckpointInterval: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	h.Node.Listen(func(e hostport.Event) {
		if e.Kind == hostport.EventRecord {
			leaf, _ := tlogproof.RecordLeaf(e.Record.Hash)
			l.Append(tlog.Leaf{RoomID: e.RoomID, Seq: e.Record.Seq, Hash: leaf})
		}
	})
	logSrv := httptest.NewServer(hostapi.New(h.Node, hostapi.Options{HostLog: l}).Handler())
	t.Cleanup(logSrv.Close)

	a := adptest.NewAgent("alice")
	id := h.CreateRoom(t, a, h.RoomPayload("public"))
	for range 4 {
		h.MustPost(t, a, id, "message.create", map[string]any{"content_type": "text/plain", "content": "hi"})
	}
	c := newClient(t, h, "reader")
	vkey, _ := tlogproof.VerifierKey(origin, pub)
	lc, err := client.NewLogCheck(vkey)
	if err != nil {
		t.Fatal(err)
	}
	lc.Origin = logSrv.URL
	c.Log = lc
	recs, err := c.History(context.Background(), id, 0)
	if err != nil || len(recs) != 5 {
		t.Fatalf("history: %d records, %v", len(recs), err)
	}
	// Pinning another key: the proofs do not verify.
	other, _, _ := ed25519.GenerateKey(nil)
	vother, _ := tlogproof.VerifierKey(origin, other)
	bad, _ := client.NewLogCheck(vother)
	bad.Origin = logSrv.URL
	c.Log = bad
	if _, err := c.History(context.Background(), id, 0); err == nil || !strings.Contains(err.Error(), "checkpoint") {
		t.Fatalf("history with another key: %v", err)
	}
	// A host without a log: the records are not proven (no waiting on a
	// not_found that is not about freshness beyond Wait).
	lc2, _ := client.NewLogCheck(vkey)
	lc2.Wait = 200 * time.Millisecond
	c.Log = lc2
	if _, err := c.History(context.Background(), id, 0); err == nil {
		t.Fatal("history verified against a host without a log")
	}
}
