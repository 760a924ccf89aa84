package node

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/dgraph-io/badger/v4"

	"github.com/adpnode/adpnode/adp/record"
	"github.com/adpnode/adpnode/adp/room"
)

// mirrorRecordPrefix is the mirror store's record key space (mirror/store.go:
// m/r/<host key>/<room>/<seq:8 BE>); check reads it without importing the
// mirror package, which depends on this one.
const mirrorRecordPrefix = "m/r/"

// CheckReport is what Check found in a data dir.
type CheckReport struct {
	Dir string `json:"dir"`
	// Rooms are the hosted rooms (r/), Mirrors the mirrored ones (m/r/).
	Rooms   []RoomCheck `json:"rooms"`
	Mirrors []RoomCheck `json:"mirrors"`
	// Storage lists Badger-level faults (a damaged file, an unreadable
	// value), with the file when known.
	Storage []StorageFault `json:"storage,omitempty"`
	// Note says when the dir had to be opened read-write (see openStopped).
	Note string `json:"note,omitempty"`
}

// openStopped opens a stopped node's database to read it: read-only when
// Badger allows, else (a node that died left a memtable log to truncate,
// which read-only Badger refuses) read-write, doing exactly the log
// recovery the node's next start would do and nothing else (no
// compaction on close). The note says so.
func openStopped(dir string) (*badger.DB, string, error) {
	db, err := openBadgerChecked(BadgerOptions(dir).WithReadOnly(true), nil, true)
	if err == nil || !strings.Contains(err.Error(), "truncate required") {
		return db, "", err
	}
	db, err = openBadgerChecked(BadgerOptions(dir).WithCompactL0OnClose(false), nil, true)
	return db, "the node did not stop cleanly: its write-ahead log was recovered as the node's next start would", err
}

// RoomCheck is one room's chain: OK, or broken at BrokenAt for Reason.
type RoomCheck struct {
	Room string `json:"room"`
	// Host is the host key of a mirrored room.
	Host string `json:"host,omitempty"`
	// Seq and Hash are the last record that verified.
	Seq      int64  `json:"seq"`
	Hash     string `json:"hash,omitempty"`
	OK       bool   `json:"ok"`
	BrokenAt int64  `json:"broken_at,omitempty"`
	Reason   string `json:"reason,omitempty"`
}

// StorageFault is one Badger-level error.
type StorageFault struct {
	File  string `json:"file,omitempty"`
	Error string `json:"error"`
}

// OK reports whether every room verified and storage had no fault.
func (r *CheckReport) OK() bool {
	if len(r.Storage) > 0 {
		return false
	}
	for _, rs := range [][]RoomCheck{r.Rooms, r.Mirrors} {
		for _, c := range rs {
			if !c.OK {
				return false
			}
		}
	}
	return true
}

// Check opens the database in dir read-only (no node may be running on
// it: ErrLocked otherwise) and verifies every hosted room's chain and
// every mirrored room's chain the way recovery does: each record parses
// strictly (hashes, signature) and replays through the room state machine
// in seq order, which checks the chain links. Rooms are judged with
// room.ReplayLimits (a node's own limits are not stored) and with the
// external packs stored in the dir. A damaged file is reported in Storage
// (with a nil error): only an unusable dir is an error.
func Check(dir string) (*CheckReport, error) {
	if _, err := os.Stat(filepath.Join(dir, "MANIFEST")); err != nil {
		return nil, fmt.Errorf("%s is not an adpnode data dir (no MANIFEST): %w", dir, err)
	}
	rep := &CheckReport{Dir: dir, Rooms: []RoomCheck{}, Mirrors: []RoomCheck{}}
	db, note, err := openStopped(dir)
	rep.Note = note
	if err != nil {
		var se *StorageError
		if errors.As(err, &se) {
			rep.Storage = append(rep.Storage, StorageFault{File: se.File, Error: se.Err.Error()})
			return rep, nil
		}
		return nil, err
	}
	defer db.Close()
	packs := packSource{get: func(_, digest string) ([]byte, error) { return storedPack(db, digest) }}
	rep.Rooms, err = checkChains(db, []byte(pfxRecord), packs, false)
	if err != nil {
		rep.Storage = append(rep.Storage, storageFault(err))
	}
	rep.Mirrors, err = checkChains(db, []byte(mirrorRecordPrefix), packs, true)
	if err != nil {
		rep.Storage = append(rep.Storage, storageFault(err))
	}
	if err := readAll(db); err != nil {
		rep.Storage = append(rep.Storage, storageFault(err))
	}
	return rep, nil
}

