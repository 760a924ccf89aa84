package directory

import (
	"strings"
	"unicode/utf8"

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
// case-folded (Fold).
func Haystack(e *Entry) string {
	return Fold(e.Topic + "\n" + e.Agenda + "\n" + strings.Join(e.Tags, "\n"))
}

// Fold is the one case fold of directory matching: Fold(a) == Fold(b)
// exactly when strings.EqualFold(a, b), and a substring of a folded string
// is the fold of a substring. Each rune becomes the lower case of its upper
// case where that is in its simple case-folding orbit (Σ, σ and final ς
// all fold to σ; K and the Kelvin sign to k), else itself (İ, which
// EqualFold holds apart from i). strings.ToLower is not such a fold: it
// leaves ς and σ apart, which EqualFold holds equal.
func Fold(s string) string {
	ascii := true
	for i := 0; i < len(s); i++ {
		if c := s[i]; c >= utf8.RuneSelf || ('A' <= c && c <= 'Z') {
			ascii = false
			break
		}
	}
	if ascii {
		return s
	}
	return strings.Map(foldRune, s)
}

func foldRune(r rune) rune {
	if r < utf8.RuneSelf {
		if 'A' <= r && r <= 'Z' {
			return r + 'a' - 'A'
		}
		return r
	}
	one := string(r)
	f, n := utf8.DecodeRuneInString(strings.ToLower(strings.ToUpper(one)))
	if n > 0 && f != utf8.RuneError && strings.EqualFold(one, string(f)) {
		return f
	}
	return r
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
	if f.Keyword != "" && !strings.Contains(hay, Fold(f.Keyword)) {
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
