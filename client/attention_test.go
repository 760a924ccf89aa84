//go:build e2e

package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/adpnode/adpnode/adp/identity"
	"github.com/adpnode/adpnode/adp/record"
	"github.com/adpnode/adpnode/client"
	"github.com/adpnode/adpnode/internal/adptest"
	"github.com/adpnode/adpnode/internal/testwait"
	"github.com/adpnode/adpnode/node"
)

// Watch persists its cursor before it advances: stopped after a page (a
// crash right after save), it resumes from the cursor file with nothing
// lost and nothing repeated, across a restart of the node.
func TestWatchResumesFromSavedCursor(t *testing.T) {
	h := adptest.StartHost(t, node.Config{DataDir: filepath.Join(t.TempDir(), "db"), Rates: node.Rates{Message: 10000, MessageCeiling: 10000}})
	ctx := context.Background()
	owner, reader := newClient(t, h, "owner"), newClient(t, h, "reader")
	now := h.Clock.Ms()
	created, err := owner.CreateRoom(ctx, map[string]any{"topic": "inbox", "visibility": "public", "start_time": now,
		"end_time": now + 3_600_000, "tags": []string{"research"}})
	if err != nil {
		t.Fatal(err)
	}
	id := created.ID
	post := func() {
		_, err := owner.PostMentions(ctx, id, 3, []identity.AgentID{reader.Key.ID}, func(*client.Room, []*record.Record) (string, any, error) {
			return "message.create", map[string]any{"content_type": "text/plain", "content": "hi"}, nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	// Inbox items are stored on the owner's next pass: wait for them.
	stored := func(n int64) {
		t.Helper()
		testwait.Until(t, 20*time.Second, fmt.Sprintf("mention %d stored", n), func() bool {
			p, err := reader.Mentions(ctx, client.Cursor{After: n - 1}, 1)
			return err == nil && len(p.Items) == 1
		})
	}
	for i := 0; i < 5; i++ {
		post()
	}
	stored(5)
	file := filepath.Join(t.TempDir(), "cursor.json")
	var seqs []int64
	handle := func(items []json.RawMessage, reset bool) error {
		if reset {
			t.Fatal("unexpected reset")
		}
		for _, raw := range items {
			var m client.MentionItem
			if err := json.Unmarshal(raw, &m); err != nil {
				return err
			}
			seqs = append(seqs, m.Seq)
		}
		return nil
	}
	crash := errors.New("crash after save")
	saves := 0
	save := func(cur client.Cursor) error {
		if err := client.SaveCursor(file, cur); err != nil {
			return err
		}
		if saves++; saves == 1 {
			return crash
		}
		return nil
	}
	cur, _ := client.LoadCursor(file)
	if err := reader.Watch(ctx, client.MentionsFeed, cur, client.WatchOptions{Limit: 2, Once: true}, handle, save); !errors.Is(err, crash) {
		t.Fatalf("first run: %v", err)
	}
	h = h.Restart(t)
	reader.Origin = h.URL
	post()
	stored(6)
	cur, err = client.LoadCursor(file)
	if err != nil || cur.After != 2 || cur.StreamID == "" {
		t.Fatalf("saved cursor %+v %v", cur, err)
	}
	if err := reader.Watch(ctx, client.MentionsFeed, cur, client.WatchOptions{Limit: 2, Once: true}, handle, save); err != nil {
		t.Fatal(err)
	}
	if got := len(seqs); got != 6 {
		t.Fatalf("seqs %v", seqs)
	}
	for i, s := range seqs {
		if s != int64(i+1) {
			t.Fatalf("seqs %v: loss or duplicate", seqs)
		}
	}
	// Subscriptions through the client.
	sub, err := reader.Subscribe(ctx, client.Filter{Tags: []string{"research"}}, 0)
	if err != nil {
		t.Fatal(err)
	}
	l, err := reader.Subscriptions(ctx)
	if err != nil || len(l) != 1 || l[0].ID != sub.ID {
		t.Fatalf("list %+v %v", l, err)
	}
	p, err := reader.SubscriptionFeed(ctx, sub.ID, client.Cursor{}, 0)
	if err != nil || len(p.Items) != 1 {
		t.Fatalf("feed %+v %v", p, err)
	}
	if _, err := reader.SubscriptionFeed(ctx, sub.ID, client.Cursor{After: 1 << 40, StreamID: p.StreamID}, 0); client.CodeOf(err) != "invalid_request" {
		t.Fatalf("bad cursor: %v", err)
	}
	if err := reader.Unsubscribe(ctx, sub.ID); err != nil {
		t.Fatal(err)
	}
}

// Property: Watch reads a feed's paged snapshot whole: with a page of one
// room, every matching room arrives once (the pages go on with
// room_after), then the log.
func TestWatchReadsPagedSnapshot(t *testing.T) {
	h := adptest.StartHost(t, node.Config{Rates: node.Rates{Message: 10000, MessageCeiling: 10000}})
	ctx := context.Background()
	owner, reader := newClient(t, h, "owner"), newClient(t, h, "reader")
	now := h.Clock.Ms()
	for i := 0; i < 3; i++ {
		if _, err := owner.CreateRoom(ctx, map[string]any{"topic": "snap", "visibility": "public", "start_time": now,
			"end_time": now + 3_600_000, "tags": []string{"snap"}}); err != nil {
			t.Fatal(err)
		}
	}
	sub, err := reader.Subscribe(ctx, client.Filter{Tags: []string{"snap"}}, 0)
	if err != nil {
		t.Fatal(err)
	}
	rooms := map[string]int{}
	var last client.Cursor
	err = reader.Watch(ctx, client.SubscriptionFeedOf(sub.ID), client.Cursor{}, client.WatchOptions{Limit: 1, Once: true},
		func(items []json.RawMessage, reset bool) error {
			for _, raw := range items {
				var it client.FeedItem
				if err := json.Unmarshal(raw, &it); err != nil {
					return err
				}
				rooms[it.RoomID]++
			}
			return nil
		}, func(c client.Cursor) error { last = c; return nil })
	if err != nil {
		t.Fatal(err)
	}
	if len(rooms) != 3 {
		t.Fatalf("rooms %v, want 3 once each", rooms)
	}
	for id, n := range rooms {
		if n != 1 {
			t.Fatalf("room %s %d times", id, n)
		}
	}
	if last.RoomAfter != "" || last.After == 0 {
		t.Fatalf("cursor after the snapshot %+v", last)
	}
}
