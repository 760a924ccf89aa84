package hostlog

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/dgraph-io/badger/v4"
)

// The journal maps leaf indices to records and records to leaf indices
// (key and value shapes: internal/storelayout, docs/storage.md).
//
//   - Parts (l/p/<part>) hold the leaves of partSize consecutive indices,
//     packed: index → leaf is one Get and a walk of at most partSize entries.
//   - Runs (l/r/<room>/<last seq>) say that a room's seqs first…last sit at
//     consecutive indices from a first index: record → index is the node's
//     hash → (room, seq) lookup, one seek, and a check of the leaf found.
//
// A chunk's leaves are grouped by room before they get their indices, so a
// round over R busy rooms writes about chunk/partSize parts and R runs,
// where journal v1 wrote two keys per leaf (l/i per index, l/h per hash)
// and added half again to the skiplist inserts of Badger's one writer
// goroutine, which every node write waits for. A chunk's parts,
// runs, watermarks and the journal length move in one transaction of a
// few hundred keys: nothing of a chunk is ever durable without the rest.

// partSize is the leaves per journal part.
const partSize = 256

func partKey(p uint64) []byte { return binary.BigEndian.AppendUint64([]byte(pfxPart), p) }

func runPrefix(roomID string) []byte {
	k := make([]byte, 0, len(pfxRun)+len(roomID)+9)
	return append(append(append(k, pfxRun...), roomID...), '/')
}

func runKey(roomID string, last int64) []byte {
	return binary.BigEndian.AppendUint64(runPrefix(roomID), uint64(last))
}

// appendEntry appends a part entry: hash:32 | seq:8 BE | len(room):uvarint | room.
func appendEntry(b []byte, lf Leaf) []byte {
	b = append(b, lf.Hash[:]...)
	b = binary.BigEndian.AppendUint64(b, uint64(lf.Seq))
	b = binary.AppendUvarint(b, uint64(len(lf.RoomID)))
	return append(b, lf.RoomID...)
}

var errPart = errors.New("hostlog: journal part is malformed")

// nextEntry splits the first entry off a part value.
func nextEntry(v []byte) (hash, seq, room, rest []byte, err error) {
	if len(v) < 41 {
		return nil, nil, nil, nil, errPart
	}
	n, w := binary.Uvarint(v[40:])
	if w <= 0 || n > uint64(len(v)-40-w) {
		return nil, nil, nil, nil, errPart
	}
	end := 40 + w + int(n)
	return v[:32], v[32:40], v[40+w : end], v[end:], nil
}

// entryAt decodes entry k of a part value (false: the part is shorter).
func entryAt(v []byte, k int) (Leaf, bool, error) {
	for i := 0; len(v) > 0; i++ {
		hash, seq, room, rest, err := nextEntry(v)
		if err != nil {
			return Leaf{}, false, err
		}
		if i == k {
			return Leaf{Hash: [32]byte(hash), Seq: int64(binary.BigEndian.Uint64(seq)), RoomID: string(room)}, true, nil
		}
		v = rest
	}
	return Leaf{}, false, nil
}

// entriesSpan returns the bytes of the first n entries of a part value.
func entriesSpan(v []byte, n int) ([]byte, error) {
	rest := v
	for range n {
		var err error
		if _, _, _, rest, err = nextEntry(rest); err != nil {
			return nil, err
		}
	}
	return v[:len(v)-len(rest)], nil
}

// putLeaves writes the parts and runs of leaves first, first+1, … in txn.
// leaves continue the journal: the part holding first keeps its entries
// below first (entries at or above it, which no length counts, go).
func putLeaves(txn *badger.Txn, first uint64, leaves []Leaf) error {
	p := first / partSize
	var buf []byte
	if off := int(first % partSize); off > 0 {
		item, err := txn.Get(partKey(p))
		if err != nil {
			return fmt.Errorf("hostlog: journal part %d, which holds leaf %d: %w", p, first-1, err)
		}
		err = item.Value(func(v []byte) error {
			keep, err := entriesSpan(v, off)
			buf = append(buf, keep...)
			return err
		})
		if err != nil {
			return fmt.Errorf("hostlog: journal part %d: %w", p, err)
		}
	}
	idx := first
	for _, lf := range leaves {
		buf = appendEntry(buf, lf)
		idx++
		if idx%partSize == 0 {
			if err := txn.Set(partKey(p), buf); err != nil {
				return err
			}
			p, buf = p+1, nil
		}
	}
	if len(buf) > 0 {
		if err := txn.Set(partKey(p), buf); err != nil {
			return err
		}
	}
	for i := 0; i < len(leaves); {
		j := i + 1
		for j < len(leaves) && leaves[j].RoomID == leaves[i].RoomID && leaves[j].Seq == leaves[j-1].Seq+1 {
			j++
		}
		v := binary.BigEndian.AppendUint64(nil, uint64(leaves[i].Seq))
		v = binary.BigEndian.AppendUint64(v, first+uint64(i))
		if err := txn.Set(runKey(leaves[i].RoomID, leaves[j-1].Seq), v); err != nil {
			return err
		}
		i = j
	}
	return nil
}

