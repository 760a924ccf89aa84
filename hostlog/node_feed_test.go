package hostlog_test

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/adpnode/adpnode/hostlog"
	"github.com/adpnode/adpnode/internal/adptest"
	"github.com/adpnode/adpnode/internal/testwait"
	"github.com/adpnode/adpnode/node"
)

// TestFollowsNodeFeedAcrossRestart. Property: the log follows the node's
// change feed: every record the node stores is logged once, across a
// restart of both on the same data dir, including one stored after the
// restart and one stored while the log was closed.
func TestFollowsNodeFeedAcrossRestart(t *testing.T) {
	dir := t.TempDir()
	_, key, _ := ed25519.GenerateKey(nil)
	alice := adptest.NewAgent("alice")
	var id, hash string
	var head int64
	open := func() (*node.Node, *hostlog.Log) {
		n, err := node.Open(node.Config{DataDir: dir, PublicURL: "http://127.0.0.1:1", Log: slog.New(slog.DiscardHandler), Rates: node.NoRates()})
		if err != nil {
			t.Fatal(err)
		}
		l, err := hostlog.Open(hostlog.Config{Dir: filepath.Join(dir, hostlog.Dir), DB: n.DB(), Key: key, Origin: "127.0.0.1:1/adp-log",
			Source: n, Feed: n, CheckpointInterval: 100 * time.Millisecond, Log: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		return n, l
	}
	post := func(n *node.Node) {
		now := time.Now().UnixMilli()
		if id == "" {
			res, err := n.Submit(context.Background(), alice.Envelope(now, "room.create", "", 0, "", map[string]any{"topic": "t", "visibility": "public",
				"start_time": now, "end_time": now + 3_600_000}), "")
			if err != nil {
				t.Fatal(err)
			}
			id, head, hash = res.Record.RoomID, res.Record.Seq, res.Record.Hash
			return
		}
		r, err := n.Submit(context.Background(), alice.Sign(alice.Event(now, "message.create", id, head, hash, map[string]any{"content_type": "text/plain", "content": "hi"})), id)
		if err != nil {
			t.Fatal(err)
		}
		head, hash = r.Record.Seq, r.Record.Hash
	}
	covered := func(l *hostlog.Log, size uint64) {
		var got uint64
		testwait.Until(t, 60*time.Second, fmt.Sprintf("a checkpoint of %d leaves", size), func() bool {
			_, cp, err := l.Checkpoint(context.Background())
			got = cp.Size
			return err == nil && cp.Size >= size
		})
		if got != size {
			t.Fatalf("checkpoint size %d, want %d", got, size)
		}
	}
	n, l := open()
	for range 5 {
		post(n)
	}
	covered(l, 5)
	l.Close()
	post(n) // stored while the log is closed
	n.Close()
	n, l = open()
	covered(l, 6)
	post(n)
	covered(l, 7)
	if got := l.Journalled(); got != 7 {
		t.Fatalf("journal holds %d leaves, want 7", got)
	}
	l.Close()
	n.Close()
}
