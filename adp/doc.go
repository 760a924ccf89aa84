// Package adp is the protocol kernel of the Agent Discourse Protocol 1.0: the
// error codes and vocabulary shared by its subpackages.
//
// The kernel is pure: no network, no disk, no goroutines and no clock reads.
// Time always comes in as a parameter, so the authoritative host, every
// mirror and the offline archive verifier run the same code and reach the
// same verdicts.
//
//   - identity: Agent IDs, strict Ed25519, strict I-JSON, JCS, envelopes, JWTs
//   - types:    type declarations, the registry, registered packs, schemas
//   - record:   server records, the record hash and chain checks
//   - room:     the room state machine (admission and Apply)
//   - archive:  archive manifests and offline verification
package adp
