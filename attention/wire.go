package attention

import (
	"log/slog"

	"github.com/dgraph-io/badger/v4"

	"github.com/adpnode/adpnode/adp/identity"
	"github.com/adpnode/adpnode/directory"
	"github.com/adpnode/adpnode/hostport"
	"github.com/adpnode/adpnode/index"
	"github.com/adpnode/adpnode/internal/groupcommit"
)

// Host is what attention needs of the host in its process: its database
// (attention keeps its own key space in it), clock and logger, its rooms'
// directory entries, who may read a room's events, and its event stream.
type Host interface {
	DB() *badger.DB
	NowMs() int64
	Logger() *slog.Logger
	Summaries() []directory.Entry
	Summary(roomID string) (directory.Entry, bool)
	CanReadEvents(roomID string, agent identity.AgentID) bool
	// ActiveSince lists the rooms whose latest record was received at or
	// after ms; ChainRecords reads a room's stored records after seq
	// after, with no read rule (the catch-up's own derivations).
	ActiveSince(ms int64) []hostport.RoomHead
	ChainRecords(roomID string, after int64, limit int) ([][]byte, error)
	// CommitWith queues writes into the host's group commit (done runs
	// once they are durable).
	CommitWith(ops []groupcommit.KV, done func(error)) error
}

// ForNode returns the Config for a process around n: dir is the federated
// directory (nil: n's own public and restricted rooms), idx the gossiped
// index (nil without federation).
func ForNode(n Host, dir func() []directory.Entry, idx *index.Index) Config {
	if dir == nil {
		dir = n.Summaries
	}
	cfg := Config{DB: n.DB(), Now: n.NowMs, Directory: dir, Lookup: n.Summary, Log: n.Logger(),
		CanRead: func(roomID string, a identity.AgentID) bool { return n.CanReadEvents(roomID, a) },
		Commit:  n.CommitWith}
	cfg.Chain = &Chain{
		Heads: func(since int64) []Head {
			hs := n.ActiveSince(since)
			out := make([]Head, len(hs))
			for i, h := range hs {
				out[i] = Head{h.ID, h.Seq}
			}
			return out
		},
		Records: n.ChainRecords,
	}
	if idx != nil {
		cfg.Locate = func(roomID string) (string, string, bool) {
			e, ok := idx.Room(roomID, n.NowMs())
			if !ok {
				return "", "", false
			}
			return e.Room.URL, e.Room.Host, true
		}
	}
	return cfg
}

// Attach registers a's listeners on n and idx (idx may be nil). The mirror
// hook is Mirrored, passed in mirror.Config.OnVerified.
func (a *Attention) Attach(n Host, idx *index.Index) {
	if idx != nil {
		idx.OnChange(a.IndexChanged)
	}
}
