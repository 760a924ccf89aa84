package changefeed

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/adpnode/adpnode/adp/record"
	"github.com/adpnode/adpnode/hostport"
	"github.com/adpnode/adpnode/internal/groupcommit"
)

func open(t *testing.T, dir string) (*badger.DB, *Feed, *groupcommit.Committer) {
	t.Helper()
	db, err := badger.Open(badger.DefaultOptions(dir).WithLogger(nil))
	if err != nil {
		t.Fatal(err)
	}
	f, err := Open(db, "tf/", "tp/")
	if err != nil {
		t.Fatal(err)
	}
	c := groupcommit.New(db, 16)
	c.SetFeed(f.Committer())
	return db, f, c
}

func store(t *testing.T, c *groupcommit.Committer, room string, seq int64) {
	t.Helper()
	r := &record.Record{RoomID: room, Seq: seq, Hash: "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"}
	if _, err := c.CommitEntry([]groupcommit.KV{{K: []byte(fmt.Sprintf("r/%s/%d", room, seq)), V: []byte("x")}}, Entry(r, 0)); err != nil {
		t.Fatal(err)
	}
}

// Property: a follower gets every entry after its position, in order,
// first from the disk (across a restart of the store) then live; an entry
// is written with its record or not at all; pruning keeps what a stored
// position has not passed, and a follower below what is kept gets
// hostport.ErrFeedBehind; Close ends Follow with groupcommit.ErrClosed.
func TestFeedFollowPruneClose(t *testing.T) {
	dir := t.TempDir()
	db, f, c := open(t, dir)
	for i := int64(1); i <= 3; i++ {
		store(t, c, "a", i)
	}
	c.Close()
	f.Close()
	db.Close()

	db, f, c = open(t, dir)
	defer db.Close()
	if f.Head() != 3 {
		t.Fatalf("head after restart %d, want 3", f.Head())
	}
	ctx, cancel := context.WithCancel(context.Background())
	got := make(chan hostport.FeedEntry, 16)
	done := make(chan error, 1)
	go func() {
		done <- f.Follow(ctx, 1, func(b []hostport.FeedEntry) error {
			for _, e := range b {
				got <- e
			}
			return nil
		})
	}()
	store(t, c, "b", 1)
	for want := uint64(2); want <= 4; want++ {
		select {
		case e := <-got:
			if e.Seq != want || (want < 4 && (e.RoomID != "a" || e.RecordSeq != int64(want))) || (want == 4 && e.RoomID != "b") {
				t.Fatalf("entry %+v, want seq %d", e, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("entry %d not handed over", want)
		}
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Follow after cancel: %v", err)
	}

	// A stored position at 2 keeps entries 3 and 4.
	if err := db.Update(func(txn *badger.Txn) error { return txn.Set(f.PosKey("x"), PosValue(2)) }); err != nil {
		t.Fatal(err)
	}
	if err := f.Prune(Keep); err != nil {
		t.Fatal(err)
	}
	err := f.Follow(context.Background(), 2, func(b []hostport.FeedEntry) error {
		if b[0].Seq != 3 {
			return fmt.Errorf("first entry after 2 is %d", b[0].Seq)
		}
		return errors.New("stop")
	})
	if err == nil || err.Error() != "stop" {
		t.Fatalf("follow from a kept position: %v", err)
	}
	if err := f.Follow(context.Background(), 0, func([]hostport.FeedEntry) error { return nil }); !errors.Is(err, hostport.ErrFeedBehind) {
		t.Fatalf("follow from a pruned position: %v, want ErrFeedBehind", err)
	}
	// Keep bounds the feed whatever the positions; the newest stays.
	if err := f.Prune(1); err != nil {
		t.Fatal(err)
	}
	if err := f.Follow(context.Background(), 2, func([]hostport.FeedEntry) error { return nil }); !errors.Is(err, hostport.ErrFeedBehind) {
		t.Fatalf("follow below Keep: %v, want ErrFeedBehind", err)
	}
	c.Close()
	f.Close()
	if err := f.Follow(context.Background(), 4, func([]hostport.FeedEntry) error { return nil }); !errors.Is(err, groupcommit.ErrClosed) {
		t.Fatalf("follow after Close: %v, want ErrClosed", err)
	}
}

// Property: a gated feed hands a follower an entry only once its writer
// reported it applied, and never past an entry not yet applied, although
// later ones are durable (and some applied); once the gap closes they are
// handed in order. A restart opens with every stored entry followable.
func TestGatedFeedWaitsForApplied(t *testing.T) {
	dir := t.TempDir()
	db, err := badger.Open(badger.DefaultOptions(dir).WithLogger(nil))
	if err != nil {
		t.Fatal(err)
	}
	f, err := Open(db, "tf/", "tp/")
	if err != nil {
		t.Fatal(err)
	}
	f.GateOnApply()
	c := groupcommit.New(db, 16)
	c.SetFeed(f.Committer())
	var seqs []uint64
	for i := int64(1); i <= 3; i++ {
		r := &record.Record{RoomID: "a", Seq: i, Hash: "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"}
		seq, err := c.CommitEntry([]groupcommit.KV{{K: []byte(fmt.Sprintf("r/a/%d", i)), V: []byte("x")}}, Entry(r, 0))
		if err != nil {
			t.Fatal(err)
		}
		seqs = append(seqs, seq)
	}
	if want := []uint64{1, 2, 3}; fmt.Sprint(seqs) != fmt.Sprint(want) {
		t.Fatalf("CommitEntry seqs %v, want %v", seqs, want)
	}
	if h := f.Head(); h != 0 {
		t.Fatalf("head %d before anything was applied, want 0", h)
	}
	f.Applied(3)
	if h := f.Head(); h != 0 {
		t.Fatalf("head %d with entries 1 and 2 not applied, want 0", h)
	}
	ctx, cancel := context.WithCancel(context.Background())
	got := make(chan []uint64, 8)
	done := make(chan error, 1)
	go func() {
		done <- f.Follow(ctx, 0, func(b []hostport.FeedEntry) error {
			var s []uint64
			for _, e := range b {
				s = append(s, e.Seq)
			}
			got <- s
			return nil
		})
	}()
	next := func(want string) {
		t.Helper()
		select {
		case s := <-got:
			if fmt.Sprint(s) != want {
				t.Fatalf("handed %v, want %s", s, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s not handed over once applied", want)
		}
	}
	f.Applied(1)
	next("[1]") // not 2 (durable, not applied) nor 3 (applied, after 2)
	f.Applied(2)
	next("[2 3]")
	f.Applied(2) // a repeat changes nothing
	if h := f.Head(); h != 3 {
		t.Fatalf("head %d, want 3", h)
	}
	cancel()
	<-done
	c.Close()
	f.Close()
	db.Close()

	db, f, c = open(t, dir)
	defer db.Close()
	defer f.Close()
	defer c.Close()
	f.GateOnApply()
	if h := f.Head(); h != 3 {
		t.Fatalf("head after restart %d, want 3", h)
	}
	if len(f.applied) != 0 {
		t.Fatalf("%d applied marks kept", len(f.applied))
	}
}

// Property: an entry carries its record's flags to the follower, and an
// entry of the layout from before flags existed (record seq | hash | room
// ID, as an older node stored it) still reads, with no flags (every
// May… true) and its whole room ID, whatever the ID's first character.
func TestEntryFlagsAndOldEntries(t *testing.T) {
	dir := t.TempDir()
	db, f, c := open(t, dir)
	defer db.Close()
	const rm = "0123456789abcdefghij" // a room ID: its first byte must not read as flags
	hash := "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
	old := func(seq int64, room string) []byte {
		v := binary.BigEndian.AppendUint64(nil, uint64(seq))
		v = append(v, make([]byte, 32)...)
		return append(v, room...)
	}
	// Two old entries (first character a digit, then the highest letter),
	// then new ones with and without each flag.
	for _, e := range [][]byte{old(1, rm), old(2, "vvvvvvvvvvvvvvvvvvvv")} {
		if _, err := c.CommitEntry(nil, e); err != nil {
			t.Fatal(err)
		}
	}
	flags := []hostport.FeedFlags{hostport.FeedNotifies, hostport.FeedRoomState, hostport.FeedNotifies | hostport.FeedRoomState, 0}
	for i, fl := range flags {
		r := &record.Record{RoomID: rm, Seq: int64(3 + i), Hash: hash}
		if _, err := c.CommitEntry(nil, Entry(r, fl)); err != nil {
			t.Fatal(err)
		}
	}
	c.Close()
	var got []hostport.FeedEntry
	if err := f.Follow(context.Background(), 0, func(b []hostport.FeedEntry) error {
		got = append(got, b...)
		if len(got) == 6 {
			return errors.New("done")
		}
		return nil
	}); err == nil || err.Error() != "done" {
		t.Fatal(err)
	}
	for i, e := range got[:2] {
		if e.Flags != 0 || !e.Flags.MayNotify() || !e.Flags.MayChangeRoom() || e.RecordSeq != int64(i+1) {
			t.Fatalf("old entry %d read as %+v", i, e)
		}
	}
	if got[0].RoomID != rm || got[1].RoomID != "vvvvvvvvvvvvvvvvvvvv" {
		t.Fatalf("old entries' rooms %q %q", got[0].RoomID, got[1].RoomID)
	}
	for i, e := range got[2:] {
		fl := flags[i]
		if e.RoomID != rm || e.RecordSeq != int64(3+i) || e.Flags != fl|hostport.FeedFlagsSet ||
			e.Flags.MayNotify() != (fl&hostport.FeedNotifies != 0) || e.Flags.MayChangeRoom() != (fl&hostport.FeedRoomState != 0) {
			t.Fatalf("entry with flags %08b read as %+v", fl, e)
		}
	}
}
