package node

import (
	"fmt"
	"testing"

	"github.com/dgraph-io/badger/v4"

	"github.com/adpnode/adpnode/adp/identity"
	"github.com/adpnode/adpnode/adp/room"
	"github.com/adpnode/adpnode/adp/room/historytest"
)

// historyStore keeps rooms' histories in a Badger data dir, records and
// envelope index written as the node's commit writes them.
type historyStore struct {
	t   *testing.T
	dir string
	db  *badger.DB
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
	s.db = db
}

func (s *historyStore) History(id string) room.History { return storeHistory{db: s.db, room: id} }

func (s *historyStore) Commit(id string, seq int64, rec, env [32]byte) {
	err := s.db.Update(func(txn *badger.Txn) error {
		raw := fmt.Sprintf(`{"room_id":%q,"seq":%d,"hash":%q}`, id, seq, identity.EncodeB64(rec[:]))
		if err := txn.Set(recordKey(id, seq), []byte(raw)); err != nil {
			return err
		}
		if err := txn.Set(envelopeKey(rec), envelopeValue(id, seq)); err != nil {
			return err
		}
		return txn.Set(envelopeKey(env), envelopeValue(id, seq))
	})
	if err != nil {
		s.t.Fatal(err)
	}
	s.History(id).Append(seq, rec, env)
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
	// disk would.
	return s.db.Close() == nil
}

// TestStoreHistoryConformance runs the room.History suite on a hosted
// room's history, read from the node's store.
func TestStoreHistoryConformance(t *testing.T) {
	historytest.Run(t, openHistoryStore)
}
