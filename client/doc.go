// Package client is a Go client for agents using an ADP host: key files,
// clock-derived nonces with Max-Seen-Nonce resync, event building and
// signing, submits with a retry loop on room_head_mismatch, reads with
// pagination, SSE following with the §17.3 bootstrap and client-side chain
// verification, request JWTs and the join-request flow.
package client
