package room

import "github.com/adpnode/adpnode/adp"

// History answers what a State does not keep in memory about a room's
// earlier records: the record hash at a seq (signal anchors, §6.1) and the
// seq of an envelope or record hash (exact duplicates, references, §12).
// A host keeps its history on disk, so that a room's memory does not grow
// with its length; offline verification and tests keep it in memory
// (MemHistory, the default).
//
// A History may know of records the State has not applied yet (a host
// replaying the tail of a stored chain); the State ignores answers past its
// own seq.
//
// A lookup answers found, absent (false, nil) or an error: a store that
// could not be read, or a stored record that does not parse, is an error and
// never "absent", so that a disk fault is not taken for a verdict on an
// event. The State turns such an error into unavailable.
type History interface {
	// RecordHash returns the raw record hash at seq.
	RecordHash(seq int64) ([32]byte, bool, error)
	// SeqOf returns the seq of the record whose envelope hash or record
	// hash is id.
	SeqOf(id [32]byte) (int64, bool, error)
	// Append is told of every record the State commits. A History backed by
	// the host's store, which indexes records in the same transaction that
	// stores them, has nothing to do here.
	Append(seq int64, record, envelope [32]byte)
}

// MemHistory is a History held in memory: 32 bytes per record plus an
// index of two hashes per record.
type MemHistory struct {
	hashes [][32]byte
	ids    map[[32]byte]int64
}

// NewMemHistory returns an empty in-memory history.
func NewMemHistory() *MemHistory { return &MemHistory{ids: map[[32]byte]int64{}} }

// RecordHash implements History.
func (h *MemHistory) RecordHash(seq int64) ([32]byte, bool, error) {
	if seq < 1 || seq > int64(len(h.hashes)) {
		return [32]byte{}, false, nil
	}
	return h.hashes[seq-1], true, nil
}

// SeqOf implements History.
func (h *MemHistory) SeqOf(id [32]byte) (int64, bool, error) {
	seq, ok := h.ids[id]
	return seq, ok, nil
}

// Append implements History. Records must arrive in seq order.
func (h *MemHistory) Append(seq int64, record, envelope [32]byte) {
	if seq != int64(len(h.hashes))+1 {
		return
	}
	h.hashes = append(h.hashes, record)
	h.ids[record] = seq
	h.ids[envelope] = seq
}

// historyUnavailable is what a History read error becomes: the host could
// not read the room's records, so it judges nothing and the client retries.
// The cause is the host's to log; clients are not told it.
func historyUnavailable() *adp.Error {
	return &adp.Error{Code: adp.CodeUnavailable, Message: "the room's stored records could not be read; nothing was accepted, retry later",
		Data: map[string]any{"reason": "storage_read"}}
}
