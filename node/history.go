package node

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"

	"github.com/dgraph-io/badger/v4"

	"github.com/adpnode/adpnode/adp"
	"github.com/adpnode/adpnode/adp/identity"
	"github.com/adpnode/adpnode/adp/record"
)

// storeHistory is a hosted room's room.History, read from Badger: record
// hashes by seq come from the stored records, seqs by hash from the
// envelope index, which indexes each record's envelope hash and record hash
// in the transaction that stores the record. So a room's memory does not
// grow with its length; the latest record and the head are answered from
// the room state itself.
//
// A read that fails, and a stored record or index entry that does not
// parse, is an error (logged here, with its cause), never "absent": the
// kernel answers unavailable rather than judge an event on a damaged disk.
type storeHistory struct {
	db    *badger.DB
	room  string
	log   *slog.Logger
	fault *atomic.Bool // tests: while set, every read fails
}

// history returns room id's History, read from the node's store.
func (n *Node) history(id string) storeHistory {
	return storeHistory{n.db, id, n.log, &n.readFault}
}

// errDamaged marks stored data that was read but does not parse: damage,
// not a failed read.
var errDamaged = errors.New("stored data does not parse")

// errReadFault is the read failure tests inject (Node.readFault).
var errReadFault = errors.New("injected read fault")

// view is db.View, failing while a test injects read faults.
func (h storeHistory) view(fn func(txn *badger.Txn) error) error {
	if h.fault != nil && h.fault.Load() {
		return errReadFault
	}
	return h.db.View(fn)
}

func (h storeHistory) RecordHash(seq int64) ([32]byte, bool, error) {
	var out [32]byte
	ok := false
	err := h.view(func(txn *badger.Txn) error {
		item, err := txn.Get(recordKey(h.room, seq))
		if errors.Is(err, badger.ErrKeyNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		return item.Value(func(v []byte) error {
			if out, ok = recordHashOf(v); !ok {
				return fmt.Errorf("stored record: %w", errDamaged)
			}
			return nil
		})
	})
	if err != nil {
		return [32]byte{}, false, h.failed("read record", err, "seq", seq)
	}
	return out, ok, nil
}

func (h storeHistory) SeqOf(id [32]byte) (int64, bool, error) {
	var seq int64
	ok := false
	err := h.view(func(txn *badger.Txn) error {
		item, err := txn.Get(envelopeKey(id))
		if errors.Is(err, badger.ErrKeyNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		return item.Value(func(v []byte) error {
			room, s, valid := parseEnvelopeValue(v)
			if !valid {
				return fmt.Errorf("envelope index entry: %w", errDamaged)
			}
			seq, ok = s, room == h.room
			return nil
		})
	})
	if err != nil {
		return 0, false, h.failed("read envelope index", err)
	}
	if !ok {
		return 0, false, nil
	}
	return seq, true, nil
}

func (h storeHistory) failed(what string, err error, attrs ...any) error {
	err = fmt.Errorf("room %s: %s: %w", h.room, what, err)
	if h.log != nil {
		h.log.Error("room history read failed", append([]any{"room", h.room, "err", err}, attrs...)...)
	}
	return err
}

// storageUnavailable is what a client is told when the node could not read
// its store: nothing was judged, retry.
func storageUnavailable() *adp.Error {
	return &adp.Error{Code: adp.CodeUnavailable, Message: "the node could not read its store; nothing was accepted, retry later",
		Data: map[string]any{"reason": "storage_read"}}
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
