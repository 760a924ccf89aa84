package federation

import (
	"slices"
	"testing"

	"github.com/adpnode/adpnode/adp/room"
	"github.com/adpnode/adpnode/directory"
)

// TestClockStatusChangeDueForAnnouncement. Property: a room whose status
// changes with the clock alone (it starts or ends; no record tells of it)
// is due for an urgent announcement once the host clock reaches its start
// or end time, once per change; a boundary an announcement superseded is
// not.
func TestClockStatusChangeDueForAnnouncement(t *testing.T) {
	f := &Federation{published: map[string]published{}}
	note := func(e directory.Entry) {
		f.pubMu.Lock()
		p := published{room: e}
		f.noteBoundaryLocked(e.ID, &p, f.published[e.ID].boundary)
		f.published[e.ID] = p
		f.pubMu.Unlock()
	}
	note(directory.Entry{ID: "r", Status: room.StatusScheduled, StartTime: 100, EndTime: 200})
	note(directory.Entry{ID: "s", Status: room.StatusActive, StartTime: 0, EndTime: 150})
	if got := f.passedBoundaries(99); len(got) != 0 {
		t.Fatalf("due before any start or end: %v", got)
	}
	if got := f.passedBoundaries(100); !slices.Equal(got, []string{"r"}) {
		t.Fatalf("due at r's start: %v", got)
	}
	note(directory.Entry{ID: "r", Status: room.StatusActive, StartTime: 100, EndTime: 200})
	// s was closed early by a record and announced ended: its end time
	// no longer changes anything.
	note(directory.Entry{ID: "s", Status: room.StatusEnded, StartTime: 0, EndTime: 150})
	if got := f.passedBoundaries(199); len(got) != 0 {
		t.Fatalf("due before r's end: %v", got)
	}
	if got := f.passedBoundaries(1000); !slices.Equal(got, []string{"r"}) {
		t.Fatalf("due at r's end: %v", got)
	}
	note(directory.Entry{ID: "r", Status: room.StatusEnded, StartTime: 100, EndTime: 200})
	if got := f.passedBoundaries(1 << 40); len(got) != 0 || len(f.bounds) != 0 {
		t.Fatalf("an ended room is due again: %v (heap %d)", got, len(f.bounds))
	}
}
