package node

import (
	"encoding/json"

	"github.com/dgraph-io/badger/v4"

	"github.com/adpnode/adpnode/adp/identity"
	"github.com/adpnode/adpnode/adp/record"
)

// storeHistory is a hosted room's room.History, read from Badger: record
// hashes by seq come from the stored records, seqs by hash from the
// envelope index, which indexes each record's envelope hash and record hash
// in the transaction that stores the record. So a room's memory does not
// grow with its length; the latest record and the head are answered from
// the room state itself.
type storeHistory struct {
	db   *badger.DB
	room string
}

func (h storeHistory) RecordHash(seq int64) ([32]byte, bool) {
	var out [32]byte
	ok := false
	_ = h.db.View(func(txn *badger.Txn) error {
		item, err := txn.Get(recordKey(h.room, seq))
		if err != nil {
			return err
		}
		return item.Value(func(v []byte) error {
			out, ok = recordHashOf(v)
			return nil
		})
	})
	return out, ok
}

func (h storeHistory) SeqOf(id [32]byte) (int64, bool) {
	var seq int64
	ok := false
	_ = h.db.View(func(txn *badger.Txn) error {
		item, err := txn.Get(envelopeKey(id))
		if err != nil {
			return err
		}
		return item.Value(func(v []byte) error {
			var room string
			room, seq, ok = parseEnvelopeValue(v)
			ok = ok && room == h.room
			return nil
		})
	})
	return seq, ok
}

func (storeHistory) Append(int64, [32]byte, [32]byte) {}

// recordHashOf extracts the hash of a stored record (written by this node,
// so its shape is known good; a record that does not parse answers false).
func recordHashOf(raw []byte) ([32]byte, bool) {
	var r struct {
		Hash string `json:"hash"`
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		return [32]byte{}, false
	}
	b, err := identity.DecodeB64Len(r.Hash, 32)
	if err != nil {
		return [32]byte{}, false
	}
	return [32]byte(b), true
}

// recordDigest is the raw record hash of a record this node just built.
func recordDigest(rec *record.Record) [32]byte {
	b, _ := identity.DecodeB64Len(rec.Hash, 32)
	return [32]byte(b)
}
