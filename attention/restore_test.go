package attention_test

import (
	"bytes"
	"context"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/adpnode/adpnode/adp"
	"github.com/adpnode/adpnode/attention"
	"github.com/adpnode/adpnode/internal/adptest"
	"github.com/adpnode/adpnode/internal/testwait"
	"github.com/adpnode/adpnode/node"
)

// Property: a restored or wiped data dir is a new stream. A cursor saved
// from the original gets reset_required from the restored copy, never a
// 400 (its after is beyond the copy's head) and never a silent skip (its
// after is within the head, but the items there are others); the stream
// check comes before the head check. Restarts of the copy keep its new
// stream; a wiped dir gets a new one too.
func TestRestoredDirIsANewStream(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "orig")
	open := func(dir string) (*node.Node, *attention.Attention) {
		n, err := node.Open(node.Config{DataDir: dir, PublicURL: "http://127.0.0.1:1", Log: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		a, err := attention.Open(attention.ForNode(n, nil, nil))
		if err != nil {
			t.Fatal(err)
		}
		return n, a
	}
	n, a := open(dir)
	alice, bob := adptest.NewAgent("alice"), adptest.NewAgent("bob")
	now := time.Now().UnixMilli()
	res, err := n.Submit(context.Background(), alice.Envelope(now, "room.create", "", 0, "", map[string]any{"topic": "restore", "visibility": "public",
		"start_time": now, "end_time": now + 3_600_000}), "")
	if err != nil {
		t.Fatal(err)
	}
	id, head, hash := res.Record.RoomID, res.Record.Seq, res.Record.Hash
	say := func(n *node.Node) {
		ev := alice.Event(time.Now().UnixMilli(), "message.create", id, head, hash, map[string]any{"content_type": "text/plain", "content": "bob?"})
		ev.Mentions = []string{string(bob.ID)}
		r, err := n.Submit(context.Background(), alice.Sign(ev), id)
		if err != nil {
			t.Fatal(err)
		}
		head, hash = r.Record.Seq, r.Record.Hash
	}
	read := func(a *attention.Attention, c attention.Cursor) *attention.Page {
		t.Helper()
		p, err := a.Mentions(bob.ID, c, 0)
		if err != nil {
			t.Fatalf("cursor %+v: %v", c, err)
		}
		return p
	}
	say(n)
	say(n)
	testwait.Until(t, 20*time.Second, "the condition", func() bool { return read(a, attention.Cursor{}).NextAfter == 2 })
	var backup bytes.Buffer
	if err := n.Backup(&backup); err != nil {
		t.Fatal(err)
	}
	backupHead, backupHash := head, hash
	say(n)
	say(n)
	testwait.Until(t, 20*time.Second, "the condition", func() bool { return read(a, attention.Cursor{}).NextAfter == 4 })
	p := read(a, attention.Cursor{})
	ahead := attention.Cursor{After: 4, StreamID: p.StreamID}  // beyond the copy's head
	within := attention.Cursor{After: 1, StreamID: p.StreamID} // within it
	a.Close()
	n.Close()

	copyDir := filepath.Join(t.TempDir(), "copy")
	if err := node.RestoreDir(copyDir, bytes.NewReader(backup.Bytes())); err != nil {
		t.Fatal(err)
	}
	n, a = open(copyDir)
	head, hash = backupHead, backupHash
	say(n) // the copy goes its own way: its seq 3 is another record
	testwait.Until(t, 20*time.Second, "the condition", func() bool { return read(a, attention.Cursor{}).NextAfter == 3 })
	fresh := read(a, attention.Cursor{})
	if fresh.StreamID == p.StreamID {
		t.Fatalf("the restored copy serves the original's stream %s", p.StreamID)
	}
	for _, c := range []attention.Cursor{ahead, within, {After: 4}} {
		if got := read(a, c); !got.ResetRequired {
			t.Fatalf("saved cursor %+v on the restored copy: %+v", c, got)
		}
	}
	// Its own cursors work, across restarts (the new stream is kept).
	mine := attention.Cursor{After: 2, StreamID: fresh.StreamID}
	for round := 0; round < 2; round++ {
		a.Close()
		n.Close()
		n, a = open(copyDir)
		if got := read(a, mine); got.ResetRequired || got.StreamID != fresh.StreamID || len(got.Items.([]attention.MentionItem)) != 1 {
			t.Fatalf("restart %d of the copy: %+v", round, got)
		}
		if _, err := a.Mentions(bob.ID, attention.Cursor{After: 9, StreamID: fresh.StreamID}, 0); adp.CodeOf(err) != adp.CodeInvalidRequest {
			t.Fatalf("a cursor of this stream beyond its head: %v", err)
		}
	}
	a.Close()
	n.Close()
	// The original, restarted, is still its own stream.
	n, a = open(dir)
	if got := read(a, within); got.ResetRequired || got.StreamID != p.StreamID {
		t.Fatalf("the original after a restart: %+v", got)
	}
	a.Close()
	n.Close()
	// A wiped dir is a new stream too.
	n, a = open(filepath.Join(t.TempDir(), "wiped"))
	defer n.Close()
	defer a.Close()
	if got := read(a, within); !got.ResetRequired || got.StreamID == p.StreamID {
		t.Fatalf("wiped dir: %+v", got)
	}
}
