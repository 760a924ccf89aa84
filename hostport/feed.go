package hostport

import (
	"errors"

	"github.com/adpnode/adpnode/adp/identity"
)

// FeedEntry is one entry of the host's change feed: a record the host
// stored, written in the same transaction as the record. Feed seqs are
// dense and follow commit order.
type FeedEntry struct {
	Seq       uint64 // the entry's feed seq (from 1)
	RoomID    string
	RecordSeq int64
	Hash      [32]byte // the record hash's raw bytes
	// Flags say what the record may do to a follower's state without
	// reading it (FeedFlagsOf); 0 for an entry written before they existed.
	Flags FeedFlags
}

// FeedFlags is what the writer of a feed entry knew of its record's event
// when it stored it, so that a follower reads back only the records that
// can change its state. An entry without flags (written before they
// existed) says nothing: every May… answers true.
type FeedFlags uint8

const (
	// FeedFlagsSet marks an entry that carries flags (the high bit, so the
	// stored byte differs from any room ID character).
	FeedFlagsSet FeedFlags = 1 << 7
	// FeedNotifies: the event mentions an agent or reviews a join request
	// (it notifies the applicant).
	FeedNotifies FeedFlags = 1 << 0
	// FeedRoomState: the event's type may change what the room's directory
	// summary shows (membership, lifecycle, status, metadata): every type
	// but the content-only ones (ContentOnlyType).
	FeedRoomState FeedFlags = 1 << 1
)

// FeedFlagsOf returns the flags of a stored record's event.
func FeedFlagsOf(ev *identity.Event) FeedFlags {
	f := FeedFlagsSet
	if len(ev.Mentions) > 0 || ev.Type == "room.join.review" {
		f |= FeedNotifies
	}
	if !ContentOnlyType(ev.Type) {
		f |= FeedRoomState
	}
	return f
}

// MayNotify reports whether the entry's record may mention an agent or
// review a join request (true for an entry without flags).
func (f FeedFlags) MayNotify() bool { return f&FeedFlagsSet == 0 || f&FeedNotifies != 0 }

// MayChangeRoom reports whether the entry's record may change the room's
// directory summary (true for an entry without flags).
func (f FeedFlags) MayChangeRoom() bool { return f&FeedFlagsSet == 0 || f&FeedRoomState != 0 }

// ContentOnlyType reports whether events of type never change what a
// directory summary shows: a message, a reaction, a poll vote.
func ContentOnlyType(typ string) bool {
	switch typ {
	case "message.create", "reaction.create", "poll.vote":
		return true
	}
	return false
}

// ErrFeedBehind is Follow's answer to a follower whose position is below
// the oldest entry the feed keeps (entries are pruned behind the slowest
// follower, and at most a bounded number are kept): the follower
// resynchronises from its own state, then follows from the feed's head
// as it was before it began.
var ErrFeedBehind = errors.New("hostport: the change feed no longer holds the entries after this position; resynchronise")
