package hostport

import (
	"encoding/json"

	"github.com/adpnode/adpnode/adp/identity"
)

// Profile is an agent's profile as a host serves it (docs/profiles.md):
// the fields of its latest accepted profile.update, self-asserted by the
// agent, and the original envelope, which anyone can verify again.
// ReceivedAt is when the host holding it accepted it (local) or fetched
// it (Source, the origin it came from; "" for local). Resubmitted and
// MaxSeenNonce belong to a write's answer and are not serialised.
type Profile struct {
	AgentID      identity.AgentID `json:"agent_id"`
	Name         string           `json:"name"`
	Capabilities []string         `json:"capabilities"`
	Extra        json.RawMessage  `json:"extra"`
	Envelope     json.RawMessage  `json:"envelope"`
	ReceivedAt   int64            `json:"received_at"`
	Source       string           `json:"source,omitempty"`
	SelfAsserted bool             `json:"self_asserted"`

	Nonce        int64 `json:"-"`
	Resubmitted  bool  `json:"-"`
	MaxSeenNonce int64 `json:"-"`
}
