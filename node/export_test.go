package node

import "github.com/adpnode/adpnode/adp/identity"

// ActorStripe exposes the actor-lock stripe of a, for the test that picks a
// key sharing a victim's stripe.
func ActorStripe(a identity.AgentID) int { return actorStripe(a) }

// HoldCold keeps ended rooms' states in memory while on, so a test can read
// an ended room hot and then cold.
func (n *Node) HoldCold(on bool) { n.holdCold.Store(on) }

// EvictEnded makes every finished terminal room cold now.
func (n *Node) EvictEnded() { n.evictFinished() }

// FailStoreReads makes every room history read fail while on, as a disk
// that stopped answering reads would.
func (n *Node) FailStoreReads(on bool) { n.readFault.Store(on) }

// PruneFeed prunes the change feed now, keeping at most keep entries.
func (n *Node) PruneFeed(keep uint64) error { return n.pruneFeed(keep) }
