package node

import (
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/adpnode/adpnode/adp"
	"github.com/adpnode/adpnode/adp/identity"
	"github.com/adpnode/adpnode/adp/record"
	"github.com/adpnode/adpnode/adp/room"
)

// RoomBroken is the error a room whose stored chain does not recover
// answers on every request, while every other room is served.
type RoomBroken struct {
	RoomID string
	Seq    int64 // the first record that failed (0: the room's snapshot or storage)
	Err    error
}

func (e *RoomBroken) Error() string {
	return fmt.Sprintf("room %s: stored chain does not recover at seq %d: %v", e.RoomID, e.Seq, e.Err)
}

func (e *RoomBroken) Unwrap() error { return e.Err }

// adpError is what clients get for a broken room: unavailable, with the
// room and seq in data so an operator can find it (adpnode check).
func (e *RoomBroken) adpError() *adp.Error {
	return &adp.Error{Code: adp.CodeUnavailable, Message: "this room's stored data is damaged; the operator has been told",
		Data: map[string]any{"reason": "room_corrupt", "room_id": e.RoomID, "seq": e.Seq}}
}

// RecoveryStats is what the last start's recovery did.
type RecoveryStats struct {
	Rooms        int  // rooms recovered
	FromSnapshot int  // of which from a stored snapshot
	Cold         int  // of which ended and kept cold: summary only, state not decoded (cold.go)
	Replayed     int  // records replayed (snapshot tails and whole chains)
	Broken       int  // rooms set aside
	Upgraded     bool // the data dir was upgraded to the current layout
}

// RecoveryStats reports what the node's start-up recovery did.
func (n *Node) RecoveryStats() RecoveryStats { return n.recovered }

// recover rebuilds every hosted room: from its latest stored snapshot plus
// the records after it, or by replaying its whole chain when there is no
// usable snapshot (first start after an upgrade, a damaged snapshot).
// Every replayed record is verified (strict parse, hashes, signature, chain
// links) and admitted by the kernel from the chain alone — never against
// the live join-request store, whose requests have moved on since. A room
// that does not recover is set aside (RoomBroken) and every other room is
// served. Host stores are then reconciled with the chains.
func (n *Node) recover() error {
	start := time.Now()
	if err := n.joins.load(); err != nil {
		return err
	}
	if err := n.nonces.load(n.db, n.NowMs()); err != nil {
		return err
	}
	if err := n.loadProfileCount(); err != nil {
		return err
	}
	layout, err := n.readLayout()
	if err != nil {
		return err
	}
	// Rooms are listed from the registry; a dir older than layout 3 has
	// none yet, and its rooms are found from their records once.
	var ids []string
	if layout < 3 {
		ids, err = n.storedRoomIDs()
	} else {
		ids, err = n.registeredRoomIDs()
	}
	if err != nil {
		return fmt.Errorf("list stored rooms: %w", err)
	}
	upgrade := layout < 2 && len(ids) > 0

	// Rooms are independent: recover them on every core.
	type result struct {
		hr       *hostedRoom
		snapshot bool // from a snapshot (or cold: hr.st is nil)
		replayed int
		err      error
	}
	results := make([]result, len(ids))
	var wg sync.WaitGroup
	next := make(chan int)
	for w := 0; w < runtime.GOMAXPROCS(0); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				hr, snap, replayed, err := n.recoverRoom(ids[i], upgrade, !upgrade)
				if err != nil && snap {
					// A tail that does not follow the snapshot: the
					// snapshot is not of this chain. The chain decides.
					n.log.Warn("room snapshot does not lead to the stored records; replaying the whole chain", "room", ids[i], "err", err)
					hr, snap, replayed, err = n.recoverRoom(ids[i], upgrade, false)
				}
				results[i] = result{hr, snap, replayed, err}
			}
		}()
	}
	for i := range ids {
		next <- i
	}
	close(next)
	wg.Wait()

	stats := RecoveryStats{Upgraded: upgrade}
	for i, r := range results {
		if r.err != nil {
			var rb *RoomBroken
			if !errors.As(r.err, &rb) {
				rb = &RoomBroken{RoomID: ids[i], Err: r.err}
			}
			n.broken[ids[i]] = rb
			n.log.Error("room does not recover; serving every other room", "room", rb.RoomID, "seq", rb.Seq, "err", rb.Err)
			continue
		}
		n.rooms[r.hr.id] = r.hr
		stats.Rooms++
		stats.Replayed += r.replayed
		switch {
		case r.hr.st == nil:
			stats.Cold++
		case r.snapshot:
			stats.FromSnapshot++
		}
	}
	if err := n.loadArchiveMarkers(); err != nil {
		return err
	}
	n.reconcileJoinRequests()
	// Store fresh snapshots now, so that a crash loop does not replay the
	// same tails again and again.
	if err := n.snapshotRooms(); err != nil {
		return fmt.Errorf("store room snapshots: %w", err)
	}
	if layout < layoutVersion {
		if err := n.writeRegistry(ids); err != nil {
			return fmt.Errorf("write the room registry: %w", err)
		}
		if err := n.db.Update(func(txn *badger.Txn) error {
			return txn.Set([]byte(keyLayout), binary.BigEndian.AppendUint64(nil, layoutVersion))
		}); err != nil {
			return err
		}
	}
	stats.Broken = len(n.broken)
	n.recovered = stats
	n.log.Info("recovered rooms", "rooms", stats.Rooms, "from_snapshot", stats.FromSnapshot, "cold", stats.Cold,
		"records_replayed", stats.Replayed, "broken", stats.Broken, "upgraded", upgrade,
		"took", time.Since(start).Round(time.Millisecond).String())
	return nil
}

