package directory

import (
	"slices"

	"github.com/adpnode/adpnode/adp/room"
)

// Sort orders entries as §18 recommends: active before scheduled (then
// ended, cancelled), then most recent activity, then start time, then host
// and ID for a total order.
func Sort(list []Entry) {
	slices.SortFunc(list, func(a, b Entry) int {
		pa, pb := positionOf(&a), positionOf(&b)
		switch {
		case pa.before(pb):
			return -1
		case pb.before(pa):
			return 1
		}
		return 0
	})
}

// Less is the directory order (see Sort).
func Less(a, b *Entry) bool { return positionOf(a).before(positionOf(b)) }

// position is where an entry sits in the directory order: what a cursor
// carries.
type position struct {
	rank       int
	lastActive int64
	start      int64
	host, id   string
}

func positionOf(e *Entry) position {
	return position{statusRank(e.Status), e.LastActive, e.StartTime, e.Host, e.ID}
}

func (a position) before(b position) bool {
	if a.rank != b.rank {
		return a.rank < b.rank
	}
	if a.lastActive != b.lastActive {
		return a.lastActive > b.lastActive
	}
	if a.start != b.start {
		return a.start < b.start
	}
	if a.host != b.host {
		return a.host < b.host
	}
	return a.id < b.id
}

// statusRank is a status's place in the order; unknown statuses go last.
func statusRank(s room.Status) int {
	switch s {
	case room.StatusActive:
		return 0
	case room.StatusScheduled:
		return 1
	case room.StatusEnded:
		return 2
	}
	return 3
}
