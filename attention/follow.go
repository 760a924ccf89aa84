package attention

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/adpnode/adpnode/adp/identity"
	"github.com/adpnode/adpnode/adp/record"
	"github.com/adpnode/adpnode/hostport"
	"github.com/adpnode/adpnode/internal/groupcommit"
)

// Mentions and join-request outcomes follow the change feeds.
//
// The node's feed has an entry per record it stores, written in the
// record's transaction; the mirror's feed one per verified record it
// stores. Attention follows each (Follower is its name among a feed's
// followers) and stores its position in that feed in the same commit as
// the items it derived from the entries up to it: every commit ends
// after a whole entry's items, with the position of that entry. So a
// crash loses no entry and derives none twice: the next start follows
// from the stored position. One entry's items (a record names at most 32
// mentions) always fit one commit. Nothing is queued in memory between a feed
// and the derivation; a slow derivation only lets the feed grow, and
// entries are read from the disk.
//
// An entry's flags (hostport.FeedFlags) say whether its record may
// mention anyone or review a join request, and whether its type may change
// the room's directory summary: only the records that may notify are read
// back (a reaction, or a message without mentions, is not), and a room is
// looked at again when its entry says its summary may have changed. An
// entry from before the flags says neither, so its record is read and
// checked as a record that is read always is (interesting, contentOnly).
//
// A batch that derived nothing (no item, no live event) stores nothing at
// once: its position and marks wait in memory, and are stored with the
// next batch that derives something, or about a second (posEvery) after
// the last store (by a batch, or by a timer armed while something is
// pending), and when the follower stops. A crash loses at most that
// second of positions, and following again from the stored one hands
// over entries that derived nothing: they derive nothing again.
//
// A feed prunes the entries every follower has passed, and keeps at most
// a bounded number (node.FeedKeep) whatever the positions. A follower
// stopped for longer gets hostport.ErrFeedBehind: it then resynchronises
// from the rooms' records (resync), reading each room of the source
// after its mark (the highest record seq attention derived of it, stored
// with the items) up to the room's head, de-duplicated against the
// inboxes, and stores the feed's head as read before the scan as its
// position. A room with no mark is read from its first record; records
// older than RetentionAge are skipped (their items would be gone). A
// store with no position in a feed (from before the feeds) does the same
// before it follows.
//
// A mirror stores a record again after it purged the room and mirrors it
// anew: a mirrored room's record at or below its mark is not derived
// again.

// Follower is attention's name among the followers of a change feed.
const Follower = "attention"

// Source is a durable change feed of stored records and where to read
// them: the node's (ForNode) or the mirror's.
type Source interface {
	// FeedHead returns the newest entry's seq; Follow hands fn the
	// entries after since, in order, until ctx ends or fn fails
	// (hostport.ErrFeedBehind when they were pruned,
	// groupcommit.ErrClosed when the source closed).
	FeedHead() uint64
	Follow(ctx context.Context, since uint64, fn func([]hostport.FeedEntry) error) error
	// FeedPosKey is the key of follower's position in the feed (8 bytes
	// big-endian), written with the follower's own writes.
	FeedPosKey(follower string) []byte
	// Records returns a room's stored records (record JSON) after seq
	// after, at most limit, in order.
	Records(roomID string, after int64, limit int) ([][]byte, error)
	// Heads lists every room the source holds and its head seq (the
	// resync after hostport.ErrFeedBehind).
	Heads() []Head
}

// Head is a room's latest seq.
type Head struct {
	ID  string
	Seq int64
}

// follower is one source's follower.
type follower struct {
	src    Source
	local  bool // the node's rooms (else mirrored ones)
	posKey []byte
	// reached is the position derived: every item of the entries up to
	// it is stored (tests wait on it); stored is the position stored.
	reached, stored atomic.Uint64

	// Under Attention.wmu: the position and marks of the batches that
	// derived nothing since the last store (pendPos 0: none), and when
	// the position was last stored.
	pendPos   uint64
	pendMarks map[string]int64
	storedAt  time.Time
	// flush stores what is pending once posEvery has passed (armed while
	// something is pending; counted in Attention.fwg).
	flush *time.Timer
}

func (fs *follower) name() string {
	if fs.local {
		return "node"
	}
	return "mirror"
}

const (
	// followRetry is the pause before a follower that failed (a read or a
	// write) starts again from its stored position.
	followRetry = time.Second
	resyncPage  = 256
	// posEvery is how often a follower whose batches derive nothing
	// stores its position (as the record publisher does).
	posEvery = time.Second
)

