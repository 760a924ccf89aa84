package node

import (
	"context"
	"encoding/binary"
	"errors"

	"github.com/dgraph-io/badger/v4"

	"github.com/adpnode/adpnode/hostport"
	"github.com/adpnode/adpnode/internal/changefeed"
	"github.com/adpnode/adpnode/internal/storelayout"
)

// The change feed: every record the node stores gets an entry (f/<feed
// seq>) in the transaction that holds it, its seq assigned by the group
// committer as it builds the transaction, so seqs are dense and in commit
// order. Followers (Follow) read the feed from Badger and are woken by a
// broadcast of the newest seq: there is no per-follower queue to
// overflow, and no room's or agent's lock is held while a follower runs.
//
// Followers store their position (fp/<follower>, the last entry they
// handled) in the same transaction as their own writes. Entries at or
// below every stored position are pruned (never the newest: the next
// start numbers from it); at most FeedKeep entries are
// kept whatever the positions, so a follower stopped for good cannot make
// the feed grow without bound. A follower whose position falls below the
// oldest kept entry gets hostport.ErrFeedBehind and resynchronises from
// its own state (the host log: every room's head against its
// watermarks), then follows from the head it read before it began.

// FeedKeep is the most entries the feed keeps behind its head.
const FeedKeep = changefeed.Keep

var (
	pfxFeed    = storelayout.Feed
	pfxFeedPos = storelayout.FeedPos
)

// FeedPosKey is the key under which follower stores its position (the
// feed seq of the last entry it handled, 8 bytes big-endian) in its own
// transactions.
func FeedPosKey(follower string) []byte { return []byte(pfxFeedPos + follower) }

// FeedPosValue encodes a position for FeedPosKey.
func FeedPosValue(seq uint64) []byte { return binary.BigEndian.AppendUint64(nil, seq) }

// ReadFeedPos reads follower's stored position (false: none stored).
func ReadFeedPos(db *badger.DB, follower string) (uint64, bool, error) {
	var pos uint64
	found := false
	err := db.View(func(txn *badger.Txn) error {
		item, err := txn.Get(FeedPosKey(follower))
		if errors.Is(err, badger.ErrKeyNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		return item.Value(func(v []byte) error {
			if len(v) != 8 {
				return errors.New("node: malformed feed position of " + follower)
			}
			pos, found = binary.BigEndian.Uint64(v), true
			return nil
		})
	})
	return pos, found, err
}

// openFeed opens the feed (its newest stored entry) and has the committer
// number entries after it.
func (n *Node) openFeed() error {
	f, err := changefeed.Open(n.db, pfxFeed, pfxFeedPos)
	if err != nil {
		return err
	}
	n.feed = f
	if n.cfg.WithoutFeed {
		return nil
	}
	f.GateOnApply()
	n.commit.SetFeed(f.Committer())
	return nil
}

// FeedHead returns the seq of the newest feed entry (0: none yet). Every
// entry up to it is durable and readable.
func (n *Node) FeedHead() uint64 { return n.feed.Head() }

// Follow hands fn, in feed order and in batches, every feed entry after
// since: first those stored (a replay from Badger), then each new one as
// it is committed. It returns fn's error, ctx's once ctx ends,
// hostport.ErrFeedBehind when the entries after since were pruned, or
// groupcommit.ErrClosed when the node closes. fn runs on the caller's
// goroutine with no lock of the node held: it may write to the node, and
// a slow fn delays only its own follower.
func (n *Node) Follow(ctx context.Context, since uint64, fn func([]hostport.FeedEntry) error) error {
	return n.feed.Follow(ctx, since, fn)
}

// pruneFeed deletes the entries every follower with a stored position
// has handled, and those more than keep behind the head.
func (n *Node) pruneFeed(keep uint64) error { return n.feed.Prune(keep) }
