package federation

import (
	"context"
	"encoding/json"

	"github.com/dgraph-io/badger/v4"

	"github.com/adpnode/adpnode/adp/identity"
	"github.com/adpnode/adpnode/directory"
	"github.com/adpnode/adpnode/hostport"
)

// Host is what the federation needs of the host it federates: its clock
// and origin, the summaries of its rooms (to announce them), its write path
// (for relayed writes) and record reads (for backfill and publishing), the
// database the federation keeps its bindings in, and its change feed.
type Host interface {
	// Origin is the host's service origin (announced in its binding).
	Origin() string
	// NowMs reads the host clock in Unix milliseconds.
	NowMs() int64
	// HostsRoom reports whether the host is authoritative for roomID.
	HostsRoom(roomID string) bool
	// Summaries lists the host's public and restricted rooms; Summary
	// reads one room's entry.
	Summaries() []directory.Entry
	Summary(roomID string) (directory.Entry, bool)
	// MaxBodyBytes bounds a relayed write's body.
	MaxBodyBytes() int64
	// Submit runs the host's write path on a relayed envelope.
	Submit(ctx context.Context, body []byte, pathRoom string) (*hostport.Result, error)
	// Events reads up to limit records with seq > after as viewer.
	Events(roomID string, viewer identity.AgentID, after int64, limit int) ([]json.RawMessage, bool, error)
	// DB is the process's Badger database (the federation's bindings
	// live in their own key space in it).
	DB() *badger.DB
	// Follow hands fn the host's change-feed entries after since, in
	// order, until ctx ends or fn fails (hostport.ErrFeedBehind when
	// they were pruned); FeedHead is the newest entry's feed seq.
	Follow(ctx context.Context, since uint64, fn func([]hostport.FeedEntry) error) error
	FeedHead() uint64
}
