package attention

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/adpnode/adpnode/adp/identity"
	"github.com/adpnode/adpnode/adp/record"
)

// Start-up catch-up: mention items are derived after the commit,
// on the owner, so a crash can lose the records committed since the last
// stored pass. Each pass stores, with its items, a per-room watermark (the
// highest record seq it handled) and the time it took its queue. At start
// the owner reads each room's chain after its watermark and derives what is
// missing; an item the inbox already holds (same room and seq) is not
// added again, so the result is every mention exactly once.

// Chain is a source of committed records for the catch-up.
type Chain struct {
	// Mirror: the rooms are mirrored public rooms (items with source
	// "mirror"); otherwise rooms this node hosts.
	Mirror bool
	// Heads lists the rooms to check and their head seq. since (Unix ms)
	// is the time before which every hosted record was derived: a source
	// may leave out rooms with no record received since (mirrors list
	// every room; they are bounded).
	Heads func(since int64) []Head
	// Records returns the committed records (record JSON) after seq
	// after, at most limit, in order: after+1, after+2, ...
	Records func(roomID string, after int64, limit int) ([][]byte, error)
}

// Head is a room's latest seq.
type Head struct {
	ID  string
	Seq int64
}

const (
	// catchUpMargin covers the time between a record's receipt (its
	// received_at) and its commit: a record committed after the last
	// stored pass was received at most this long before it.
	catchUpMargin = time.Minute
	// catchUpOverlap: records of one room can be told to the listener out
	// of order (writers of one group commit); the catch-up re-reads this
	// many records below the watermark, de-duplicated against the inbox.
	catchUpOverlap = 64
	catchUpPage    = 256
)

func waterKey(mirror bool, roomID string) []byte {
	if mirror {
		return []byte(pfxWater + "m/" + roomID)
	}
	return []byte(pfxWater + "l/" + roomID)
}

func u64(v int64) []byte { return binary.BigEndian.AppendUint64(nil, uint64(v)) }