func (n *Node) readLayout() (int64, error) {
	var v int64
	err := n.db.View(func(txn *badger.Txn) error {
		item, err := txn.Get([]byte(keyLayout))
		if errors.Is(err, badger.ErrKeyNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		return item.Value(func(b []byte) error {
			if len(b) == 8 {
				v = int64(binary.BigEndian.Uint64(b))
			}
			return nil
		})
	})
	return v, err
}

// registeredRoomIDs lists the rooms of the registry (h/), one dense key
// range: a start does not touch any room's records to find the rooms.
func (n *Node) registeredRoomIDs() ([]string, error) {
	var ids []string
	err := n.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte(pfxRoom)})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			ids = append(ids, string(it.Item().Key()[len(pfxRoom):]))
		}
		return nil
	})
	return ids, err
}

// writeRegistry registers rooms found from their records (the upgrade to
// layout 3).
func (n *Node) writeRegistry(ids []string) error {
	wb := n.db.NewWriteBatch()
	defer wb.Cancel()
	for _, id := range ids {
		if err := wb.Set(roomKey(id), nil); err != nil {
			return err
		}
	}
	return wb.Flush()
}

// storedRoomIDs lists the rooms that have records, seeking from one room's
// records to the next, so it costs one seek per room, not a read per record.
// Only the upgrade from a dir without a registry needs it: each seek maps
// blocks of every level into memory.
func (n *Node) storedRoomIDs() ([]string, error) {
	var ids []string
	err := n.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte(pfxRecord)})
		defer it.Close()
		for it.Rewind(); it.Valid(); {
			k := it.Item().Key()
			if len(k) < len(pfxRecord)+9 || k[len(k)-9] != '/' {
				return fmt.Errorf("malformed record key %q", k)
			}
			id := string(k[len(pfxRecord) : len(k)-9])
			ids = append(ids, id)
			// The first key after every r/<id>/<seq>.
			it.Seek(append([]byte(pfxRecord+id+"/"), 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff))
		}
		return nil
	})
	return ids, err
}

