package directory

import (
	"bytes"
	"encoding/base64"
	"encoding/json"

	"github.com/adpnode/adpnode/adp"
)

// Query is one directory read: a filter, a page size and the cursor a
// previous page returned ("" for the first page).
type Query struct {
	Filter
	Limit  int
	Cursor string
}

// MaxCursorLen bounds an encoded cursor: one this package issued is far
// shorter (a room ID, a host name and three numbers).
const MaxCursorLen = 1024

// Page applies q's filter, the directory order, the cursor and the limit
// to list (which it does not modify), and returns the page and the cursor
// of the next page ("" when no more follow). A cursor this package did not
// issue is an invalid_request error (reason "cursor"). A limit below 1
// counts as 1.
func Page(list []Entry, q Query) ([]Entry, string, error) {
	var after *position
	if q.Cursor != "" {
		p, err := parseCursor(q.Cursor)
		if err != nil {
			return nil, "", err
		}
		after = &p
	}
	limit := max(q.Limit, 1)
	matched := make([]Entry, 0, len(list))
	for i := range list {
		if q.Match(&list[i]) && (after == nil || after.before(positionOf(&list[i]))) {
			matched = append(matched, list[i])
		}
	}
	Sort(matched)
	if len(matched) <= limit {
		return matched, "", nil
	}
	page := matched[:limit:limit]
	return page, cursorOf(&page[limit-1]), nil
}

// cursorWire is the JSON inside a cursor (base64url, unpadded). Its field
// names are short and fixed: cursors handed out before a restart or an
// upgrade stay valid.
type cursorWire struct {
	R  int    `json:"r"`
	A  int64  `json:"a"`
	S  int64  `json:"s"`
	H  string `json:"h"`
	ID string `json:"i"`
}

var cursorEncoding = base64.RawURLEncoding.Strict()

// cursorOf is the cursor of the page that continues after e.
func cursorOf(e *Entry) string {
	p := positionOf(e)
	b, _ := json.Marshal(cursorWire{p.rank, p.lastActive, p.start, p.host, p.id})
	return cursorEncoding.EncodeToString(b)
}

func badCursor() error {
	return adp.Reason(adp.CodeInvalidRequest, "cursor", "cursor is not one this host issued")
}

// parseCursor decodes a cursor strictly: bounded, canonical base64url of
// exactly one JSON object with known fields and a known status rank.
func parseCursor(s string) (position, error) {
	if len(s) > MaxCursorLen {
		return position{}, badCursor()
	}
	b, err := cursorEncoding.DecodeString(s)
	if err != nil || !bytes.HasPrefix(bytes.TrimLeft(b, " \t\r\n"), []byte("{")) {
		return position{}, badCursor()
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var c cursorWire
	if err := dec.Decode(&c); err != nil || dec.More() || c.R < 0 || c.R > 3 {
		return position{}, badCursor()
	}
	if _, err := dec.Token(); err == nil { // trailing data after the object
		return position{}, badCursor()
	}
	return position{c.R, c.A, c.S, c.H, c.ID}, nil
}