// loadWater reads the last pass time and the mirrored rooms' watermarks
// (bounded by the mirror's room cap; hosted rooms' are read when needed).
func (a *Attention) loadWater(txn *badger.Txn) error {
	item, err := txn.Get([]byte(keyPass))
	switch {
	case errors.Is(err, badger.ErrKeyNotFound):
	case err != nil:
		return err
	default:
		if err := item.Value(func(v []byte) error {
			if len(v) == 8 {
				a.lastPass = int64(binary.BigEndian.Uint64(v))
			}
			return nil
		}); err != nil {
			return err
		}
	}
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

// handled reports whether a queued record was already derived: by a
// catch-up (which runs before the records queued meanwhile), or, for a
// mirrored record delivered again (a backfill after a restart), before.
func (a *Attention) handled(p pendingRecord) bool {
	if c, ok := a.caught[string(waterKey(!p.local, p.rec.RoomID))]; ok && p.rec.Seq <= c {
		return true
	}
	return !p.local && p.rec.Seq <= a.mirWM[p.rec.RoomID]
}

// waterLocked queues the watermarks of the rooms this pass handled, and the
// pass time, into the pass's batch.
func (a *Attention) waterLocked(rooms, mir map[string]int64, now int64, w *writes) {
	n := 0
	for id, seq := range rooms {
		if seq > 0 {
			w.set(waterKey(false, id), u64(seq))
			n++
		}
	}
	for id, seq := range mir {
		if seq > a.mirWM[id] {
			a.mirWM[id] = seq
			w.set(waterKey(true, id), u64(seq))
			n++
		}
	}
	if n > 0 {
		w.set([]byte(keyPass), u64(now))
	}
}

func (a *Attention) storedWater(mirror bool, roomID string) (int64, bool) {
	if mirror {
		v, ok := a.mirWM[roomID]
		return v, ok
	}
	var seq int64
	found := false
	_ = a.cfg.DB.View(func(txn *badger.Txn) error {
		item, err := txn.Get(waterKey(false, roomID))
		if err != nil {
			return err
		}
		return item.Value(func(v []byte) error {
			if len(v) == 8 {
				seq, found = int64(binary.BigEndian.Uint64(v)), true
			}
			return nil
		})
	})
	return seq, found
}

// CatchUp asks the owner to derive what c's rooms hold past their
// watermarks (the mirror's rooms, once the mirror is open).
func (a *Attention) CatchUp(c *Chain) {
	if a.closed.Load() {
		return
	}
	a.pmu.Lock()
	a.pendChain = append(a.pendChain, c)
	a.pmu.Unlock()
	a.poke()
}

// catchUp runs on the owner.
func (a *Attention) catchUp(c *Chain) {
	if c.Mirror {
		a.mirChain = c // for the mirrored rooms' overflows (overflow.go)
	}
	since := int64(0)
	if !c.Mirror {
		if a.lastPass == 0 {
			// No pass was ever stored: a new data dir, or one from before
			// watermarks. Mentions of a dir that old were derived without
			// them; from here on every pass is recorded.
			return
		}
		since = a.lastPass - catchUpMargin.Milliseconds()
	}
	var ranges []roomRange
	for _, h := range c.Heads(since) {
		wm, ok := a.storedWater(c.Mirror, h.ID)
		if ok && h.Seq <= wm {
			continue
		}
		ranges = append(ranges, roomRange{h.ID, max(wm-catchUpOverlap, 0), h.Seq})
	}
	a.derive(c, ranges, "attention: caught up after restart")
}

// roomRange is a room's records after seq after, up to seq to.
type roomRange struct {
	id        string
	after, to int64
}

// derive reads the ranges' records from c and derives what the inboxes
// lack (an item already there, same room and seq, is not added again). It
// stores each room's watermark (the last seq read) with the items, and
// returns it per room.
func (a *Attention) derive(c *Chain, ranges []roomRange, what string) map[string]int64 {
	reached := make(map[string]int64, len(ranges))
	if len(ranges) == 0 {
		return reached
	}
	began := time.Now()
	now := a.cfg.Now()
	cutoff := now - a.cfg.RetentionAge.Milliseconds()
	idx := &inboxIndex{}
	var w writes
	derived := 0
	flush := func() {
		if len(w.ops) > 0 {
			if err := a.write(&w); err != nil {
				a.cfg.Log.Error("attention: store caught-up items", "err", err)
			}
		}
		a.deliver(w.live)
		w = writes{}
	}
	for _, h := range ranges {
		after := h.after
		for after < h.to {
			recs, err := c.Records(h.id, after, catchUpPage)
			if err != nil {
				a.cfg.Log.Error("attention: catch-up read", "room", h.id, "after", after, "err", err)
				break
			}
			if len(recs) == 0 {
				break
			}
			a.mu.Lock()
			for _, raw := range recs {
				after++
				// Only a record that may mention anyone is parsed (and
				// its signature checked again).
				if !interesting(raw) {
					continue
				}
				r, _, err := record.Parse(raw)
				if err != nil || r.RoomID != h.id || r.Seq != after {
					a.cfg.Log.Error("attention: catch-up: stored record does not parse", "room", h.id, "seq", after, "err", err)
					continue
				}
				if r.ReceivedAt < cutoff {
					continue
				}
				derived++
				a.recordLocked(pendingRecord{rec: r, local: !c.Mirror, inbox: idx}, now, &w)
			}
			a.mu.Unlock()
			if len(w.ops) > 4096 {
				flush()
			}
		}
		key := waterKey(c.Mirror, h.id)
		a.caught[string(key)] = max(a.caught[string(key)], after)
		reached[h.id] = after
		w.set(key, u64(after))
		w.unit()
		if c.Mirror && after > a.mirWM[h.id] {
			a.mirWM[h.id] = after
		}
	}
	w.set([]byte(keyPass), u64(now))
	flush()
	a.cfg.Log.Info(what, "mirror", c.Mirror, "rooms", len(ranges), "records", derived,
		"took", time.Since(began).Round(time.Millisecond).String())
	return reached
}

// inboxIndex is what the inboxes held when a catch-up began, loaded per
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