// newFollower reads the stored position in src's feed. A new store
// starts at the feed's head, stored now; a store without a position (from
// before the feeds, or that never followed this source) resynchronises
// from the rooms' records first, as after hostport.ErrFeedBehind.
func (a *Attention) newFollower(src Source, local bool) (*follower, error) {
	fs := &follower{src: src, local: local, posKey: src.FeedPosKey(Follower)}
	pos, ok, err := a.readPos(fs.posKey)
	if err != nil {
		return nil, err
	}
	if !ok && a.fresh {
		pos = src.FeedHead()
		if err := a.cfg.DB.Update(func(txn *badger.Txn) error { return txn.Set(fs.posKey, u64(int64(pos))) }); err != nil {
			return nil, err
		}
	}
	fs.reached.Store(pos)
	fs.stored.Store(pos)
	return fs, nil
}

func (a *Attention) readPos(key []byte) (uint64, bool, error) {
	var pos uint64
	found := false
	err := a.cfg.DB.View(func(txn *badger.Txn) error {
		item, err := txn.Get(key)
		if errors.Is(err, badger.ErrKeyNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		return item.Value(func(v []byte) error {
			if len(v) != 8 {
				return fmt.Errorf("attention: malformed feed position %q", key)
			}
			pos, found = binary.BigEndian.Uint64(v), true
			return nil
		})
	})
	return pos, found, err
}

// follow runs fs until Close (or its source closes).
func (a *Attention) follow(fs *follower) {
	defer a.fwg.Done()
	defer a.disarm(fs)
	for {
		pos, found, err := a.readPos(fs.posKey)
		switch {
		case err == nil && !found:
			err = hostport.ErrFeedBehind // no position yet: resynchronise
		case err == nil:
			err = fs.src.Follow(a.ctx, pos, func(b []hostport.FeedEntry) error { return a.take(fs, b) })
			// What the batches that derived nothing handled is stored now:
			// every item before it is.
			if ferr := a.storePending(fs); ferr != nil {
				a.cfg.Log.Error("attention: store the feed position", "source", fs.name(), "err", ferr)
			}
		}
		switch {
		case a.ctx.Err() != nil, errors.Is(err, groupcommit.ErrClosed):
			return
		case errors.Is(err, hostport.ErrFeedBehind):
			if found {
				a.cfg.Log.Warn("attention: the change feed no longer holds the entries after its position; resynchronising from the rooms' records",
					"source", fs.name(), "position", pos)
			} else {
				a.cfg.Log.Info("attention: no position in this change feed yet (a store from before the feeds); resynchronising from the rooms' records",
					"source", fs.name())
			}
			if err = a.resync(fs); err == nil {
				continue
			}
		}
		a.cfg.Log.Error("attention: following the change feed; starting again from the stored position", "source", fs.name(), "err", err)
		// What was taken in memory but not stored is taken again.
		if rerr := a.reload(); rerr != nil {
			a.cfg.Log.Error("attention: reload inboxes", "err", rerr)
		}
		select {
		case <-a.ctx.Done():
			return
		case <-time.After(followRetry):
		}
	}
}

// take derives the items of a batch of feed entries and stores them with
// the position, commit by commit (see above); a batch that derived
// nothing leaves its position and marks pending.
func (a *Attention) take(fs *follower, batch []hostport.FeedEntry) error {
	raws, err := readEntries(fs.src, batch)
	if err != nil {
		return err
	}
	a.wmu.Lock()
	defer a.wmu.Unlock()
	var w writes
	look := map[string]bool{}
	marks := map[string]int64{}
	a.mu.Lock()
	now := a.cfg.Now()
	for i, e := range batch {
		// An entry's items and its position form one unit: the cuts
		// its derivation marks (one per mention) are dropped, so no
		// commit ends inside an entry.
		cuts, ops, lives := len(w.cuts), len(w.ops), len(w.live)
		raw := raws[i]
		if fs.local {
			// A record read is its own truth; else the entry's flags.
			if raw != nil && !contentOnly(raw[:len(raw)-1]) || raw == nil && e.Flags.MayChangeRoom() {
				look[e.RoomID] = true
			}
		}
		if raw != nil && interesting(raw) && (fs.local || e.RecordSeq > a.mirWM[e.RoomID]) {
			a.deriveEntry(fs.local, e, raw, now, &w)
		}
		marks[e.RoomID] = max(marks[e.RoomID], e.RecordSeq)
		if !fs.local {
			a.mirWM[e.RoomID] = max(a.mirWM[e.RoomID], e.RecordSeq)
		}
		w.cuts = w.cuts[:cuts]
		if len(w.ops) > ops || len(w.live) > lives {
			w.set(fs.posKey, u64(int64(e.Seq)))
			w.unit()
		}
	}
	if fs.local {
		a.lookLocked(look, now, &w)
	}
	last := batch[len(batch)-1].Seq
	if len(w.ops) == 0 && len(w.live) == 0 && time.Since(fs.storedAt) < a.posEvery() {
		// Derived nothing: the position waits (see above).
		if fs.pendMarks == nil {
			fs.pendMarks = map[string]int64{}
		}
		for id, seq := range marks {
			fs.pendMarks[id] = max(fs.pendMarks[id], seq)
		}
		fs.pendPos = last
		a.mu.Unlock()
		fs.reached.Store(last)
		a.arm(fs)
		return nil
	}
	for id, seq := range fs.pendMarks {
		marks[id] = max(marks[id], seq)
	}
	for id, seq := range marks {
		w.set(waterKey(!fs.local, id), u64(seq))
	}
	w.set(fs.posKey, u64(int64(last)))
	w.unit()
	a.mu.Unlock()
	if err := a.write(&w); err != nil {
		return err
	}
	fs.pendPos, fs.pendMarks, fs.storedAt = 0, nil, time.Now()
	fs.reached.Store(last)
	fs.stored.Store(last)
	a.deliver(w.live)
	return nil
}

// arm has what is pending stored once posEvery has passed since the last
// store, should no batch store it first (a.wmu held).
func (a *Attention) arm(fs *follower) {
	if fs.flush != nil {
		return
	}
	a.fwg.Add(1) // the follower's own count is held: Close's Wait has not returned
	fs.flush = time.AfterFunc(max(a.posEvery()-time.Since(fs.storedAt), 0), func() {
		defer a.fwg.Done()
		a.wmu.Lock()
		fs.flush = nil
		a.wmu.Unlock()
		if a.ctx.Err() != nil {
			return // the follower stores it as it stops
		}
		if err := a.storePending(fs); err != nil {
			a.cfg.Log.Error("attention: store the feed position", "source", fs.name(), "err", err)
		}
	})
}

// disarm stops fs's pending store, as its follower stops.
func (a *Attention) disarm(fs *follower) {
	a.wmu.Lock()
	defer a.wmu.Unlock()
	if fs.flush != nil && fs.flush.Stop() {
		a.fwg.Done()
	}
	fs.flush = nil
}

func (a *Attention) posEvery() time.Duration {
	if a.cfg.posEvery > 0 {
		return a.cfg.posEvery
	}
	return posEvery
}

// storePending stores the position and marks of the batches that derived
// nothing since the last store (every item up to that position is
// stored), and forgets them: the follower follows again from what is
// stored.
func (a *Attention) storePending(fs *follower) error {
	a.wmu.Lock()
	defer a.wmu.Unlock()
	pos, marks := fs.pendPos, fs.pendMarks
	fs.pendPos, fs.pendMarks = 0, nil
	if pos == 0 || a.cfg.crashOnStop {
		return nil
	}
	var w writes
	for id, seq := range marks {
		w.set(waterKey(!fs.local, id), u64(seq))
	}
	w.set(fs.posKey, u64(int64(pos)))
	w.unit()
	if err := a.write(&w); err != nil {
		return err
	}
	fs.storedAt = time.Now()
	fs.stored.Store(pos)
	return nil
}

// deriveEntry derives the items of one stored record the feed names (a.mu
// held).
func (a *Attention) deriveEntry(local bool, e hostport.FeedEntry, raw []byte, now int64, w *writes) {
	r, env, err := parseStored(raw)
	if err == nil && (r.RoomID != e.RoomID || r.Seq != e.RecordSeq) {
		err = errors.New("not the record the feed names")
	}
	if err == nil {
		if h, herr := identity.DecodeB64Len(r.Hash, 32); herr != nil || !bytes.Equal(h, e.Hash[:]) {
			err = errors.New("its hash is not the one the feed names")
		}
	}
	if err != nil {
		a.cfg.Log.Error("attention: a stored record does not parse", "room", e.RoomID, "seq", e.RecordSeq, "err", err)
		return
	}
	a.recordLocked(pendingRecord{rec: r, env: env, local: local}, now, w)
}

// parseStored parses a record this host stored (record JSON), whose
// envelope's signature was verified when it was accepted or mirrored: it
// checks the envelope's shape and hash, and the record hash over them,
// but does not verify the signature again (a verification would cost the
// derivation more than everything else it does).
func parseStored(raw []byte) (*record.Record, *identity.Envelope, error) {
	var v struct {
		RoomID     string          `json:"room_id"`
		Seq        int64           `json:"seq"`
		PreHash    *string         `json:"pre_hash"`
		Hash       string          `json:"hash"`
		ReceivedAt int64           `json:"received_at"`
		Envelope   json.RawMessage `json:"envelope"`
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, nil, err
	}
	env, err := identity.ParseEnvelope(v.Envelope)
	if err != nil {
		return nil, nil, err
	}
	pre := ""
	if v.PreHash != nil {
		pre = *v.PreHash
	}
	if base64.RawURLEncoding.EncodeToString(env.Digest[:]) != env.Hash || record.ComputeHash(v.RoomID, v.Seq, pre, env.Hash, v.ReceivedAt) != v.Hash {
		return nil, nil, errors.New("attention: a stored record's hashes do not recompute")
	}
	return &record.Record{RoomID: v.RoomID, Seq: v.Seq, PreHash: pre, Hash: v.Hash, ReceivedAt: v.ReceivedAt, Envelope: env.Raw}, env, nil
}

// readEntries reads the records batch names that may notify anyone (their
// flags, or an entry without flags), a run of consecutive seqs of one room
// at a time; a record not read or not found is nil.
func readEntries(src Source, batch []hostport.FeedEntry) ([][]byte, error) {
	out := make([][]byte, len(batch))
	for i := 0; i < len(batch); {
		if !batch[i].Flags.MayNotify() {
			i++
			continue
		}
		j := i + 1
		for j < len(batch) && batch[j].RoomID == batch[i].RoomID && batch[j].RecordSeq == batch[j-1].RecordSeq+1 && batch[j].Flags.MayNotify() {
			j++
		}
		raws, err := src.Records(batch[i].RoomID, batch[i].RecordSeq-1, j-i)
		if err != nil {
			return nil, err
		}
		for k, raw := range raws {
			if k < j-i && len(raw) > 0 {
				out[i+k] = raw
			}
		}
		i = j
	}
	return out, nil
}

// reload reads the inboxes' heads and the mirrored rooms' marks again,
// after a write failed: memory goes back to what is stored.
func (a *Attention) reload() error {
	a.wmu.Lock()
	defer a.wmu.Unlock()
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.cfg.DB.View(func(txn *badger.Txn) error {
		a.inboxes = map[identity.AgentID]*inbox{}
		a.mirWM = map[string]int64{}
		if err := a.loadInboxes(txn); err != nil {
			return err
		}
		return a.loadWater(txn)
	})
}

func waterKey(mirror bool, roomID string) []byte {
	if mirror {
		return []byte(pfxWater + "m/" + roomID)
	}
	return []byte(pfxWater + "l/" + roomID)
}

func u64(v int64) []byte { return binary.BigEndian.AppendUint64(nil, uint64(v)) }

// loadWater reads the mirrored rooms' marks (bounded by the mirror's room
// cap; hosted rooms' are read when a resync needs them).
func (a *Attention) loadWater(txn *badger.Txn) error {
	pfx := []byte(pfxWater + "m/")
	it := txn.NewIterator(badger.IteratorOptions{PrefetchValues: true, Prefix: pfx})
	defer it.Close()
	for it.Rewind(); it.Valid(); it.Next() {
		id := string(it.Item().Key()[len(pfx):])
		_ = it.Item().Value(func(v []byte) error {
			if len(v) == 8 {
				a.mirWM[id] = int64(binary.BigEndian.Uint64(v))
			}
			return nil
		})
	}
	return nil
}

func (a *Attention) storedWater(mirror bool, roomID string) int64 {
	if mirror {
		return a.mirWM[roomID]
	}
	var seq int64
	_ = a.cfg.DB.View(func(txn *badger.Txn) error {
		item, err := txn.Get(waterKey(false, roomID))
		if err != nil {
			return err
		}
		return item.Value(func(v []byte) error {
			if len(v) == 8 {
				seq = int64(binary.BigEndian.Uint64(v))
			}
			return nil
		})
	})
	return seq
}

// resync derives, after hostport.ErrFeedBehind, what every room of the
// source holds past its mark, and stores the feed's head (read before
// the scan) as the position. A crash midway leaves the position where it
// was: the next start resynchronises again, from the marks stored so far.
// It takes the write lock one page of a room at a time, so the other
// writers go on meanwhile.
func (a *Attention) resync(fs *follower) error {
	began := time.Now()
	head := fs.src.FeedHead()
	var ranges []roomRange
	for _, h := range fs.src.Heads() {
		a.wmu.Lock()
		wm := a.storedWater(!fs.local, h.ID)
		a.wmu.Unlock()
		if h.Seq > wm {
			ranges = append(ranges, roomRange{h.ID, wm, h.Seq})
		}
	}
	idx := &inboxIndex{}
	derived := 0
	for _, h := range ranges {
		for after := h.after; after < h.to; {
			if err := a.ctx.Err(); err != nil {
				return err
			}
			recs, err := fs.src.Records(h.id, after, resyncPage)
			if err != nil {
				return err
			}
			if len(recs) == 0 {
				break
			}
			n, err := a.resyncPage(fs, h.id, after, recs, idx)
			if err != nil {
				return err
			}
			derived += n
			after += int64(len(recs))
		}
	}
	a.wmu.Lock()
	defer a.wmu.Unlock()
	var w writes
	w.set(fs.posKey, u64(int64(head)))
	w.unit()
	if err := a.write(&w); err != nil {
		return err
	}
	fs.storedAt = time.Now()
	fs.reached.Store(head)
	fs.stored.Store(head)
	a.cfg.Log.Info("attention: resynchronised from the rooms' records", "source", fs.name(), "rooms", len(ranges), "records", derived,
		"took", time.Since(began).Round(time.Millisecond).String())
	return nil
}

// resyncPage derives one page of a room's records (after seq after) that
// the inboxes lack, and stores them with the room's mark.
func (a *Attention) resyncPage(fs *follower, roomID string, after int64, recs [][]byte, idx *inboxIndex) (int, error) {
	a.wmu.Lock()
	defer a.wmu.Unlock()
	var w writes
	derived := 0
	a.mu.Lock()
	now := a.cfg.Now()
	cutoff := now - a.cfg.RetentionAge.Milliseconds()
	for _, raw := range recs {
		after++
		if !interesting(raw) {
			continue
		}
		r, env, err := parseStored(raw)
		if err != nil || r.RoomID != roomID || r.Seq != after {
			a.cfg.Log.Error("attention: resync: a stored record does not parse", "room", roomID, "seq", after, "err", err)
			continue
		}
		if r.ReceivedAt < cutoff {
			continue // its items would be gone at once
		}
		derived++
		a.recordLocked(pendingRecord{rec: r, env: env, local: fs.local, inbox: idx}, now, &w)
	}
	w.set(waterKey(!fs.local, roomID), u64(after))
	w.unit()
	if !fs.local {
		a.mirWM[roomID] = max(a.mirWM[roomID], after)
	}
	a.mu.Unlock()
	if err := a.write(&w); err != nil {
		return 0, err
	}
	a.deliver(w.live)
	return derived, nil
}

// roomRange is a room's records after seq after, up to seq to.
type roomRange struct {
	id        string
	after, to int64
}

// inboxIndex is what the inboxes held when a resync began, loaded per
// agent on first use (at most Retention items each).
type inboxIndex struct {
	agents map[identity.AgentID]map[string]bool
}

func mentionKey(roomID string, seq int64) string { return fmt.Sprintf("%s/%d", roomID, seq) }

// add reports whether agent's inbox lacks (roomID, seq), and records it.
func (x *inboxIndex) add(a *Attention, agent identity.AgentID, roomID string, seq int64) bool {
	if x.agents == nil {
		x.agents = map[identity.AgentID]map[string]bool{}
	}
	set := x.agents[agent]
	if set == nil {
		set = map[string]bool{}
		pfx := []byte(pfxMention + string(agent) + "/")
		_ = a.cfg.DB.View(func(txn *badger.Txn) error {
			it := txn.NewIterator(badger.IteratorOptions{PrefetchValues: true, PrefetchSize: 64, Prefix: pfx})
			defer it.Close()
			for it.Rewind(); it.Valid(); it.Next() {
				var m storedMention
				if it.Item().Value(func(v []byte) error { return json.Unmarshal(v, &m) }) == nil {
					set[mentionKey(m.RoomID, m.RoomSeq)] = true
				}
			}
			return nil
		})
		x.agents[agent] = set
	}
	k := mentionKey(roomID, seq)
	if set[k] {
		return false
	}
	set[k] = true
	return true
}