// groupByRoom orders leaves room by room (rooms in order of first
// appearance, each room's leaves in their order), so that each room's
// leaves of a chunk make one run.
func groupByRoom(leaves []Leaf) []Leaf {
	at := make(map[string]int, 64)
	var groups [][]Leaf
	for _, lf := range leaves {
		g, ok := at[lf.RoomID]
		if !ok {
			g = len(groups)
			at[lf.RoomID] = g
			groups = append(groups, nil)
		}
		groups[g] = append(groups[g], lf)
	}
	if len(groups) == 1 {
		return leaves
	}
	out := make([]Leaf, 0, len(leaves))
	for _, g := range groups {
		out = append(out, g...)
	}
	return out
}

// journal makes leaves first, first+1, … durable in the journal, with the
// watermarks and the journal length that count them, in one transaction.
func (l *Log) journal(first uint64, leaves []Leaf, pos uint64) error {
	return l.cfg.DB.Update(func(txn *badger.Txn) error {
		if err := putLeaves(txn, first, leaves); err != nil {
			return err
		}
		if pos > 0 {
			if err := txn.Set([]byte(keyPos), binary.BigEndian.AppendUint64(nil, pos)); err != nil {
				return err
			}
		}
		top := map[string]int64{}
		for _, lf := range leaves {
			top[lf.RoomID] = max(top[lf.RoomID], lf.Seq)
		}
		for r, s := range top {
			if err := txn.Set([]byte(pfxMark+r), binary.BigEndian.AppendUint64(nil, uint64(s))); err != nil {
				return err
			}
		}
		return txn.Set([]byte(keyNext), binary.BigEndian.AppendUint64(nil, first+uint64(len(leaves))))
	})
}

// leafIn reads the journalled leaf at index i: none at or beyond the
// journal's length.
func leafIn(txn *badger.Txn, i uint64) (Leaf, bool, error) {
	if i >= journalLength(txn) {
		return Leaf{}, false, nil
	}
	item, err := txn.Get(partKey(i / partSize))
	if errors.Is(err, badger.ErrKeyNotFound) {
		return Leaf{}, false, nil
	}
	if err != nil {
		return Leaf{}, false, err
	}
	var lf Leaf
	found := false
	err = item.Value(func(v []byte) (err error) {
		lf, found, err = entryAt(v, int(i%partSize))
		return err
	})
	if err != nil {
		return Leaf{}, false, fmt.Errorf("hostlog: journal part %d: %w", i/partSize, err)
	}
	return lf, found, nil
}

// leavesIn reads the journalled leaves from, from+1, … below to.
func leavesIn(txn *badger.Txn, from, to uint64) ([]Leaf, error) {
	out := make([]Leaf, 0, to-from)
	for p := from / partSize; p*partSize < to; p++ {
		item, err := txn.Get(partKey(p))
		if err != nil {
			return nil, fmt.Errorf("hostlog: journal part %d: %w", p, err)
		}
		err = item.Value(func(v []byte) error {
			for i := p * partSize; len(v) > 0 && i < to; i++ {
				hash, seq, room, rest, err := nextEntry(v)
				if err != nil {
					return err
				}
				if i >= from {
					out = append(out, Leaf{Hash: [32]byte(hash), Seq: int64(binary.BigEndian.Uint64(seq)), RoomID: string(room)})
				}
				v = rest
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("hostlog: journal part %d: %w", p, err)
		}
	}
	if uint64(len(out)) != to-from {
		return nil, fmt.Errorf("hostlog: the journal holds %d of leaves %d…%d", len(out), from, to-1)
	}
	return out, nil
}

func journalLength(txn *badger.Txn) uint64 {
	var n uint64
	item, err := txn.Get([]byte(keyNext))
	if err != nil {
		return 0
	}
	_ = item.Value(func(v []byte) error { n = binary.BigEndian.Uint64(v); return nil })
	return n
}

// IndexOf returns the leaf index of a record hash: the node names the
// record's room and seq, the room's run holding that seq gives the index,
// and the leaf there must be that record.
func (l *Log) IndexOf(hash [32]byte) (uint64, bool, error) {
	roomID, seq, ok, err := l.cfg.Source.Locate(hash)
	if err != nil || !ok {
		return 0, false, err
	}
	var idx uint64
	found := false
	err = l.cfg.DB.View(func(txn *badger.Txn) error {
		prefix := runPrefix(roomID)
		it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix})
		defer it.Close()
		it.Seek(runKey(roomID, seq))
		if !it.Valid() || len(it.Item().Key()) != len(prefix)+8 {
			return nil
		}
		var firstSeq int64
		err := it.Item().Value(func(v []byte) error {
			if len(v) != 16 {
				return fmt.Errorf("hostlog: journal run %q is malformed", it.Item().Key())
			}
			firstSeq, idx = int64(binary.BigEndian.Uint64(v)), binary.BigEndian.Uint64(v[8:])
			return nil
		})
		if err != nil || seq < firstSeq {
			return err
		}
		idx += uint64(seq - firstSeq)
		lf, ok, err := leafIn(txn, idx)
		found = ok && lf.Hash == hash && lf.RoomID == roomID && lf.Seq == seq
		return err
	})
	return idx, found, err
}

