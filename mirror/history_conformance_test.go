package mirror

import (
	"testing"

	"github.com/dgraph-io/badger/v4"

	"github.com/adpnode/adpnode/adp/room"
	"github.com/adpnode/adpnode/adp/room/historytest"
)

// historyStore keeps mirrored rooms' histories in a Badger data dir:
// applied records are told to the history, then stored with their hash
// index and reported durable, as the group committer does.
type historyStore struct {
	t     *testing.T
	dir   string
	db    *badger.DB
	rooms map[string]*roomHistory
}

func openHistoryStore(t *testing.T) historytest.Store {
	s := &historyStore{t: t, dir: t.TempDir()}
	s.open()
	t.Cleanup(func() { s.db.Close() })
	return s
}

func (s *historyStore) open() {
	db, err := badger.Open(badger.DefaultOptions(s.dir).WithLogger(nil))
	if err != nil {
		s.t.Fatal(err)
	}
	s.db, s.rooms = db, map[string]*roomHistory{}
}

func (s *historyStore) room(id string) *roomHistory {
	h := s.rooms[id]
	if h == nil {
		h = newRoomHistory(s.db, "did:agent:host/"+id)
		s.rooms[id] = h
	}
	return h
}

func (s *historyStore) History(id string) room.History { return s.room(id) }

func (s *historyStore) Commit(id string, seq int64, rec, env [32]byte) {
	h := s.room(id)
	h.Append(seq, rec, env)
	err := s.db.Update(func(txn *badger.Txn) error {
		if err := txn.Set(seqKey(pfxRec, h.rk, seq), storedRecord(rec, env)); err != nil {
			return err
		}
		if err := txn.Set(hashKey(h.rk, rec), seqValue(seq)); err != nil {
			return err
		}
		return txn.Set(hashKey(h.rk, env), seqValue(seq))
	})
	if err != nil {
		s.t.Fatal(err)
	}
	h.durable(seq)
}

func (s *historyStore) Reopen() bool {
	if err := s.db.Close(); err != nil {
		s.t.Fatal(err)
	}
	s.open()
	return true
}

func (s *historyStore) Break() bool {
	// A closed store answers every read with an error, as a failing
	// disk would; the overlay is empty (every record was reported
	// durable), so every answer comes from the store.
	return s.db.Close() == nil
}

// TestRoomHistoryConformance runs the room.History suite on a mirrored
// room's history: overlay and store.
func TestRoomHistoryConformance(t *testing.T) {
	historytest.Run(t, openHistoryStore)
}
