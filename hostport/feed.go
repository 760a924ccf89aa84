package hostport

import "errors"

// FeedEntry is one entry of the host's change feed: a record the host
// stored, written in the same transaction as the record. Feed seqs are
// dense and follow commit order.
type FeedEntry struct {
	Seq       uint64 // the entry's feed seq (from 1)
	RoomID    string
	RecordSeq int64
	Hash      [32]byte // the record hash's raw bytes
}

// ErrFeedBehind is Follow's answer to a follower whose position is below
// the oldest entry the feed keeps (entries are pruned behind the slowest
// follower, and at most a bounded number are kept): the follower
// resynchronises from its own state, then follows from the feed's head
// as it was before it began.
var ErrFeedBehind = errors.New("hostport: the change feed no longer holds the entries after this position; resynchronise")
