package node

import (
	"context"
	"encoding/binary"
	"errors"
	"sync"

	"github.com/dgraph-io/badger/v4"

	"github.com/adpnode/adpnode/adp/identity"
	"github.com/adpnode/adpnode/adp/record"
	"github.com/adpnode/adpnode/hostport"
	"github.com/adpnode/adpnode/internal/groupcommit"
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
const FeedKeep = 1_000_000

// feedBatch is the most entries Follow hands a follower at once.
const feedBatch = 1024

var (
	pfxFeed    = storelayout.Feed
	pfxFeedPos = storelayout.FeedPos
)

func feedKey(seq uint64) []byte {
	return binary.BigEndian.AppendUint64([]byte(pfxFeed), seq)
}

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

// feedEntryValue is record seq:8 BE | record hash:32 | room ID.
func feedEntryValue(rec *record.Record) []byte {
	v := make([]byte, 40, 40+len(rec.RoomID))
	binary.BigEndian.PutUint64(v, uint64(rec.Seq))
	if h, err := identity.DecodeB64Len(rec.Hash, 32); err == nil {
		copy(v[8:40], h)
	}
	return append(v, rec.RoomID...)
}

func parseFeedEntry(seq uint64, v []byte) (hostport.FeedEntry, error) {
	if len(v) < 40 {
		return hostport.FeedEntry{}, errors.New("node: malformed feed entry")
	}
	return hostport.FeedEntry{Seq: seq, RecordSeq: int64(binary.BigEndian.Uint64(v)), Hash: [32]byte(v[8:40]), RoomID: string(v[40:])}, nil
}

// feed is the notifier of the newest feed seq.
type feed struct {
	mu   sync.Mutex
	head uint64
	wake chan struct{} // closed and replaced when head advances
}

func (f *feed) advanced(last uint64) {
	f.mu.Lock()
	f.head = last
	close(f.wake)
	f.wake = make(chan struct{})
	f.mu.Unlock()
}

func (f *feed) state() (uint64, <-chan struct{}) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.head, f.wake
}

// openFeed reads the newest stored entry's seq and has the committer
// number entries after it.
func (n *Node) openFeed() error {
	var head uint64
	err := n.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Reverse: true, Prefix: []byte(pfxFeed)})
		defer it.Close()
		it.Seek(feedKey(^uint64(0)))
		if it.Valid() {
			head = binary.BigEndian.Uint64(it.Item().Key()[len(pfxFeed):])
		}
		return nil
	})
	if err != nil {
		return err
	}
	n.feed = &feed{head: head, wake: make(chan struct{})}
	if n.cfg.WithoutFeed {
		return nil
	}
	n.commit.SetFeed(groupcommit.Feed{Prefix: []byte(pfxFeed), Next: head + 1, Advanced: n.feed.advanced})
	return nil
}

// FeedHead returns the seq of the newest feed entry (0: none yet). Every
// entry up to it is durable and readable.
func (n *Node) FeedHead() uint64 {
	h, _ := n.feed.state()
	return h
}

// Follow hands fn, in feed order and in batches, every feed entry after
// since: first those stored (a replay from Badger), then each new one as
// it is committed. It returns fn's error, ctx's once ctx ends (checked
// between batches), hostport.ErrFeedBehind when the entries after since
// were pruned, or groupcommit.ErrClosed when the node closes. fn runs on
// the caller's goroutine with no lock of the node held: it may write to
// the node, and a slow fn delays only its own follower.
func (n *Node) Follow(ctx context.Context, since uint64, fn func([]hostport.FeedEntry) error) error {
	pos := since
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		if n.ctx.Err() != nil {
			return groupcommit.ErrClosed
		}
		head, wake := n.feed.state()
		if head > pos {
			batch, err := n.readFeed(pos, feedBatch)
			if err != nil {
				return err
			}
			if len(batch) == 0 || batch[0].Seq != pos+1 {
				return hostport.ErrFeedBehind
			}
			if err := fn(batch); err != nil {
				return err
			}
			pos = batch[len(batch)-1].Seq
			continue
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return ctx.Err()
		case <-n.ctx.Done():
			return groupcommit.ErrClosed
		}
	}
}

// readFeed returns up to limit entries after pos.
func (n *Node) readFeed(pos uint64, limit int) ([]hostport.FeedEntry, error) {
	var out []hostport.FeedEntry
	err := n.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{PrefetchValues: true, PrefetchSize: min(limit, 256), Prefix: []byte(pfxFeed)})
		defer it.Close()
		for it.Seek(feedKey(pos + 1)); it.Valid() && len(out) < limit; it.Next() {
			seq := binary.BigEndian.Uint64(it.Item().Key()[len(pfxFeed):])
			var e hostport.FeedEntry
			if err := it.Item().Value(func(v []byte) (err error) { e, err = parseFeedEntry(seq, v); return err }); err != nil {
				return err
			}
			out = append(out, e)
		}
		return nil
	})
	return out, err
}

// pruneFeed deletes the entries every follower with a stored position
// has handled, and those more than keep behind the head.
func (n *Node) pruneFeed(keep uint64) error {
	head := n.FeedHead()
	cut := head // no follower: nothing needs the entries
	err := n.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{PrefetchValues: true, Prefix: []byte(pfxFeedPos)})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			if err := it.Item().Value(func(v []byte) error {
				if len(v) == 8 {
					cut = min(cut, binary.BigEndian.Uint64(v))
				}
				return nil
			}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	if head > keep {
		cut = max(cut, head-keep)
	}
	// The newest entry stays: it is where the next start numbers from.
	cut = min(cut, head-1)
	if head == 0 {
		return nil
	}
	from := n.feedFloor.Load()
	if cut <= from {
		return nil
	}
	wb := n.db.NewWriteBatch()
	defer wb.Cancel()
	err = n.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte(pfxFeed)})
		defer it.Close()
		for it.Seek(feedKey(from + 1)); it.Valid(); it.Next() {
			seq := binary.BigEndian.Uint64(it.Item().Key()[len(pfxFeed):])
			if seq > cut {
				break
			}
			if err := wb.Delete(it.Item().KeyCopy(nil)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	if err := wb.Flush(); err != nil {
		return err
	}
	n.feedFloor.Store(cut)
	return nil
}
