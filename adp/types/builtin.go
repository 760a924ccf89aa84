package types

import (
	"strings"

	"github.com/adpnode/adpnode/adp"
)

// Built-in event type names (ADP §13.2).
const (
	TypeRoomCreate           = "room.create"
	TypeRoomUpdate           = "room.update"
	TypeRoomJoin             = "room.join"
	TypeRoomJoinReview       = "room.join.review"
	TypeRoomLeave            = "room.leave"
	TypeRoomMemberRoleUpdate = "room.member.role.update"
	TypeRoomMemberRemove     = "room.member.remove"
	TypeRoomClose            = "room.close"
	TypeRoomCancel           = "room.cancel"
	TypeTypeDefine           = "type.define"
	TypeMessageCreate        = "message.create"
)

type builtin struct {
	name      string
	kind      adp.Kind
	lifecycle bool
}

// builtins lists the eleven built-in types in the order of the §13.2 table.
var builtins = []builtin{
	{TypeRoomCreate, "", true},
	{TypeRoomUpdate, "", true},
	{TypeRoomJoin, adp.KindSignal, false},
	{TypeRoomJoinReview, adp.KindSignal, false},
	{TypeRoomLeave, adp.KindSignal, false},
	{TypeRoomMemberRoleUpdate, adp.KindSignal, false},
	{TypeRoomMemberRemove, adp.KindSignal, false},
	{TypeRoomClose, "", true},
	{TypeRoomCancel, "", true},
	{TypeTypeDefine, adp.KindControl, false},
	{TypeMessageCreate, adp.KindMessage, false},
}

// BuiltinNames returns the built-in type names in the order of ADP §13.2.
func BuiltinNames() []string {
	out := make([]string, len(builtins))
	for i, b := range builtins {
		out[i] = b.name
	}
	return out
}

// IsBuiltin reports whether name is one of the eleven built-in types (§13.2).
func IsBuiltin(name string) bool {
	for _, b := range builtins {
		if b.name == name {
			return true
		}
	}
	return false
}

// BuiltinKind returns the class of a built-in type (§13.2): its kind, or
// lifecycle=true with an empty kind for room.create, room.update, room.close
// and room.cancel (which advance the room head like non-signal writes). For a
// name that is not built in it returns ("", false).
func BuiltinKind(name string) (kind adp.Kind, lifecycle bool) {
	for _, b := range builtins {
		if b.name == name {
			return b.kind, b.lifecycle
		}
	}
	return "", false
}

// MaxTypeNameLength is the longest accepted custom type name.
const MaxTypeNameLength = 128

// ValidTypeName checks a custom event type name (§13.3): dot-separated
// lowercase segments, at least two, each matching [a-z][a-z0-9_-]*, at most
// 128 characters, not starting with "room." or "type." and not a built-in
// type. It returns an invalid_event error with data.reason on failure.
func ValidTypeName(name string) error {
	if len(name) > MaxTypeNameLength {
		return invalid(ReasonTypeNameTooLong, "type", "type name longer than 128 characters")
	}
	if IsBuiltin(name) {
		return invalid(ReasonBuiltinType, "type", "type name "+quote(name)+" is a built-in type")
	}
	if strings.HasPrefix(name, "room.") || strings.HasPrefix(name, "type.") {
		return invalid(ReasonReservedPrefix, "type", "type name "+quote(name)+" uses a reserved prefix")
	}
	segs := strings.Split(name, ".")
	if len(segs) < 2 {
		return invalid(ReasonBadTypeName, "type", "type name "+quote(name)+" needs at least two dot-separated segments")
	}
	for _, s := range segs {
		if !validSegment(s) {
			return invalid(ReasonBadTypeName, "type", "type name "+quote(name)+" must be dot-separated lowercase segments [a-z][a-z0-9_-]*")
		}
	}
	return nil
}

func validSegment(s string) bool {
	if s == "" || s[0] < 'a' || s[0] > 'z' {
		return false
	}
	for i := 1; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}
