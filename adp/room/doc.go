// Package room is the ADP room state machine (§§6.1, 8–14).
//
// A State is built by applying server records in seq order. For a new
// envelope, Admit runs every room rule against the current state at a given
// time and returns an Admission or an *adp.Error carrying exactly the §20
// code; Commit applies an admitted envelope once the host has stored its
// record. Apply does both for a record that is already in a chain, with the
// record's received_at as the time, so replaying a chain rebuilds exactly
// the state the host had.
//
// Admit does not check the envelope's hash or signature (identity does), the
// live time window, nonces or rate limits (the host's node does): those are
// properties of the live write, not of the room.
package room
