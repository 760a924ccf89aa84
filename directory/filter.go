package directory

import (
	"strings"

	"github.com/adpnode/adpnode/adp/room"
)

// Filter selects directory entries (§18). Empty fields match everything;
// Status empty means active and scheduled. The JSON names are those of an
// attention subscription's filter.
type Filter struct {
	Keyword string `json:"keyword,omitempty"`
	// Tags: every tag must be on the room (case-insensitively).
	Tags     []string      `json:"tags,omitempty"`
	Status   []room.Status `json:"status,omitempty"`
	Host     string        `json:"host,omitempty"`
	Language string        `json:"language,omitempty"`
	Creator  string        `json:"creator,omitempty"`
	// StartsAfter and EndsBefore (Unix ms, 0 = unset) bound the room's
	// scheduled start and end, exclusively.
	StartsAfter int64 `json:"starts_after,omitempty"`
	EndsBefore  int64 `json:"ends_before,omitempty"`
}

// Haystack is the text a keyword is looked for in: topic, agenda and tags,
// lower-cased.
func Haystack(e *Entry) string {
	return strings.ToLower(e.Topic + "\n" + e.Agenda + "\n" + strings.Join(e.Tags, "\n"))
}

// Match reports whether e passes the filter.
func (f *Filter) Match(e *Entry) bool {
	if f.Keyword == "" {
		return f.MatchText(e, "")
	}
	return f.MatchText(e, Haystack(e))
}

// MatchText is Match with the entry's Haystack already computed (callers
// matching many filters against one entry compute it once).
func (f *Filter) MatchText(e *Entry, hay string) bool {
	if !f.matchStatus(e.Status) {
		return false
	}
	for _, t := range f.Tags {
		if !hasTag(e.Tags, t) {
			return false
		}
	}
	if f.Keyword != "" && !strings.Contains(hay, strings.ToLower(f.Keyword)) {
		return false
	}
	return (f.Host == "" || strings.EqualFold(e.Host, f.Host)) &&
		(f.Language == "" || strings.EqualFold(e.Language, f.Language)) &&
		(f.Creator == "" || string(e.Creator) == f.Creator) &&
		(f.StartsAfter == 0 || e.StartTime > f.StartsAfter) &&
		(f.EndsBefore == 0 || e.EndTime < f.EndsBefore)
}

func (f *Filter) matchStatus(s room.Status) bool {
	if len(f.Status) == 0 {
		return s == room.StatusActive || s == room.StatusScheduled
	}
	for _, st := range f.Status {
		if st == s {
			return true
		}
	}
	return false
}

func hasTag(tags []string, t string) bool {
	for _, rt := range tags {
		if strings.EqualFold(rt, t) {
			return true
		}
	}
	return false
}