// recoverRoom rebuilds one room, from its snapshot when useSnapshot is set
// and it has a usable one. upgrade is set on the first start of a data dir
// written before layout 2: the envelope index then lacks record hashes,
// which the full replay adds.
func (n *Node) recoverRoom(id string, upgrade, useSnapshot bool) (hr *hostedRoom, fromSnapshot bool, replayed int, err error) {
	if useSnapshot {
		if hr, ok := n.recoverCold(id); ok {
			return hr, true, 0, nil
		}
	}
	cfg := room.Config{Limits: n.cfg.Limits, Packs: n.packs.storedSource(), History: n.history(id)}
	var st *room.State
	if useSnapshot {
		st = n.loadSnapshot(id, cfg)
	}
	fromSnapshot = st != nil
	if st == nil {
		// A whole replay keeps the hashes in memory while it runs: the
		// index may not have them yet.
		mem := cfg
		mem.History = room.NewMemHistory()
		st = room.New(mem)
	}
	after := st.Seq
	var index *badger.WriteBatch
	if upgrade {
		index = n.db.NewWriteBatch()
		defer index.Cancel()
	}
	err = n.db.View(func(txn *badger.Txn) error {
		if fromSnapshot {
			// Most snapshots are current: a point read, answered by the
			// tables' bloom filters, says so without seeking (a seek reads
			// a block of every level).
			if _, err := txn.Get(recordKey(id, after+1)); errors.Is(err, badger.ErrKeyNotFound) {
				return nil
			}
		}
		prefix := []byte(pfxRecord + id + "/")
		it := txn.NewIterator(badger.IteratorOptions{PrefetchValues: true, PrefetchSize: 64, Prefix: prefix})
		defer it.Close()
		for it.Seek(recordKey(id, after+1)); it.Valid(); it.Next() {
			k := it.Item().Key()
			seq := int64(binary.BigEndian.Uint64(k[len(k)-8:]))
			raw, err := it.Item().ValueCopy(nil)
			if err != nil {
				return &RoomBroken{RoomID: id, Seq: seq, Err: fmt.Errorf("read: %w", err)}
			}
			rec, env, err := record.Parse(raw)
			if err != nil {
				return &RoomBroken{RoomID: id, Seq: seq, Err: err}
			}
			if rec.Seq != seq || rec.RoomID != id {
				return &RoomBroken{RoomID: id, Seq: seq, Err: fmt.Errorf("record says room %s seq %d", rec.RoomID, rec.Seq)}
			}
			// Replay judges each record from the chain alone; the join
			// store only lends auto-approved requests' perspectives.
			if err := st.Apply(rec, env, n.joins.lookup(id)); err != nil {
				return &RoomBroken{RoomID: id, Seq: seq, Err: err}
			}
			n.nonces.observe(env.Event.Actor, env.Event.Nonce, rec.ReceivedAt)
			if index != nil {
				h, _ := identity.DecodeB64Len(rec.Hash, 32)
				if err := index.Set(envelopeKey([32]byte(h)), envelopeValue(id, seq)); err != nil {
					return err
				}
			}
			replayed++
		}
		return nil
	})
	if err != nil {
		return nil, false, 0, err
	}
	if !st.Created() {
		return nil, false, 0, &RoomBroken{RoomID: id, Seq: 1, Err: errors.New("no room.create record")}
	}
	if index != nil {
		if err := index.Flush(); err != nil {
			return nil, false, 0, fmt.Errorf("index record hashes: %w", err)
		}
	}
	st.SetHistory(n.history(id))
	hr = &hostedRoom{id: id, st: st}
	if replayed == 0 {
		hr.snapSeq.Store(st.Seq)
	}
	// A replayed tail linked to the snapshot's head (the kernel checks
	// each record's prev); a snapshot alone is checked at the first write.
	hr.unchecked.Store(fromSnapshot && replayed == 0)
	return hr, fromSnapshot, replayed, nil
}

// loadSnapshot returns the room's stored snapshot as a state, or nil when
// there is none or it cannot be trusted: it must decode as a state of this
// room. That its head is the stored record at its seq is checked by the
// tail replay or, when there is no tail, before the room's first write
// (checkSnapshotHead): reading every room's last record at start would map
// a block of record data per room into memory.
func (n *Node) loadSnapshot(id string, cfg room.Config) *room.State {
	var raw []byte
	err := n.db.View(func(txn *badger.Txn) error {
		item, err := txn.Get(snapshotKey(id))
		if err != nil {
			return err
		}
		raw, err = item.ValueCopy(nil)
		return err
	})
	if errors.Is(err, badger.ErrKeyNotFound) {
		return nil
	}
	if err != nil {
		n.log.Warn("room snapshot unreadable; replaying the whole chain", "room", id, "err", err)
		return nil
	}
	st, err := room.Decode(cfg, raw)
	if err == nil && st.ID != id {
		err = fmt.Errorf("snapshot is of room %s", st.ID)
	}
	if err != nil {
		n.log.Warn("room snapshot discarded; replaying the whole chain", "room", id, "err", err)
		return nil
	}
	return st
}

