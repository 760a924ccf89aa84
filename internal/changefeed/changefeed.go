// Package changefeed is a durable change feed kept in Badger beside the
// records it announces, for a store other than the node's (the mirror's
// verified records): the same entry shape and Follow contract as the
// node's feed (node/feed.go).
//
// Each stored record gets an entry (<prefix><seq:8 BE>) written by a group
// committer (groupcommit.Feed) in the transaction that holds the record,
// so entries are dense, in commit order, and never exist without their
// record nor a record without its entry. Followers read the entries from
// Badger and are woken by a broadcast of the newest seq: there is no
// per-follower queue to overflow. A follower stores its position
// (<pos prefix><follower>) in the same transaction as its own writes;
// entries every stored position has passed are pruned, and at most Keep
// behind the head are kept whatever the positions.
package changefeed

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
)

// Keep is the most entries a feed keeps behind its head.
const Keep = 1_000_000

// batch is the most entries Follow hands a follower at once.
const batch = 1024

// Feed is one durable change feed.
type Feed struct {
	db          *badger.DB
	prefix, pos []byte

	mu     sync.Mutex
	head   uint64        // the newest entry followers are handed
	wake   chan struct{} // closed and replaced when head advances or the feed closes
	closed bool
	floor  uint64 // entries at or below it are pruned

	// A gated feed (GateOnApply) hands followers an entry only once its
	// writer has applied what the record changes in memory (Applied), and
	// every entry before it too: durable is the newest durable entry,
	// applied the applied ones above head.
	gated   bool
	durable uint64
	applied map[uint64]struct{}
}

// Open reads the newest stored entry of the feed under prefix; followers'
// positions are under pos.
func Open(db *badger.DB, prefix, pos string) (*Feed, error) {
	f := &Feed{db: db, prefix: []byte(prefix), pos: []byte(pos), wake: make(chan struct{})}
	err := db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Reverse: true, Prefix: f.prefix})
		defer it.Close()
		it.Seek(f.key(^uint64(0)))
		if it.Valid() {
			f.head = binary.BigEndian.Uint64(it.Item().Key()[len(f.prefix):])
		}
		return nil
	})
	return f, err
}

func (f *Feed) key(seq uint64) []byte {
	return binary.BigEndian.AppendUint64(append([]byte(nil), f.prefix...), seq)
}

// Committer is what a group committer needs to write this feed's entries
// (groupcommit.Committer.SetFeed).
func (f *Feed) Committer() groupcommit.Feed {
	return groupcommit.Feed{Prefix: f.prefix, Next: f.Head() + 1, Advanced: f.advanced}
}

// Entry is the entry value of rec, whose event has flags (hostport.FeedFlagsOf):
// record seq:8 BE | record hash:32 | flags:1 | room ID. The flags byte has
// its high bit set (hostport.FeedFlagsSet); an entry written before flags
// existed (record seq:8 | hash:32 | room ID) has a room ID character there,
// which never has it (room IDs are lowercase base32hex), so both read.
func Entry(rec *record.Record, flags hostport.FeedFlags) []byte {
	v := make([]byte, 41, 41+len(rec.RoomID))
	binary.BigEndian.PutUint64(v, uint64(rec.Seq))
	if h, err := identity.DecodeB64Len(rec.Hash, 32); err == nil {
		copy(v[8:40], h)
	}
	v[40] = byte(flags | hostport.FeedFlagsSet)
	return append(v, rec.RoomID...)
}

// parseEntry reads an entry value of either layout (Entry).
func parseEntry(seq uint64, v []byte) (hostport.FeedEntry, error) {
	if len(v) < 40 {
		return hostport.FeedEntry{}, errors.New("changefeed: malformed entry")
	}
	e := hostport.FeedEntry{Seq: seq, RecordSeq: int64(binary.BigEndian.Uint64(v)), Hash: [32]byte(v[8:40])}
	rest := v[40:]
	if len(rest) > 0 && hostport.FeedFlags(rest[0])&hostport.FeedFlagsSet != 0 {
		e.Flags, rest = hostport.FeedFlags(rest[0]), rest[1:]
	}
	e.RoomID = string(rest)
	return e, nil
}

func (f *Feed) advanced(last uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.gated {
		f.durable = last
		f.advanceApplied()
		return
	}
	f.head = last
	f.wakeLocked()
}

func (f *Feed) wakeLocked() {
	close(f.wake)
	f.wake = make(chan struct{})
}

