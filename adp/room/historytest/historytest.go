// Package historytest is the conformance suite every room.History runs:
// the in-memory one, a host's store and a mirror's. Each implementation's
// tests call Run with a Store that records the way its host does.
//
// The suite takes its test handle through a small interface rather than
// importing testing, so that it stays inside the kernel's allowlist.
package historytest

import (
	"crypto/sha256"
	"encoding/binary"

	"github.com/adpnode/adpnode/adp/room"
)

// T is the part of *testing.T the suite uses; *testing.T satisfies
// T[*testing.T].
type T[S any] interface {
	Helper()
	Errorf(format string, args ...any)
	Fatalf(format string, args ...any)
	Logf(format string, args ...any)
	Run(name string, f func(S)) bool
}

// Store is where the histories under test live.
type Store interface {
	// History returns the history of room roomID.
	History(roomID string) room.History
	// Commit does what the host does when a room commits its record at
	// seq: stores it (as the host stores records) and tells the history
	// (Append). Records of a room are committed in seq order.
	Commit(roomID string, seq int64, record, envelope [32]byte)
	// Reopen closes the store and opens it again on the same data, as a
	// restart does; histories returned before are not used after. It
	// reports false for a history held only in memory.
	Reopen() bool
	// Break makes every later read of the store fail, as a failing disk
	// would. It reports false for a history that cannot fail.
	Break() bool
}

// Hash returns a test hash, distinct for every (roomID, seq, what).
func Hash(roomID string, seq int64, what string) [32]byte {
	return sha256.Sum256(binary.BigEndian.AppendUint64([]byte(roomID+"/"+what+"/"), uint64(seq)))
}

const (
	roomA = "d8ftedhpqhsusbg001tg"
	roomB = "d8ftedhpqhsusbg002tg"
)

// Run runs the suite; open returns a new, empty store for each check.
func Run[S T[S]](t S, open func(S) Store) {
	t.Run("Empty", func(t S) { empty(t, open(t)) })
	t.Run("Lookups", func(t S) { lookups(t, open(t)) })
	t.Run("RoomsApart", func(t S) { roomsApart(t, open(t)) })
	t.Run("Restart", func(t S) { restart(t, open(t)) })
	t.Run("ReadErrors", func(t S) { readErrors(t, open(t)) })
}

// commit records seqs from..to of roomID.
func commit[S T[S]](t S, s Store, roomID string, from, to int64) {
	t.Helper()
	for seq := from; seq <= to; seq++ {
		s.Commit(roomID, seq, Hash(roomID, seq, "record"), Hash(roomID, seq, "envelope"))
	}
}

// expectAbsent checks that h answers seq and id as absent, without error.
func expectAbsent[S T[S]](t S, h room.History, seq int64, id [32]byte) {
	t.Helper()
	if got, ok, err := h.RecordHash(seq); ok || err != nil {
		t.Errorf("RecordHash(%d) = %x, %v, %v; want absent", seq, got[:4], ok, err)
	}
	if got, ok, err := h.SeqOf(id); ok || err != nil {
		t.Errorf("SeqOf(%x) = %d, %v, %v; want absent", id[:4], got, ok, err)
	}
}

// expectRecords checks every lookup of roomID's records 1..n, and that
// seq n+1 is absent.
func expectRecords[S T[S]](t S, h room.History, roomID string, n int64) {
	t.Helper()
	for seq := int64(1); seq <= n; seq++ {
		rec, env := Hash(roomID, seq, "record"), Hash(roomID, seq, "envelope")
		if got, ok, err := h.RecordHash(seq); !ok || err != nil || got != rec {
			t.Fatalf("RecordHash(%d) = %x, %v, %v; want %x", seq, got[:4], ok, err, rec[:4])
		}
		for what, id := range map[string][32]byte{"record": rec, "envelope": env} {
			if got, ok, err := h.SeqOf(id); !ok || err != nil || got != seq {
				t.Fatalf("SeqOf(%s hash of seq %d) = %d, %v, %v", what, seq, got, ok, err)
			}
		}
	}
	expectAbsent(t, h, n+1, Hash(roomID, n+1, "record"))
}

