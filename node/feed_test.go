//go:build e2e

package node_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/adpnode/adpnode/hostport"
	"github.com/adpnode/adpnode/internal/adptest"
	"github.com/adpnode/adpnode/internal/testwait"
	"github.com/adpnode/adpnode/node"
)

// follow runs n.Follow from since on its own goroutine and collects what
// it hands over; stop ends it and returns Follow's answer.
type follower struct {
	mu      sync.Mutex
	got     []hostport.FeedEntry
	changed chan struct{}
	cancel  context.CancelFunc
	done    chan error
}

func follow(n *node.Node, since uint64, each func(hostport.FeedEntry)) *follower {
	ctx, cancel := context.WithCancel(context.Background())
	f := &follower{changed: make(chan struct{}, 1), cancel: cancel, done: make(chan error, 1)}
	go func() {
		f.done <- n.Follow(ctx, since, func(batch []hostport.FeedEntry) error {
			for _, e := range batch {
				if each != nil {
					each(e)
				}
				f.mu.Lock()
				f.got = append(f.got, e)
				f.mu.Unlock()
			}
			select {
			case f.changed <- struct{}{}:
			default:
			}
			return nil
		})
	}()
	return f
}

func (f *follower) waitFor(t *testing.T, count int) []hostport.FeedEntry {
	t.Helper()
	deadline := time.After(60 * time.Second)
	for {
		f.mu.Lock()
		got := append([]hostport.FeedEntry(nil), f.got...)
		f.mu.Unlock()
		if len(got) >= count {
			return got
		}
		select {
		case <-f.changed:
		case err := <-f.done:
			t.Fatalf("Follow ended with %d of %d entries: %v", len(got), count, err)
		case <-deadline:
			t.Fatalf("Follow handed over %d of %d entries", len(got), count)
		}
	}
}

func (f *follower) stop() error {
	f.cancel()
	return <-f.done
}

// checkFeed asserts that entries are the feed from seq 1, dense, and hold
// every record of the rooms exactly once, each with its record hash.
func checkFeed(t *testing.T, n *node.Node, entries []hostport.FeedEntry, heads map[string]int64) {
	t.Helper()
	seen := map[string]int64{}
	total := 0
	for i, e := range entries {
		if e.Seq != uint64(i+1) {
			t.Fatalf("entry %d has feed seq %d", i, e.Seq)
		}
		if e.RecordSeq != seen[e.RoomID]+1 {
			t.Fatalf("room %s: entry for seq %d after seq %d", e.RoomID, e.RecordSeq, seen[e.RoomID])
		}
		seen[e.RoomID] = e.RecordSeq
		h, ok, rerr := n.RecordHash(e.RoomID, e.RecordSeq)
		if raw, err := b64dec(h); !ok || rerr != nil || err != nil || [32]byte(raw) != e.Hash {
			t.Fatalf("room %s seq %d: entry hash does not match the record", e.RoomID, e.RecordSeq)
		}
	}
	for id, head := range heads {
		if seen[id] != head {
			t.Fatalf("room %s: feed reaches seq %d, the room %d", id, seen[id], head)
		}
		total += int(head)
	}
	if len(entries) != total {
		t.Fatalf("%d entries for %d records", len(entries), total)
	}
}

// TestFeedReplaysThenFollowsLive. Property: every record the node stores
// has exactly one feed entry, in commit order and dense; a follower from
// 0 gets the stored entries after a restart, then the new ones live.
func TestFeedReplaysThenFollowsLive(t *testing.T) {
	h := adptest.StartHostAt(t, node.Config{DataDir: t.TempDir(), Rates: manyWrites}, adptest.NewClock())
	c := adptest.NewAgent("feed-creator")
	others := []*adptest.Agent{adptest.NewAgent("feed-a")}
	a := busyRoom(t, h, c, others, 10)
	b := busyRoom(t, h, c, others, 5)
	h = h.Restart(t)
	heads := map[string]int64{a: h.Head(t, c, a).Seq, b: h.Head(t, c, b).Seq}
	total := int(heads[a] + heads[b])
	if got := h.Node.FeedHead(); got != uint64(total) {
		t.Fatalf("feed head after restart: %d, want %d", got, total)
	}
	f := follow(h.Node, 0, nil)
	checkFeed(t, h.Node, f.waitFor(t, total), heads)
	for i := 0; i < 3; i++ {
		h.MustPost(t, others[0], a, "message.create", map[string]any{"content_type": "text/plain", "content": "live"})
	}
	heads[a] += 3
	checkFeed(t, h.Node, f.waitFor(t, total+3), heads)
	if err := f.stop(); !errors.Is(err, context.Canceled) {
		t.Fatalf("Follow after cancel: %v", err)
	}
	// A follower one entry behind gets exactly the last one.
	g := follow(h.Node, uint64(total+2), nil)
	if got := g.waitFor(t, 1); got[0].Seq != uint64(total+3) || got[0].RecordSeq != heads[a] {
		t.Fatalf("one behind: %+v", got[0])
	}
	g.stop()
}

