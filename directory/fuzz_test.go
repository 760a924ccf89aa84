package directory

import (
	"testing"

	"github.com/adpnode/adpnode/adp"
	"github.com/adpnode/adpnode/adp/room"
)

// FuzzCursor: the decoder never panics, rejects with invalid_request/cursor
// only, and whatever it accepts re-encodes to a cursor it accepts with the
// same position.
func FuzzCursor(f *testing.F) {
	f.Add(cursorOf(&Entry{ID: "01J0ABC", Host: "example.org:8080", Status: "active", LastActive: 1, StartTime: 2}))
	f.Add("eyJyIjowfQ")
	f.Add("")
	f.Add("@@")
	f.Add("eyJyIjo0fQ")
	f.Fuzz(func(t *testing.T, s string) {
		p, err := parseCursor(s)
		if err != nil {
			if e := adp.AsError(err); e == nil || e.Code != adp.CodeInvalidRequest || e.Data["reason"] != "cursor" {
				t.Fatalf("%q: error %v", s, err)
			}
			return
		}
		re := cursorOf(&Entry{Status: []room.Status{room.StatusActive, room.StatusScheduled, room.StatusEnded, room.StatusCancelled}[p.rank], LastActive: p.lastActive, StartTime: p.start, Host: p.host, ID: p.id})
		q, err := parseCursor(re)
		if err != nil && len(re) <= MaxCursorLen || err == nil && q != p {
			t.Fatalf("%q: re-encoded %q: %+v %v, want %+v", s, re, q, err, p)
		}
	})
}