// empty: a new history answers every lookup absent, never an error.
func empty[S T[S]](t S, s Store) {
	h := s.History(roomA)
	for _, seq := range []int64{-1, 0, 1, 2, 1 << 40} {
		expectAbsent(t, h, seq, Hash(roomA, seq, "record"))
	}
	expectAbsent(t, h, 1, [32]byte{})
}

// lookups: records committed in order are answered by seq, by record hash
// and by envelope hash, from the moment they are committed; answers do not
// change as the room grows; what was never committed is absent.
func lookups[S T[S]](t S, s Store) {
	h := s.History(roomA)
	const n = 64
	for seq := int64(1); seq <= n; seq++ {
		commit(t, s, roomA, seq, seq)
		rec := Hash(roomA, seq, "record")
		if got, ok, err := h.RecordHash(seq); !ok || err != nil || got != rec {
			t.Fatalf("just committed: RecordHash(%d) = %x, %v, %v", seq, got[:4], ok, err)
		}
		expectAbsent(t, h, seq+1, Hash(roomA, seq+1, "envelope"))
	}
	expectRecords(t, h, roomA, n)
	for _, seq := range []int64{-1, 0} {
		expectAbsent(t, h, seq, Hash(roomA, seq, "record"))
	}
	// A hash of a record under another role, or of no record at all.
	expectAbsent(t, h, n+2, Hash(roomA, 1, "other"))
	expectAbsent(t, h, n+3, [32]byte{})
}

// roomsApart: a room's history answers only that room's records, whatever
// else its store holds.
func roomsApart[S T[S]](t S, s Store) {
	a, b := s.History(roomA), s.History(roomB)
	commit(t, s, roomA, 1, 5)
	commit(t, s, roomB, 1, 3)
	expectRecords(t, a, roomA, 5)
	expectRecords(t, b, roomB, 3)
	for seq := int64(1); seq <= 3; seq++ {
		for _, what := range []string{"record", "envelope"} {
			if got, ok, err := a.SeqOf(Hash(roomB, seq, what)); ok || err != nil {
				t.Errorf("room A answers room B's %s hash of seq %d: %d, %v, %v", what, seq, got, ok, err)
			}
		}
	}
	if got, _, _ := b.RecordHash(4); got != [32]byte{} {
		t.Errorf("room B answers seq 4, which only room A has")
	}
}

// restart: a durable history answers the same after its store reopens,
// and goes on from there.
func restart[S T[S]](t S, s Store) {
	commit(t, s, roomA, 1, 20)
	commit(t, s, roomB, 1, 2)
	if !s.Reopen() {
		t.Logf("held in memory: nothing to reopen")
		return
	}
	h := s.History(roomA)
	expectRecords(t, h, roomA, 20)
	expectRecords(t, s.History(roomB), roomB, 2)
	commit(t, s, roomA, 21, 30)
	expectRecords(t, h, roomA, 30)
}

// readErrors: a store that cannot be read answers an error — never absent,
// never a hash — for records it holds and for ones it does not.
func readErrors[S T[S]](t S, s Store) {
	h := s.History(roomA)
	commit(t, s, roomA, 1, 10)
	expectRecords(t, h, roomA, 10)
	if !s.Break() {
		t.Logf("cannot fail: nothing to check")
		return
	}
	for _, seq := range []int64{1, 5, 11} {
		if got, ok, err := h.RecordHash(seq); err == nil || ok {
			t.Errorf("broken store: RecordHash(%d) = %x, %v, %v; want an error", seq, got[:4], ok, err)
		}
	}
	for _, id := range [][32]byte{Hash(roomA, 3, "record"), Hash(roomA, 4, "envelope"), Hash(roomA, 11, "record")} {
		if got, ok, err := h.SeqOf(id); err == nil || ok {
			t.Errorf("broken store: SeqOf(%x) = %d, %v, %v; want an error", id[:4], got, ok, err)
		}
	}
}
