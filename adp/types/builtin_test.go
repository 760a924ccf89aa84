package types

import (
	"slices"
	"strings"
	"testing"

	"github.com/adpnode/adpnode/adp"
)

func TestBuiltins(t *testing.T) {
	want := []struct {
		name      string
		kind      adp.Kind
		lifecycle bool
	}{
		{"room.create", "", true},
		{"room.update", "", true},
		{"room.join", adp.KindSignal, false},
		{"room.join.review", adp.KindSignal, false},
		{"room.leave", adp.KindSignal, false},
		{"room.member.role.update", adp.KindSignal, false},
		{"room.member.remove", adp.KindSignal, false},
		{"room.close", "", true},
		{"room.cancel", "", true},
		{"type.define", adp.KindControl, false},
		{"message.create", adp.KindMessage, false},
	}
	var names []string
	for _, w := range want {
		t.Run("§13.2 "+w.name, func(t *testing.T) {
			if !IsBuiltin(w.name) {
				t.Fatal("not builtin")
			}
			k, lc := BuiltinKind(w.name)
			if k != w.kind || lc != w.lifecycle {
				t.Fatalf("BuiltinKind = %q,%v want %q,%v", k, lc, w.kind, w.lifecycle)
			}
		})
		names = append(names, w.name)
	}
	if !slices.Equal(BuiltinNames(), names) {
		t.Fatalf("BuiltinNames order = %v", BuiltinNames())
	}
	for _, n := range []string{"reaction.create", "room", "message.update", ""} {
		if IsBuiltin(n) {
			t.Errorf("§13.2 %q reported builtin", n)
		}
		if k, lc := BuiltinKind(n); k != "" || lc {
			t.Errorf("§13.2 BuiltinKind(%q) = %q,%v", n, k, lc)
		}
	}
}

func TestValidTypeName(t *testing.T) {
	long := "a." + strings.Repeat("b", 126) // 128 chars
	cases := []struct {
		name   string
		in     string
		reason string // "" = valid
	}{
		{"§13.3 two segments", "review.finding", ""},
		{"§13.3 digits underscore hyphen", "x1.a_b-c.d9", ""},
		{"§13.3 128 chars", long, ""},
		{"§13.3 129 chars", long + "b", ReasonTypeNameTooLong},
		{"§13.3 one segment", "review", ReasonBadTypeName},
		{"§13.3 empty", "", ReasonBadTypeName},
		{"§13.3 uppercase", "Review.finding", ReasonBadTypeName},
		{"§13.3 segment starts with digit", "review.1finding", ReasonBadTypeName},
		{"§13.3 segment starts with underscore", "review._x", ReasonBadTypeName},
		{"§13.3 empty segment", "review..finding", ReasonBadTypeName},
		{"§13.3 leading dot", ".review.finding", ReasonBadTypeName},
		{"§13.3 trailing dot", "review.finding.", ReasonBadTypeName},
		{"§13.3 space", "review.fin ding", ReasonBadTypeName},
		{"§13.3 non-ascii", "review.fïnding", ReasonBadTypeName},
		{"§13.3 reserved prefix room.", "room.steer", ReasonReservedPrefix},
		{"§13.3 reserved prefix type.", "type.custom", ReasonReservedPrefix},
		{"§13.3 built-in message.create", "message.create", ReasonBuiltinType},
		{"§13.3 built-in room.join", "room.join", ReasonBuiltinType},
		{"§13.3 built-in type.define", "type.define", ReasonBuiltinType},
		{"§13.3 message. prefix is not reserved", "message.edit", ""},
		{"§13.3 roomx. is not reserved", "roomx.a", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := ValidTypeName(c.in)
			if c.reason == "" {
				wantCode(t, err, "", "")
				return
			}
			wantCode(t, err, adp.CodeInvalidEvent, c.reason)
		})
	}
}
