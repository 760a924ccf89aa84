package node

import (
	"bytes"
	"fmt"

	"github.com/adpnode/adpnode/adp/identity"
)

// What the host log (package hostlog) reads from the node to append the
// records it has not seen yet: every hosted room's head, and the record
// hashes of a seq range.

// RoomHeads calls fn with every hosted room's last seq until fn returns
// false.
func (n *Node) RoomHeads(fn func(roomID string, seq int64) bool) error {
	for _, hr := range n.roomList() {
		hr.mu.RLock()
		var seq int64
		switch {
		case hr.st != nil:
			seq = hr.st.Seq
		case hr.cold != nil:
			seq = hr.cold.Seq
		}
		hr.mu.RUnlock()
		if !fn(hr.id, seq) {
			return nil
		}
	}
	return nil
}

var hashField = []byte(`"hash":"`)

// RecordHashes returns the raw record hashes of up to limit records of a
// room with seq > after, in seq order.
func (n *Node) RecordHashes(roomID string, after int64, limit int) ([][32]byte, error) {
	recs, err := n.readRecords(roomID, after, limit)
	if err != nil {
		return nil, err
	}
	out := make([][32]byte, 0, len(recs))
	for _, r := range recs {
		// The record's own "hash" precedes the envelope (MarshalJSON's
		// field order); "pre_hash" does not match the quoted name.
		i := bytes.Index(r, hashField)
		if i < 0 {
			return nil, errCorruptRecord(roomID)
		}
		rest := r[i+len(hashField):]
		j := bytes.IndexByte(rest, '"')
		if j < 0 {
			return nil, errCorruptRecord(roomID)
		}
		b, err := identity.DecodeB64Len(string(rest[:j]), 32)
		if err != nil {
			return nil, errCorruptRecord(roomID)
		}
		out = append(out, [32]byte(b))
	}
	return out, nil
}

func errCorruptRecord(roomID string) error {
	return fmt.Errorf("stored record of room %s has no record hash", roomID)
}

// Locate returns the room and seq of the record with this record hash (or
// envelope hash: the log then finds a leaf that is not this hash, and
// answers that it holds no such record).
func (n *Node) Locate(recordHash [32]byte) (string, int64, bool, error) {
	return n.lookupEnvelope(recordHash)
}