// TestFollowCallbackMayWrite. Property: Follow holds no lock of the node
// while it calls out: a follower that writes to the room whose record it
// is handed does not deadlock.
func TestFollowCallbackMayWrite(t *testing.T) {
	h := adptest.StartHostAt(t, node.Config{Rates: manyWrites}, adptest.NewClock())
	c := adptest.NewAgent("feedw-creator")
	id := h.CreateRoom(t, c, h.RoomPayload("public"))
	var writes int
	f := follow(h.Node, h.Node.FeedHead(), func(e hostport.FeedEntry) {
		if writes < 5 {
			writes++
			h.MustPost(t, c, id, "message.create", map[string]any{"content_type": "text/plain", "content": "echo"})
		}
	})
	h.MustPost(t, c, id, "message.create", map[string]any{"content_type": "text/plain", "content": "first"})
	got := f.waitFor(t, 6)
	f.stop()
	if got[5].RecordSeq != h.Head(t, c, id).Seq {
		t.Fatalf("last entry %+v, head %d", got[5], h.Head(t, c, id).Seq)
	}
}

// TestFeedConcurrentWrites. Property: under concurrent writes to many
// rooms the feed is dense, in commit order (each room's seqs ascend), and
// holds each record once; a follower sees all of it.
func TestFeedConcurrentWrites(t *testing.T) {
	h := adptest.StartHostAt(t, node.Config{Rates: manyWrites}, adptest.NewClock())
	f := follow(h.Node, 0, nil)
	const rooms, each = 6, 15
	ids := make([]string, rooms)
	agents := make([]*adptest.Agent, rooms)
	for i := range ids {
		agents[i] = adptest.NewAgent(fmt.Sprint("feedc-", i))
		ids[i] = h.CreateRoom(t, agents[i], h.RoomPayload("public"))
	}
	var wg sync.WaitGroup
	for i := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < each; j++ {
				h.MustPost(t, agents[i], ids[i], "message.create", map[string]any{"content_type": "text/plain", "content": "c"})
			}
		}()
	}
	wg.Wait()
	heads := map[string]int64{}
	for i, id := range ids {
		heads[id] = h.Head(t, agents[i], id).Seq
	}
	checkFeed(t, h.Node, f.waitFor(t, rooms*(each+1)), heads)
	f.stop()
}

// TestFeedPruneAndBehind. Property: entries every follower handled are
// pruned, at most the bound is kept, and a follower behind what is kept
// is told to resynchronise (hostport.ErrFeedBehind) rather than handed a
// feed with a hole.
func TestFeedPruneAndBehind(t *testing.T) {
	h := adptest.StartHostAt(t, node.Config{Rates: manyWrites}, adptest.NewClock())
	c := adptest.NewAgent("feedp-creator")
	busyRoom(t, h, c, []*adptest.Agent{adptest.NewAgent("feedp-a")}, 10) // 13 records
	n := h.Node
	head := n.FeedHead()
	// The host's own follower (attention) stores its position within
	// about a second of handling the entries; then "test" is the slowest.
	testwait.Until(t, 20*time.Second, "attention's position stored at the head", func() bool {
		pos, _, err := node.ReadFeedPos(n.DB(), "attention")
		return err == nil && pos >= head
	})
	if err := n.DB().Update(func(txn *badger.Txn) error {
		return txn.Set(node.FeedPosKey("test"), node.FeedPosValue(5))
	}); err != nil {
		t.Fatal(err)
	}
	if err := n.PruneFeed(node.FeedKeep); err != nil {
		t.Fatal(err)
	}
	if err := n.Follow(context.Background(), 4, func([]hostport.FeedEntry) error { return nil }); !errors.Is(err, hostport.ErrFeedBehind) {
		t.Fatalf("follower behind the pruned entries: %v", err)
	}
	f := follow(n, 5, nil)
	if got := f.waitFor(t, int(head-5)); got[0].Seq != 6 || got[len(got)-1].Seq != head {
		t.Fatalf("from the stored position: %d…%d", got[0].Seq, got[len(got)-1].Seq)
	}
	f.stop()
	// The bound: a follower that stays at 5 holds back only keep entries.
	if err := n.PruneFeed(2); err != nil {
		t.Fatal(err)
	}
	if err := n.Follow(context.Background(), 5, func([]hostport.FeedEntry) error { return nil }); !errors.Is(err, hostport.ErrFeedBehind) {
		t.Fatalf("follower beyond the bound: %v", err)
	}
	g := follow(n, head-2, nil)
	if got := g.waitFor(t, 2); got[1].Seq != head {
		t.Fatalf("kept entries end at %d, head %d", got[1].Seq, head)
	}
	g.stop()
}