func storageFault(err error) StorageFault {
	f := StorageFault{Error: err.Error()}
	f.File = badgerFileName.FindString(f.Error)
	return f
}

func storedPack(db *badger.DB, digest string) ([]byte, error) {
	var out []byte
	err := db.View(func(txn *badger.Txn) error {
		item, err := txn.Get([]byte(pfxPack + digest))
		if err != nil {
			return err
		}
		out, err = item.ValueCopy(nil)
		return err
	})
	return out, err
}

// checkChains walks every chain under prefix (keys <prefix><chain>/<seq8>).
// For mirror chains, <chain> is <host key>/<room>.
func checkChains(db *badger.DB, prefix []byte, packs packSource, mirrored bool) (out []RoomCheck, err error) {
	out = []RoomCheck{}
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("reading %s: badger: %v", prefix, r)
		}
	}()
	var cur *RoomCheck
	var chain []byte
	var st *room.State
	err = db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{PrefetchValues: true, PrefetchSize: 64, Prefix: prefix})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			item := it.Item()
			k := item.Key()
			if len(k) < len(prefix)+10 || k[len(k)-9] != '/' {
				return fmt.Errorf("malformed key %q", k)
			}
			id := k[len(prefix) : len(k)-9]
			seq := int64(binary.BigEndian.Uint64(k[len(k)-8:]))
			if cur == nil || !bytes.Equal(chain, id) {
				out = append(out, RoomCheck{Room: string(id), OK: true})
				cur = &out[len(out)-1]
				chain = append(chain[:0], id...)
				if mirrored {
					if i := bytes.LastIndexByte(id, '/'); i > 0 {
						cur.Host, cur.Room = string(id[:i]), string(id[i+1:])
					}
				}
				st = room.New(room.Config{Limits: room.ReplayLimits(), Packs: packs})
			}
			if !cur.OK {
				continue
			}
			broken := func(reason string) { cur.OK, cur.BrokenAt, cur.Reason = false, seq, reason }
			raw, err := item.ValueCopy(nil)
			if err != nil {
				broken("unreadable value: " + err.Error())
				continue
			}
			rec, env, err := record.Parse(raw)
			if err != nil {
				broken(err.Error())
				continue
			}
			if rec.Seq != seq {
				broken(fmt.Sprintf("record says seq %d under the key of seq %d", rec.Seq, seq))
				continue
			}
			if rec.RoomID != cur.Room {
				broken(fmt.Sprintf("record of room %s stored under room %s", rec.RoomID, cur.Room))
				continue
			}
			if err := st.Apply(rec, env, nil); err != nil {
				broken(err.Error())
				continue
			}
			cur.Seq, cur.Hash = rec.Seq, rec.Hash
		}
		return nil
	})
	sort.SliceStable(out, func(i, j int) bool { return out[i].Host < out[j].Host })
	return out, err
}

// readAll reads every key and value once, so that a damaged block or value
// anywhere (not only in chains) is found.
func readAll(db *badger.DB) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("badger: %v", r)
		}
	}()
	return db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{PrefetchValues: false})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			if err := it.Item().Value(func([]byte) error { return nil }); err != nil {
				return fmt.Errorf("key %q: %w", it.Item().Key(), err)
			}
		}
		return nil
	})
}
