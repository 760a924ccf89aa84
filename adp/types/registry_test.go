package types

import (
	"fmt"
	"slices"
	"testing"

	"github.com/adpnode/adpnode/adp"
)

func def(t *testing.T, name, kind string, extra ...any) *Definition {
	t.Helper()
	in := with(append([]any{"type", name, "kind", kind}, extra...)...)
	d, err := ParseDefinition(js(in), DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestRegistry(t *testing.T) {
	lim := DefaultLimits()
	t.Run("§13.4 define and look up", func(t *testing.T) {
		r := NewRegistry()
		a, b := def(t, "a.one", "message"), def(t, "a.two", "signal")
		wantCode(t, r.Define([]*Definition{a, b}, lim), "", "")
		if got, ok := r.Lookup("a.two"); !ok || got != b {
			t.Fatal("lookup")
		}
		if _, ok := r.Lookup("a.three"); ok {
			t.Fatal("lookup of undefined type")
		}
		if r.Len() != 2 || !slices.Equal(names(r.List()), []string{"a.one", "a.two"}) {
			t.Fatalf("list %v", names(r.List()))
		}
	})
	t.Run("§13.4 redefinition keeping kind; latest governs; order of first definition", func(t *testing.T) {
		r := NewRegistry()
		r.Define([]*Definition{def(t, "a.one", "message"), def(t, "a.two", "signal")}, lim)
		v2 := def(t, "a.one", "message", "version", "2", "schema", map[string]any{"type": "object"})
		wantCode(t, r.Define([]*Definition{v2}, lim), "", "")
		if got, _ := r.Lookup("a.one"); got != v2 {
			t.Fatal("latest definition does not govern")
		}
		if r.Len() != 2 || !slices.Equal(names(r.List()), []string{"a.one", "a.two"}) {
			t.Fatalf("list %v", names(r.List()))
		}
	})
	t.Run("§13.4 redefinition changing kind rejected", func(t *testing.T) {
		r := NewRegistry()
		r.Define([]*Definition{def(t, "a.one", "message")}, lim)
		err := r.Define([]*Definition{def(t, "a.one", "control")}, lim)
		wantCode(t, err, adp.CodeInvalidEvent, ReasonKindChange)
	})
	t.Run("§13.4 kind change within one call rejected, nothing applied", func(t *testing.T) {
		r := NewRegistry()
		err := r.Define([]*Definition{def(t, "a.new", "message"), def(t, "a.other", "signal"), def(t, "a.new", "signal")}, lim)
		wantCode(t, err, adp.CodeInvalidEvent, ReasonKindChange)
		if r.Len() != 0 {
			t.Fatal("partial define")
		}
	})
	t.Run("§13.4 duplicate names in one call: last wins", func(t *testing.T) {
		r := NewRegistry()
		first, last := def(t, "a.one", "message"), def(t, "a.one", "message", "version", "2")
		wantCode(t, r.Define([]*Definition{first, last}, lim), "", "")
		if got, _ := r.Lookup("a.one"); got != last || r.Len() != 1 {
			t.Fatal("last definition did not win")
		}
	})
	t.Run("§13.4 disabled status kept in registry", func(t *testing.T) {
		r := NewRegistry()
		r.Define([]*Definition{def(t, "a.one", "message")}, lim)
		wantCode(t, r.Define([]*Definition{def(t, "a.one", "message", "status", "disabled")}, lim), "", "")
		got, ok := r.Lookup("a.one")
		if !ok || got.Status != StatusDisabled || got.Usable() {
			t.Fatalf("disabled definition: %v %+v", ok, got)
		}
	})
	t.Run("§21 max types exceeded", func(t *testing.T) {
		r := NewRegistry()
		var defs []*Definition
		for i := 0; i < 64; i++ {
			defs = append(defs, def(t, fmt.Sprintf("t.n%d", i), "signal"))
		}
		wantCode(t, r.Define(defs, lim), "", "")
		err := r.Define([]*Definition{def(t, "t.extra", "signal")}, lim)
		wantCode(t, err, adp.CodeInvalidEvent, ReasonMaxTypes)
		if err.(*adp.Error).Data["limit"] != "max_types" {
			t.Fatalf("data %v", err.(*adp.Error).Data)
		}
		// Redefining an existing type at the limit is still allowed.
		wantCode(t, r.Define([]*Definition{def(t, "t.n3", "signal", "status", "deprecated")}, lim), "", "")
		if r.Len() != 64 {
			t.Fatal("len")
		}
	})
	t.Run("§21 max types is atomic", func(t *testing.T) {
		r := NewRegistry()
		err := r.Define([]*Definition{def(t, "a.one", "message"), def(t, "a.two", "message"), def(t, "a.three", "message")}, Limits{MaxTypes: 2})
		wantCode(t, err, adp.CodeInvalidEvent, ReasonMaxTypes)
		if r.Len() != 0 {
			t.Fatal("partial define")
		}
	})
	t.Run("§13.5 whole registered packs fit", func(t *testing.T) {
		r := NewRegistry()
		for _, id := range RegisteredPackIDs() {
			defs, _, err := ParseDeclaration([]byte(`{"use":"`+id+`"}`), nil, lim)
			if err != nil {
				t.Fatal(err)
			}
			wantCode(t, r.Define(defs, lim), "", "")
		}
		if r.Len() != 14 {
			t.Fatalf("len %d", r.Len())
		}
	})
	t.Run("§13.4 Clone independence", func(t *testing.T) {
		r := NewRegistry()
		a := def(t, "a.one", "message")
		r.Define([]*Definition{a}, lim)
		c := r.Clone()
		wantCode(t, c.Define([]*Definition{def(t, "a.two", "signal"), def(t, "a.one", "message", "version", "9")}, lim), "", "")
		if r.Len() != 1 || c.Len() != 2 {
			t.Fatalf("len %d %d", r.Len(), c.Len())
		}
		if got, _ := r.Lookup("a.one"); got != a {
			t.Fatal("original changed by clone")
		}
		wantCode(t, r.Define([]*Definition{def(t, "a.three", "control")}, lim), "", "")
		if _, ok := c.Lookup("a.three"); ok {
			t.Fatal("clone changed by original")
		}
	})
	t.Run("§13.4 foreign definition rejected", func(t *testing.T) {
		err := NewRegistry().Define([]*Definition{{Type: "a.b", Kind: adp.KindMessage}}, lim)
		wantCode(t, err, adp.CodeInternal, "")
	})
}