// loadArchiveMarkers reads which rooms' end-of-room work already ran.
func (n *Node) loadArchiveMarkers() error {
	return n.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{PrefetchValues: true, Prefix: []byte(pfxArchive)})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			if r, ok := n.rooms[string(it.Item().Key()[len(pfxArchive):])]; ok {
				err := it.Item().Value(func(v []byte) error {
					if len(v) == 8 {
						r.archivedAt.Store(int64(binary.BigEndian.Uint64(v)))
					}
					return nil
				})
				if err != nil {
					return err
				}
			}
		}
		return nil
	})
}

// reconcileJoinRequests makes the join-request store agree with the chains:
// a request a room.join.review decided has that decision. (Both are written
// in one transaction, so they can only disagree after damage or a bug; the
// chain is the authority.) Cold rooms were reconciled when their states
// were stored (evict), and their chains do not change: they are skipped, so
// that recovery reads no cold room's state.
func (n *Node) reconcileJoinRequests() {
	for id, hr := range n.rooms {
		if hr.st != nil {
			n.reconcileRoom(id, hr.st)
		}
	}
}

// reconcileRoom reconciles one room's join requests with its state st.
func (n *Node) reconcileRoom(id string, st *room.State) {
	for _, jr := range n.joins.forRoom(id) {
		rr, ok := st.Reviewed(jr.ID)
		if !ok {
			continue
		}
		status, role := "rejected", adp.Role("")
		if rr.Approved {
			status, role = "approved", rr.Role
		}
		if jr.Status == status && jr.ApprovedRole == role {
			continue
		}
		n.log.Warn("join request disagreed with the chain; the chain wins", "room", id, "request", jr.ID,
			"stored", jr.Status, "chain", status)
		jr.Status, jr.ApprovedRole = status, role
		if err := n.joins.save(jr); err != nil {
			n.log.Error("save reconciled join request", "request", jr.ID, "err", err)
		}
	}
}

// checkSnapshotHead runs when a room restored from its snapshot alone is
// first looked up (Node.room), before anything reads or writes it: the
// snapshot's head must be the stored record at its seq, or reads would
// show a head the chain does not have and a write would link to it. A
// snapshot that disagrees (a data dir put together from mismatched copies,
// an edited file) is discarded and the room rebuilt from its whole chain,
// as a start would have done; a chain that does not replay sets the room
// aside (RoomBroken). Only rooms that are used pay for the read.
func (n *Node) checkSnapshotHead(hr *hostedRoom) error {
	hr.checkMu.Lock()
	defer hr.checkMu.Unlock()
	if !hr.unchecked.Load() {
		if rb := n.brokenRoom(hr.id); rb != nil {
			return rb
		}
		return nil
	}
	hr.mu.RLock()
	var seq int64
	var last string
	switch {
	case hr.st != nil:
		seq, last = hr.st.Seq, hr.st.LastHash
	case hr.cold != nil:
		seq, last = hr.cold.Seq, hr.cold.LastHash
	}
	hr.mu.RUnlock()
	h, ok, err := n.history(hr.id).RecordHash(seq)
	if err != nil && !errors.Is(err, errDamaged) {
		return err // not read: checked again at the room's next use
	}
	if err == nil && ok && identity.EncodeB64(h[:]) == last {
		hr.unchecked.Store(false)
		return nil
	}
	n.log.Warn("room snapshot does not match the stored chain; replaying the whole chain", "room", hr.id, "seq", seq)
	fresh, _, _, err := n.recoverRoom(hr.id, false, false)
	if err != nil {
		var rb *RoomBroken
		if !errors.As(err, &rb) {
			rb = &RoomBroken{RoomID: hr.id, Err: err}
		}
		n.mu.Lock()
		delete(n.rooms, hr.id)
		n.broken[hr.id] = rb
		n.mu.Unlock()
		n.log.Error("room does not recover; serving every other room", "room", rb.RoomID, "seq", rb.Seq, "err", rb.Err)
		hr.unchecked.Store(false)
		return rb
	}
	hr.mu.Lock()
	hr.st, hr.cold = fresh.st, nil // an ended room goes cold again once its snapshot is stored
	hr.mu.Unlock()
	hr.snapSeq.Store(-1) // store a snapshot of the rebuilt state
	hr.unchecked.Store(false)
	return nil
}

func (n *Node) brokenRoom(id string) *RoomBroken {
	n.mu.RLock()
	defer n.mu.RUnlock()
	return n.broken[id]
}
