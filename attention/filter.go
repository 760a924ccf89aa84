package attention

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/adpnode/adpnode/adp"
	"github.com/adpnode/adpnode/adp/identity"
	"github.com/adpnode/adpnode/adp/room"
	"github.com/adpnode/adpnode/directory"
)

// Filter selects directory rooms: the directory's filter (same matching
// as GET /v1/rooms/public), without its start and end bounds, which a
// subscription does not take.
type Filter = directory.Filter

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

// normalizeFilter checks f and case-folds (directory.Fold) what is matched
// case-insensitively, the fold the matching and the tag index use.
func normalizeFilter(f *Filter) error {
	if len(f.Keyword) > MaxKeywordLen {
		return badFilter("keyword", fmt.Sprintf("keyword exceeds %d bytes", MaxKeywordLen))
	}
	for field, v := range map[string]string{"keyword": f.Keyword, "host": f.Host, "language": f.Language, "creator": f.Creator} {
		if hasControl(v) {
			return badFilter(field, field+" holds a control character")
		}
	}
	f.Keyword = directory.Fold(strings.TrimSpace(f.Keyword))
	if len(f.Tags) > MaxTags {
		return badFilter("tags", fmt.Sprintf("at most %d tags", MaxTags))
	}
	for i, t := range f.Tags {
		if hasControl(t) {
			return badFilter("tags", "a tag holds a control character")
		}
		t = directory.Fold(strings.TrimSpace(t))
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
	if f.StartsAfter != 0 {
		return badFilter("starts_after", "a subscription filter has no starts_after")
	}
	if f.EndsBefore != 0 {
		return badFilter("ends_before", "a subscription filter has no ends_before")
	}
	return nil
}

// hasControl reports whether s holds a C0 control character or DEL (NUL
// included: JSON lets "\u0000" through).
func hasControl(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] == 0x7f {
			return true
		}
	}
	return false
}

// fingerprint covers what makes a "changed" item: status, topic, agenda,
// tags, language, visibility, times and member count. A new record alone
// (seq, head, last_active) is not a change.
func fingerprint(s *directory.Entry) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00%s\x00%q\x00%s\x00%s\x00%d\x00%d\x00%d\x00%s", s.Status, s.Topic, s.Agenda, s.Tags,
		s.Language, s.Visibility, s.StartTime, s.EndTime, s.Members, s.URL)
	return hex.EncodeToString(h.Sum(nil)[:12])
}
