// Package node is the authoritative ADP host: the accept pipeline, a
// per-room sequencer with an atomic head CAS, durable Badger storage with
// group commit, start-up recovery by verified replay, the lifecycle
// scheduler, quotas, the nonce cache, join requests, agent status, live
// fan-out and archives.
//
// It knows no HTTP and no libp2p. It reads the clock (the kernel never
// does) and hands the time to the kernel as a parameter.
package node
