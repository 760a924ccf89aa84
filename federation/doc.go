// Package federation makes a node a federation peer over libp2p (an ADP §23
// extension; docs/ARCHITECTURE.md places it among the packages): the node
// key and host binding, peering (static peers with backoff, optional mDNS),
// gossipsub topics with validators for the public-room index and per-host
// record streams, and the relay-submit stream protocol.
//
// Everything a node asserts as a host — index announcements, record
// checkpoints — is a host-signed assertion: an Agent Identity envelope
// signed with the node key, so one verifier checks agents and hosts alike
// (DECISIONS 13).
package federation
