package directory

import "github.com/adpnode/adpnode/adp"

// Scope is which rooms a directory read covers.
type Scope string

// The scopes of GET /v1/rooms/public.
const (
	ScopeLocal     Scope = "local"     // this host's rooms
	ScopeFederated Scope = "federated" // this host's and verified remote hosts' rooms
)

// ParseScope reads the scope parameter: "" is federated, and federated is
// local where the host does not federate.
func ParseScope(s string, federates bool) (Scope, error) {
	switch Scope(s) {
	case "", ScopeFederated:
		if !federates {
			return ScopeLocal, nil
		}
		return ScopeFederated, nil
	case ScopeLocal:
		return ScopeLocal, nil
	}
	return "", adp.Reason(adp.CodeInvalidRequest, "scope", "scope must be local or federated")
}
