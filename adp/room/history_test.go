package room_test

import (
	"testing"

	"github.com/adpnode/adpnode/adp/room"
	"github.com/adpnode/adpnode/adp/room/historytest"
)

type memStore map[string]*room.MemHistory

func (s memStore) History(id string) room.History {
	if s[id] == nil {
		s[id] = room.NewMemHistory()
	}
	return s[id]
}

func (s memStore) Commit(id string, seq int64, rec, env [32]byte) {
	s.History(id).Append(seq, rec, env)
}

func (memStore) Reopen() bool { return false }
func (memStore) Break() bool  { return false }

// TestMemHistoryConformance runs the room.History suite on MemHistory.
func TestMemHistoryConformance(t *testing.T) {
	historytest.Run(t, func(*testing.T) historytest.Store { return memStore{} })
}
