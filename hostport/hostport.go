// Package hostport holds the values a host shares with the layers above
// it (federation, mirrors, attention, metrics, the HTTP wire): the outcome
// of a write and what the host tells its listeners. The interfaces those
// layers need of a host are declared where they are used
// (federation.Host, mirror.Host, metrics.Source, attention.Host); the
// concrete host (package node) is known only to the composition root
// (stack) and the commands.
package hostport

import (
	"github.com/adpnode/adpnode/adp/record"
	"github.com/adpnode/adpnode/adp/room"
)

// Result is the outcome of an accepted (or exactly resubmitted) write.
type Result struct {
	Record *record.Record
	// RecordJSON is Record's JSON as stored and streamed (nil for a
	// resubmission): the answer reuses it instead of encoding it again.
	RecordJSON []byte
	// Created is set for room.create: answer with the §9 shape.
	Created bool
	Status  room.Status
	URL     string
	// Resubmitted is set when the envelope had already been accepted and
	// this is the original acceptance (Identity §9).
	Resubmitted bool
	// MaxSeenNonce is the actor's effective maximum nonce after the write.
	MaxSeenNonce int64
}

// RoomHead is a hosted room's latest seq and when its latest record was
// received (Unix ms).
type RoomHead struct {
	ID         string
	Seq        int64
	LastActive int64
}
