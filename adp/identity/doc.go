// Package identity implements the Agent Identity 1.0 layer that ADP builds on:
// Agent IDs (did:agent:), canonical unpadded base64url, strict Ed25519
// verification, strict I-JSON parsing, JCS (RFC 8785) canonicalization, the
// closed event object, envelopes, request JWTs and the client nonce rules.
//
// The package is pure: no network, no disk, no goroutines and no clock reads.
// Every time value is a parameter. Errors returned to callers are *adp.Error
// values carrying the Identity error code, except CheckJSON, ParseJSON and
// Canonicalize, which return a *JSONError that callers wrap into the code that
// fits their context.
//
// What this package does not check: protocol values, the time window,
// nonce freshness, exact resubmission and every room-level rule (room_id,
// base_seq/base_hash anchoring, mentions validity and count, types, schemas,
// permissions). Those belong to the room layer.
package identity
