// Package seal is the cryptography and the host-side shape rules of
// member-only rooms (docs/sealed-rooms.md).
//
// A room whose policy.extra.confidentiality is "member-only" carries its
// message.create content sealed: each member publishes an X25519 key in a
// signed seal.key event; a seal.epoch event carries a fresh 32-byte epoch key
// wrapped for every active member with HPKE (RFC 9180, crypto/hpke:
// DHKEM(X25519, HKDF-SHA256), HKDF-SHA256, ChaCha20-Poly1305); messages are
// sealed under the epoch key with XChaCha20-Poly1305 (random 24-byte nonce,
// additional data binding the room, the epoch and the sender). A custom
// event of kind message travels sealed the same way, its plaintext an
// EventContentType body {type, payload} that hides the type too (decision
// 23); Reader is a member's view of a room: it folds the records, opens
// sealed messages and events, and checks each opened event against the
// room as it was when the event was sent (SentAs.CheckEvent).
//
// The package is pure: no network, disk, goroutines or clock reads. Epoch
// keys and message nonces come from the caller's io.Reader (crypto/rand in
// production); the ephemeral key of each HPKE wrap comes from crypto/hpke
// (crypto/rand). The host uses only the shape and coverage rules (Parse*,
// RoomState, Check*); clients use the rest.
package seal