// GateOnApply makes followers wait for Applied: a writer that updates
// state in memory after its entry is durable (the node: a room's lifecycle,
// its summary, a new room's registration) calls Applied(seq) once it has,
// so that a follower woken by the entry reads that state as of the
// record, not before it. Every durable entry must be reported applied
// (the committer's seq from CommitEntry); until it is, it and the entries
// after it wait. Call it before the first write.
func (f *Feed) GateOnApply() {
	f.mu.Lock()
	f.gated, f.durable, f.applied = true, f.head, map[uint64]struct{}{}
	f.mu.Unlock()
}

// Applied reports that the writer of entry seq has applied it (a gated
// feed; otherwise it does nothing).
func (f *Feed) Applied(seq uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.gated || seq <= f.head {
		return
	}
	f.applied[seq] = struct{}{}
	f.advanceApplied()
}

// advanceApplied moves head over the applied durable entries that follow
// it, and wakes followers if it moved.
func (f *Feed) advanceApplied() {
	moved := false
	for {
		next := f.head + 1
		if _, ok := f.applied[next]; !ok || next > f.durable {
			break
		}
		delete(f.applied, next)
		f.head, moved = next, true
	}
	if moved {
		f.wakeLocked()
	}
}

// Close ends every Follow with groupcommit.ErrClosed (after the committer
// that writes the feed closed).
func (f *Feed) Close() {
	f.mu.Lock()
	if !f.closed {
		f.closed = true
		f.wakeLocked()
	}
	f.mu.Unlock()
}

func (f *Feed) state() (uint64, <-chan struct{}, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.head, f.wake, f.closed
}

// Head returns the seq of the newest entry followers are handed (0: none
// yet): durable, and on a gated feed applied with every entry before it.
func (f *Feed) Head() uint64 {
	h, _, _ := f.state()
	return h
}

// PosKey is the key under which follower stores its position (8 bytes
// big-endian, PosValue) in its own transactions.
func (f *Feed) PosKey(follower string) []byte {
	return append(append([]byte(nil), f.pos...), follower...)
}

// PosValue encodes a position for PosKey.
func PosValue(seq uint64) []byte { return binary.BigEndian.AppendUint64(nil, seq) }

// Follow hands fn, in feed order and in batches, every entry after since:
// those stored first, then each new one as it is committed. It returns
// fn's error, ctx's once ctx ends, hostport.ErrFeedBehind when the
// entries after since were pruned, or groupcommit.ErrClosed once the feed
// closed. fn runs on the caller's goroutine with no lock held.
func (f *Feed) Follow(ctx context.Context, since uint64, fn func([]hostport.FeedEntry) error) error {
	pos := since
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		head, wake, closed := f.state()
		if closed {
			return groupcommit.ErrClosed
		}
		if head > pos {
			// Never past head: a gated feed stores entries before it hands
			// them over.
			b, err := f.read(pos, int(min(head-pos, batch)))
			if err != nil {
				return err
			}
			if len(b) == 0 || b[0].Seq != pos+1 {
				return hostport.ErrFeedBehind
			}
			if err := fn(b); err != nil {
				return err
			}
			pos = b[len(b)-1].Seq
			continue
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (f *Feed) read(pos uint64, limit int) ([]hostport.FeedEntry, error) {
	var out []hostport.FeedEntry
	err := f.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{PrefetchValues: true, PrefetchSize: min(limit, 256), Prefix: f.prefix})
		defer it.Close()
		for it.Seek(f.key(pos + 1)); it.Valid() && len(out) < limit; it.Next() {
			seq := binary.BigEndian.Uint64(it.Item().Key()[len(f.prefix):])
			err := it.Item().Value(func(v []byte) error {
				e, err := parseEntry(seq, v)
				out = append(out, e)
				return err
			})
			if err != nil {
				return err
			}
		}
		return nil
	})
	return out, err
}

// Prune deletes the entries every follower with a stored position has
// handled, and those more than keep behind the head; the newest stays
// (the next start numbers from it).
func (f *Feed) Prune(keep uint64) error {
	head := f.Head()
	if head == 0 {
		return nil
	}
	cut := head
	err := f.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{PrefetchValues: true, Prefix: f.pos})
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
	cut = min(cut, head-1)
	f.mu.Lock()
	from := f.floor
	f.mu.Unlock()
	if cut <= from {
		return nil
	}
	wb := f.db.NewWriteBatch()
	defer wb.Cancel()
	err = f.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: f.prefix})
		defer it.Close()
		for it.Seek(f.key(from + 1)); it.Valid(); it.Next() {
			if binary.BigEndian.Uint64(it.Item().Key()[len(f.prefix):]) > cut {
				break
			}
			if err := wb.Delete(it.Item().KeyCopy(nil)); err != nil {
				return err
			}
		}
		return nil
	})
	if err == nil {
		err = wb.Flush()
	}
	if err != nil {
		return err
	}
	f.mu.Lock()
	f.floor = cut
	f.mu.Unlock()
	return nil
}
