package types

import (
	"fmt"

	"github.com/adpnode/adpnode/adp"
)

// Registry holds the type definitions in effect in one room (§13.4): the
// latest definition of each custom type. The zero value is not usable; use
// NewRegistry. A Registry is not safe for concurrent mutation.
type Registry struct {
	defs  map[string]*Definition
	order []string // type names in order of first definition
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry {
	return &Registry{defs: map[string]*Definition{}}
}

// Define adds or redefines types atomically: either every definition takes
// effect or none does. Definitions apply in order, so with repeated names
// the last wins. A redefinition must keep the kind (invalid_event,
// data.reason "kind_change"); the number of distinct types must stay at most
// lim.MaxTypes (invalid_event, data.limit "max_types").
func (r *Registry) Define(defs []*Definition, lim Limits) error {
	lim = lim.norm()
	staged := map[string]*Definition{}
	var added []string
	for i, d := range defs {
		if !d.built() {
			return adp.Errorf(adp.CodeInternal, "types: definition %d was not built by this package", i)
		}
		prev, ok := staged[d.Type]
		if !ok {
			prev, ok = r.defs[d.Type]
		}
		if ok && prev.Kind != d.Kind {
			e := invalid(ReasonKindChange, "kind", fmt.Sprintf("type %s is %s; a redefinition must keep its kind, not change it to %s", quote(d.Type), prev.Kind, d.Kind))
			e.Data["type"] = d.Type
			return e
		}
		if !ok {
			added = append(added, d.Type)
		}
		staged[d.Type] = d
	}
	if n := len(r.defs) + len(added); len(added) > 0 && n > lim.MaxTypes {
		e := invalid(ReasonMaxTypes, "", fmt.Sprintf("room would have %d types, limit %d", n, lim.MaxTypes))
		e.Data["limit"] = "max_types"
		return e
	}
	for name, d := range staged {
		r.defs[name] = d
	}
	r.order = append(r.order, added...)
	return nil
}

// Lookup returns the definition in effect for name.
func (r *Registry) Lookup(name string) (*Definition, bool) {
	d, ok := r.defs[name]
	return d, ok
}

// List returns the definitions in effect, in order of first definition.
func (r *Registry) List() []*Definition {
	out := make([]*Definition, len(r.order))
	for i, n := range r.order {
		out[i] = r.defs[n]
	}
	return out
}

// Len returns the number of distinct types defined.
func (r *Registry) Len() int { return len(r.order) }

// Clone returns an independent copy sharing the immutable definitions.
func (r *Registry) Clone() *Registry {
	c := &Registry{defs: make(map[string]*Definition, len(r.defs)), order: append([]string(nil), r.order...)}
	for k, v := range r.defs {
		c.defs[k] = v
	}
	return c
}

// RestoreRegistry rebuilds a registry from its List: the definitions in
// effect, in order of first definition, as a snapshot stored them. Limits
// were enforced when the definitions were accepted and are not checked
// again; a repeated type name is refused.
func RestoreRegistry(defs []*Definition) (*Registry, error) {
	r := &Registry{defs: make(map[string]*Definition, len(defs))}
	for _, d := range defs {
		if !d.built() {
			return nil, fmt.Errorf("types: restored definition was not built by this package")
		}
		if _, dup := r.defs[d.Type]; dup {
			return nil, fmt.Errorf("types: restored registry repeats type %q", d.Type)
		}
		r.defs[d.Type] = d
		r.order = append(r.order, d.Type)
	}
	return r, nil
}