// Leaf returns the journalled leaf at index i.
func (l *Log) Leaf(i uint64) (Leaf, bool, error) {
	var lf Leaf
	found := false
	err := l.cfg.DB.View(func(txn *badger.Txn) (err error) {
		lf, found, err = leafIn(txn, i)
		return err
	})
	return lf, found, err
}

// Journalled returns how many leaves the journal holds (integrated or
// about to be).
func (l *Log) Journalled() uint64 {
	var n uint64
	_ = l.cfg.DB.View(func(txn *badger.Txn) error { n = journalLength(txn); return nil })
	return n
}

// convertV1 rewrites a journal v1 (l/i/<index> → leaf, l/h/<hash> →
// index), as a node before this layout left it, into parts and runs. Each
// part is one transaction that also deletes its v1 keys, so a crash part
// way resumes where it stopped. v1 entries at or beyond the journal length
// (a crash's leftovers that never counted) and every l/h key go too.
func (l *Log) convertV1() error {
	converted := 0
	// Each pass seeks past what the last one deleted: a pass that
	// rewound would walk every tombstone before it again.
	seek := []byte(pfxV1Index)
	for {
		var part []Leaf
		var del [][]byte
		var p uint64
		err := l.cfg.DB.View(func(txn *badger.Txn) error {
			it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte(pfxV1Index)})
			defer it.Close()
			// A pass converts one whole part (a pass that stopped inside
			// one would resume in its middle), and deletes at most
			// 3 × partSize keys beside it that count for nothing.
			for it.Seek(seek); it.Valid(); it.Next() {
				k := it.Item().KeyCopy(nil)
				var idx uint64
				if len(k) == len(pfxV1Index)+8 {
					idx = binary.BigEndian.Uint64(k[len(pfxV1Index):])
				}
				if len(k) != len(pfxV1Index)+8 || idx >= l.next {
					if len(del) >= 3*partSize {
						break
					}
					del = append(del, k)
					continue
				}
				if len(part) == 0 {
					p = idx / partSize
				}
				if idx/partSize != p {
					break
				}
				if want := p*partSize + uint64(len(part)); idx != want {
					return fmt.Errorf("hostlog: journal v1 has no entry %d (next is %d)", want, idx)
				}
				var lf Leaf
				err := it.Item().Value(func(v []byte) error {
					if len(v) < 40 {
						return fmt.Errorf("hostlog: journal v1 entry %d is short", idx)
					}
					lf = Leaf{Hash: [32]byte(v[:32]), Seq: int64(binary.BigEndian.Uint64(v[32:40])), RoomID: string(v[40:])}
					return nil
				})
				if err != nil {
					return err
				}
				part = append(part, lf)
				del = append(del, k, append([]byte(pfxV1Hash), lf.Hash[:]...))
			}
			return nil
		})
		if err != nil {
			return err
		}
		if len(del) == 0 {
			break
		}
		err = l.cfg.DB.Update(func(txn *badger.Txn) error {
			if len(part) > 0 {
				if err := putLeaves(txn, p*partSize, part); err != nil {
					return err
				}
			}
			for _, k := range del {
				if err := txn.Delete(k); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("hostlog: convert journal v1: %w", err)
		}
		converted += len(part)
		seek = after(maxV1Key(del))
	}
	if err := l.dropPrefix([]byte(pfxV1Hash)); err != nil {
		return err
	}
	if converted > 0 {
		l.log.Info("host log: converted the journal to parts and runs", "leaves", converted)
	}
	return nil
}

// maxV1Key is the greatest l/i/ key among keys.
func maxV1Key(keys [][]byte) []byte {
	var m []byte
	for _, k := range keys {
		if bytes.HasPrefix(k, []byte(pfxV1Index)) && bytes.Compare(k, m) > 0 {
			m = k
		}
	}
	return m
}

// after returns the least key greater than k.
func after(k []byte) []byte { return append(append([]byte(nil), k...), 0) }

// dropPrefix deletes every key with this prefix, a transaction per batch.
func (l *Log) dropPrefix(prefix []byte) error {
	seek := prefix
	for {
		var keys [][]byte
		err := l.cfg.DB.View(func(txn *badger.Txn) error {
			it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix})
			defer it.Close()
			for it.Seek(seek); it.Valid() && len(keys) < 1024; it.Next() {
				keys = append(keys, it.Item().KeyCopy(nil))
			}
			return nil
		})
		if err != nil || len(keys) == 0 {
			return err
		}
		err = l.cfg.DB.Update(func(txn *badger.Txn) error {
			for _, k := range keys {
				if err := txn.Delete(k); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
		seek = after(keys[len(keys)-1])
	}
}