// TestFeedSeqsSurvivePruneAndRestart. Property: feed seqs are never
// reused: with every entry handled and pruned, a restart numbers the next
// record after the old head.
func TestFeedSeqsSurvivePruneAndRestart(t *testing.T) {
	h := adptest.StartHostAt(t, node.Config{DataDir: t.TempDir(), Rates: manyWrites}, adptest.NewClock())
	c := adptest.NewAgent("feeds-creator")
	id := busyRoom(t, h, c, []*adptest.Agent{adptest.NewAgent("feeds-a")}, 5)
	head := h.Node.FeedHead()
	if err := h.Node.DB().Update(func(txn *badger.Txn) error {
		return txn.Set(node.FeedPosKey("test"), node.FeedPosValue(head))
	}); err != nil {
		t.Fatal(err)
	}
	if err := h.Node.PruneFeed(node.FeedKeep); err != nil {
		t.Fatal(err)
	}
	h = h.Restart(t)
	if got := h.Node.FeedHead(); got != head {
		t.Fatalf("feed head after prune and restart: %d, want %d", got, head)
	}
	f := follow(h.Node, head, nil)
	h.MustPost(t, c, id, "message.create", map[string]any{"content_type": "text/plain", "content": "after"})
	if got := f.waitFor(t, 1); got[0].Seq != head+1 {
		t.Fatalf("next entry %d, want %d", got[0].Seq, head+1)
	}
	f.stop()
}

// TestFollowerSeesAppliedState. Property: when a follower is handed an
// entry, the node already shows what the record changed: the room exists
// (a room.create's room is registered) and its summary is at least at the
// record's seq. Followers that read the room's state (the record
// publisher asks whether a room is public) otherwise raced the writer
// and skipped a new room's first record.
func TestFollowerSeesAppliedState(t *testing.T) {
	h := adptest.StartHostAt(t, node.Config{Rates: manyWrites}, adptest.NewClock())
	var mu sync.Mutex
	var stale []string
	f := follow(h.Node, h.Node.FeedHead(), func(e hostport.FeedEntry) {
		s, ok := h.Node.Summary(e.RoomID)
		if !ok || s.Seq < e.RecordSeq {
			mu.Lock()
			stale = append(stale, fmt.Sprintf("room %s seq %d: summary found %v at seq %d", e.RoomID, e.RecordSeq, ok, s.Seq))
			mu.Unlock()
		}
	})
	const writers, each = 4, 40
	var wg sync.WaitGroup
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a := adptest.NewAgent(fmt.Sprint("applied-", w))
			for i := 0; i < each; i++ {
				id := h.CreateRoom(t, a, h.RoomPayload("public"))
				h.MustPost(t, a, id, "message.create", map[string]any{"content_type": "text/plain", "content": "m"})
			}
		}()
	}
	wg.Wait()
	f.waitFor(t, writers*each*2)
	f.stop()
	mu.Lock()
	defer mu.Unlock()
	if len(stale) > 0 {
		t.Fatalf("%d of %d entries handed before the node applied them; first: %s", len(stale), writers*each*2, stale[0])
	}
}

// TestFeedEntryFlags. Property: each entry carries what the node knew of
// its record's event (hostport.FeedFlagsOf): a room.create and a
// room.update may change the room's summary, a message does not; a message
// with a mention may notify, the others do not. Read back after a restart.
func TestFeedEntryFlags(t *testing.T) {
	h := adptest.StartHostAt(t, node.Config{DataDir: t.TempDir(), Rates: manyWrites}, adptest.NewClock())
	c := adptest.NewAgent("flags-creator")
	id := h.CreateRoom(t, c, h.RoomPayload("public"))
	h.MustPost(t, c, id, "message.create", map[string]any{"content_type": "text/plain", "content": "plain"})
	head := h.Head(t, c, id)
	ev := c.Event(h.Clock.Ms(), "message.create", id, head.Seq, head.Hash, map[string]any{"content_type": "text/plain", "content": "to me"})
	ev.Mentions = []string{string(c.ID)}
	if r := adptest.Do(t, http.MethodPost, h.URL+"/v1/rooms/"+id, "", c.Sign(ev)); r.Status != http.StatusCreated {
		t.Fatalf("mention: %s", r)
	}
	h.MustPost(t, c, id, "room.update", map[string]any{"topic": "flags"})
	h = h.Restart(t)
	f := follow(h.Node, 0, nil)
	got := f.waitFor(t, 4)
	f.stop()
	want := []struct{ notify, room bool }{{false, true}, {false, false}, {true, false}, {false, true}}
	for i, e := range got {
		if e.Flags&hostport.FeedFlagsSet == 0 || e.Flags.MayNotify() != want[i].notify || e.Flags.MayChangeRoom() != want[i].room {
			t.Fatalf("entry %d (room seq %d) flags %08b, want notify %v, room %v", i, e.RecordSeq, e.Flags, want[i].notify, want[i].room)
		}
	}
}
