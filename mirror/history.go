package mirror

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/dgraph-io/badger/v4"

	"github.com/adpnode/adpnode/adp/identity"
)

// roomHistory is a mirrored room's room.History, read from Badger, so that
// a mirror's memory does not grow with the chains it holds: record hashes
// by seq come from the stored records (m/r/...), seqs by envelope or
// record hash from the hash index (m/x/...), written in the same
// transaction as the record.
//
// A mirror stores records through the group committer, after the kernel
// has applied them; until a record is durable its hashes are answered
// from a small overlay, emptied as the committer reports writes done. The
// overlay holds at most what is queued for writing.
//
// An index entry is only a pointer: SeqOf answers it only if the stored
// record at that seq carries the hash asked about.
type roomHistory struct {
	db *badger.DB
	rk string

	mu   sync.Mutex
	pend []pendingHash      // applied, not yet durable, consecutive seqs
	ids  map[[32]byte]int64 // envelope and record hashes of pend

	failReads atomic.Bool  // tests: every store read fails
	failed    atomic.Int64 // tests: reads failed so far
}

// errReadFault is the read failure tests inject (failReads).
var errReadFault = errors.New("injected read fault")

// view is db.View, failing while a test injects read faults.
func (h *roomHistory) view(fn func(txn *badger.Txn) error) error {
	if h.failReads.Load() {
		h.failed.Add(1)
		return errReadFault
	}
	return h.db.View(fn)
}

type pendingHash struct {
	seq      int64
	rec, env [32]byte
}

func newRoomHistory(db *badger.DB, rk string) *roomHistory {
	return &roomHistory{db: db, rk: rk, ids: map[[32]byte]int64{}}
}

// hashKey is the index key of an envelope or record hash of a room.
func hashKey(rk string, h [32]byte) []byte {
	k := make([]byte, 0, len(pfxHash)+len(rk)+1+32)
	k = append(k, pfxHash...)
	k = append(k, rk...)
	k = append(k, '/')
	return append(k, h[:]...)
}

func seqValue(seq int64) []byte { return binary.BigEndian.AppendUint64(nil, uint64(seq)) }

// Append implements room.History: the record is remembered until durable.
func (h *roomHistory) Append(seq int64, rec, env [32]byte) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if n := len(h.pend); n > 0 && seq != h.pend[n-1].seq+1 {
		// Not the next record: the overlay no longer continues (a bug
		// upstream); start over rather than answer wrongly by position.
		h.resetLocked()
	}
	h.pend = append(h.pend, pendingHash{seq, rec, env})
	h.ids[rec] = seq
	h.ids[env] = seq
}

// durable drops the overlay's records up to seq: they are stored, hash
// index and all.
func (h *roomHistory) durable(seq int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	i := 0
	for i < len(h.pend) && h.pend[i].seq <= seq {
		p := h.pend[i]
		if h.ids[p.rec] == p.seq {
			delete(h.ids, p.rec)
		}
		if h.ids[p.env] == p.seq {
			delete(h.ids, p.env)
		}
		i++
	}
	h.pend = h.pend[i:]
	if len(h.pend) == 0 {
		// A map never shrinks: a burst of writes must not leave its
		// buckets behind.
		h.resetLocked()
	}
}

func (h *roomHistory) resetLocked() {
	h.pend = nil
	h.ids = map[[32]byte]int64{}
}

// pending reports how many records the overlay holds.
func (h *roomHistory) pending() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.pend)
}

// RecordHash implements room.History. A store that cannot be read, or a
// stored record that does not parse, is an error, never "absent".
func (h *roomHistory) RecordHash(seq int64) ([32]byte, bool, error) {
	h.mu.Lock()
	if n := len(h.pend); n > 0 && seq >= h.pend[0].seq && seq <= h.pend[n-1].seq {
		out := h.pend[seq-h.pend[0].seq].rec
		h.mu.Unlock()
		return out, true, nil
	}
	h.mu.Unlock()
	hashes, ok, err := h.storedHashes(seq)
	return hashes.rec, ok, err
}

// SeqOf implements room.History.
func (h *roomHistory) SeqOf(id [32]byte) (int64, bool, error) {
	h.mu.Lock()
	seq, ok := h.ids[id]
	h.mu.Unlock()
	if ok {
		return seq, true, nil
	}
	err := h.view(func(txn *badger.Txn) error {
		item, err := txn.Get(hashKey(h.rk, id))
		if errors.Is(err, badger.ErrKeyNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		return item.Value(func(v []byte) error {
			if len(v) == 8 {
				seq, ok = int64(binary.BigEndian.Uint64(v)), true
			}
			return nil
		})
	})
	if err != nil {
		return 0, false, fmt.Errorf("mirror history %s: read hash index: %w", h.rk, err)
	}
	if !ok {
		return 0, false, nil
	}
	// The entry is only a pointer: the record it names must carry id.
	got, found, err := h.storedHashes(seq)
	if err != nil {
		return 0, false, err
	}
	if !found || (got.rec != id && got.env != id) {
		return 0, false, nil
	}
	return seq, true, nil
}

// storedHashes reads the record and envelope hashes of the stored record
// at seq: absent when there is none, an error when it cannot be read or
// does not parse.
func (h *roomHistory) storedHashes(seq int64) (pendingHash, bool, error) {
	var out pendingHash
	ok := false
	err := h.view(func(txn *badger.Txn) error {
		item, err := txn.Get(seqKey(pfxRec, h.rk, seq))
		if errors.Is(err, badger.ErrKeyNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		return item.Value(func(v []byte) error {
			if out, ok = parseHashes(v); !ok {
				return errors.New("stored record does not parse")
			}
			out.seq = seq
			return nil
		})
	})
	if err != nil {
		return pendingHash{}, false, fmt.Errorf("mirror history %s: read record %d: %w", h.rk, seq, err)
	}
	return out, ok, nil
}

// parseHashes extracts a stored record's hash and its envelope's hash
// (the record was verified before it was stored; one that does not parse
// answers false).
func parseHashes(raw []byte) (pendingHash, bool) {
	var r struct {
		Hash     string `json:"hash"`
		Envelope struct {
			Hash string `json:"hash"`
		} `json:"envelope"`
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		return pendingHash{}, false
	}
	rec, err := identity.DecodeB64Len(r.Hash, 32)
	if err != nil {
		return pendingHash{}, false
	}
	env, err := identity.DecodeB64Len(r.Envelope.Hash, 32)
	if err != nil {
		return pendingHash{}, false
	}
	return pendingHash{rec: [32]byte(rec), env: [32]byte(env)}, true
}
