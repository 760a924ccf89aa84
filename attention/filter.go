package attention

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/adpnode/adpnode/adp"
	"github.com/adpnode/adpnode/adp/identity"
	"github.com/adpnode/adpnode/adp/room"
	"github.com/adpnode/adpnode/node"
)

// Filter selects directory rooms. Empty fields match everything; Status
// empty means active and scheduled (as the public directory does).
type Filter struct {
	Keyword  string        `json:"keyword,omitempty"`
	Tags     []string      `json:"tags,omitempty"` // every tag must be on the room
	Status   []room.Status `json:"status,omitempty"`
	Host     string        `json:"host,omitempty"`
	Language string        `json:"language,omitempty"`
	Creator  string        `json:"creator,omitempty"`
}

// Bounds of one filter.
const (
	MaxKeywordLen = 200
	MaxTags       = 8
	MaxTagLen     = 64
	MaxHostLen    = 253
	MaxLangLen    = 35
)

func badFilter(field, msg string) error {
	return adp.Reason(adp.CodeInvalidRequest, "filter", msg).WithData("field", field)
}

// normalize checks f and lower-cases what is matched case-insensitively.
func (f *Filter) normalize() error {
	if len(f.Keyword) > MaxKeywordLen {
		return badFilter("keyword", fmt.Sprintf("keyword exceeds %d bytes", MaxKeywordLen))
	}
	f.Keyword = strings.ToLower(strings.TrimSpace(f.Keyword))
	if len(f.Tags) > MaxTags {
		return badFilter("tags", fmt.Sprintf("at most %d tags", MaxTags))
	}
	for i, t := range f.Tags {
		t = strings.ToLower(strings.TrimSpace(t))
		if t == "" || len(t) > MaxTagLen {
			return badFilter("tags", fmt.Sprintf("a tag must have 1..%d bytes", MaxTagLen))
		}
		f.Tags[i] = t
	}
	if len(f.Status) > 4 {
		return badFilter("status", "at most 4 statuses")
	}
	for _, s := range f.Status {
		switch s {
		case room.StatusScheduled, room.StatusActive, room.StatusEnded, room.StatusCancelled:
		default:
			return badFilter("status", fmt.Sprintf("unknown status %q", s))
		}
	}
	if len(f.Host) > MaxHostLen || strings.ContainsAny(f.Host, "/ ") {
		return badFilter("host", "host must be a host[:port]")
	}
	f.Host = strings.ToLower(f.Host)
	if len(f.Language) > MaxLangLen {
		return badFilter("language", "language tag too long")
	}
	if f.Creator != "" {
		if _, err := identity.ParseAgentID(f.Creator); err != nil {
			return badFilter("creator", "creator is not an Agent ID")
		}
	}
	return nil
}

// match reports whether the room passes f.
func (f *Filter) match(s *node.RoomSummary, hay string) bool {
	if len(f.Status) == 0 {
		if s.Status != room.StatusActive && s.Status != room.StatusScheduled {
			return false
		}
	} else {
		ok := false
		for _, st := range f.Status {
			ok = ok || st == s.Status
		}
		if !ok {
			return false
		}
	}
	for _, t := range f.Tags {
		ok := false
		for _, rt := range s.Tags {
			ok = ok || strings.EqualFold(rt, t)
		}
		if !ok {
			return false
		}
	}
	if f.Keyword != "" && !strings.Contains(hay, f.Keyword) {
		return false
	}
	return (f.Host == "" || strings.EqualFold(s.Host, f.Host)) &&
		(f.Language == "" || strings.EqualFold(s.Language, f.Language)) &&
		(f.Creator == "" || string(s.Creator) == f.Creator)
}

// haystack is what a keyword is looked for in.
func haystack(s *node.RoomSummary) string {
	return strings.ToLower(s.Topic + "\n" + s.Agenda + "\n" + strings.Join(s.Tags, "\n"))
}

// fingerprint covers what makes a "changed" item: status, topic, agenda,
// tags, language, visibility, times and member count. A new record alone
// (seq, head, last_active) is not a change.
func fingerprint(s *node.RoomSummary) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00%s\x00%q\x00%s\x00%s\x00%d\x00%d\x00%d\x00%s", s.Status, s.Topic, s.Agenda, s.Tags,
		s.Language, s.Visibility, s.StartTime, s.EndTime, s.Members, s.URL)
	return hex.EncodeToString(h.Sum(nil)[:12])
}
