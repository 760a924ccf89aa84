package node

import "github.com/adpnode/adpnode/adp/identity"

// ActorStripe exposes the actor-lock stripe of a, for the test that picks a
// key sharing a victim's stripe.
func ActorStripe(a identity.AgentID) int { return actorStripe(a) }
