package attention

import (
	"context"
	"log/slog"

	"github.com/dgraph-io/badger/v4"

	"github.com/adpnode/adpnode/adp/identity"
	"github.com/adpnode/adpnode/directory"
	"github.com/adpnode/adpnode/hostport"
	"github.com/adpnode/adpnode/index"
	"github.com/adpnode/adpnode/internal/groupcommit"
	"github.com/adpnode/adpnode/internal/storelayout"
)

// Host is what attention needs of the host in its process: its database
// (attention keeps its own key space in it), clock and logger, its rooms'
// directory entries, who may read a room's events, its change feed and
// stored records, and its group commit.
type Host interface {
	DB() *badger.DB
	NowMs() int64
	Logger() *slog.Logger
	Summaries() []directory.Entry
	Summary(roomID string) (directory.Entry, bool)
	CanReadEvents(roomID string, agent identity.AgentID) bool
	// FeedHead and Follow are the node's change feed (node.Follow).
	FeedHead() uint64
	Follow(ctx context.Context, since uint64, fn func([]hostport.FeedEntry) error) error
	// ActiveSince lists the rooms whose latest record was received at or
	// after ms (0: every room); ChainRecords reads a room's stored records
	// after seq after, with no read rule (the host's own derivations).
	ActiveSince(ms int64) []hostport.RoomHead
	ChainRecords(roomID string, after int64, limit int) ([][]byte, error)
	// CommitWith queues writes into the host's group commit (done runs
	// once they are durable).
	CommitWith(ops []groupcommit.KV, done func(error)) error
}

// ForNode returns the Config for a process around n: dir is the federated
// directory (nil: n's own public and restricted rooms), idx the gossiped
// index (nil without federation). Attention follows n's change feed; set
// Config.Mirror to follow a mirror's too.
func ForNode(n Host, dir func() []directory.Entry, idx *index.Index) Config {
	if dir == nil {
		dir = n.Summaries
	}
	cfg := Config{DB: n.DB(), Now: n.NowMs, Directory: dir, Lookup: n.Summary, Log: n.Logger(),
		CanRead: func(roomID string, a identity.AgentID) bool { return n.CanReadEvents(roomID, a) },
		Commit:  n.CommitWith, Local: nodeSource{n}}
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

// nodeSource is the node as a Source.
type nodeSource struct{ n Host }

func (s nodeSource) FeedHead() uint64 { return s.n.FeedHead() }

func (s nodeSource) Follow(ctx context.Context, since uint64, fn func([]hostport.FeedEntry) error) error {
	return s.n.Follow(ctx, since, fn)
}

// FeedPosKey is node.FeedPosKey.
func (nodeSource) FeedPosKey(follower string) []byte { return []byte(storelayout.FeedPos + follower) }

func (s nodeSource) Records(roomID string, after int64, limit int) ([][]byte, error) {
	return s.n.ChainRecords(roomID, after, limit)
}

func (s nodeSource) Heads() []Head {
	hs := s.n.ActiveSince(0)
	out := make([]Head, len(hs))
	for i, h := range hs {
		out[i] = Head{h.ID, h.Seq}
	}
	return out
}

// Attach registers a's listener on idx (nil: none).
func (a *Attention) Attach(idx *index.Index) {
	if idx != nil {
		idx.OnChange(a.IndexChanged)
	}
}
