package attention

// A full queue (Config.MaxPending records) loses no mention. The listener
// drops the record, as before, but notes the room and the seqs it dropped
// (overflow). The next pass re-reads that room's records from storage
// (the catch-up's derive: from a little below the first dropped seq, up to
// the last seq seen), de-duplicated against the inbox, instead of taking
// the room's queued records; the room's watermark then advances only to
// what was read. Without a source to read (a mirror not yet handed to
// CatchUp, no Chain) or when the read fails, the overflow waits for a
// later pass and the watermark stays below the first dropped seq, so the
// start-up catch-up after a crash reads it too.

// overflowKey is a room of this node (mirror false) or a mirrored one.
type overflowKey struct {
	mirror bool
	room   string
}

// dropped seqs of one room: from the first to the last.
type overflowRange struct{ from, to int64 }

// overflowLocked notes a record the full queue dropped (pmu held).
func (a *Attention) overflowLocked(p pendingRecord) {
	k := overflowKey{!p.local, p.rec.RoomID}
	r, ok := a.overflow[k]
	if !ok {
		r = overflowRange{p.rec.Seq, p.rec.Seq}
	}
	r.from, r.to = min(r.from, p.rec.Seq), max(r.to, p.rec.Seq)
	a.overflow[k] = r
}

// recoverOverflow re-derives the overflowed rooms from storage (owner,
// before the pass takes its queued records). It returns the rooms whose
// queued records the pass must leave alone (the re-read covered them), and
// caps rooms' and mir's watermarks where a room could not be read in full.
func (a *Attention) recoverOverflow(over map[overflowKey]overflowRange, recs []pendingRecord, rooms, mir map[string]int64) map[overflowKey]bool {
	if len(over) == 0 {
		return nil
	}
	// The re-read starts below every queued record of the room, so none
	// of them is skipped as handled without being derived.
	first := map[overflowKey]int64{}
	for _, p := range recs {
		k := overflowKey{!p.local, p.rec.RoomID}
		if _, ok := over[k]; ok {
			if f, seen := first[k]; !seen || p.rec.Seq < f {
				first[k] = p.rec.Seq
			}
		}
	}
	var local, mirrored []roomRange
	for k, r := range over {
		after := max(r.from-1-catchUpOverlap, 0)
		if f, ok := first[k]; ok {
			after = min(after, f-1)
		}
		to := r.to
		if k.mirror {
			to = max(to, mir[k.room])
			mirrored = append(mirrored, roomRange{k.room, after, to})
		} else {
			to = max(to, rooms[k.room])
			local = append(local, roomRange{k.room, after, to})
		}
	}
	skip := map[overflowKey]bool{}
	for _, side := range []struct {
		mirror bool
		chain  *Chain
		ranges []roomRange
		water  map[string]int64
	}{{false, a.cfg.Chain, local, rooms}, {true, a.mirChain, mirrored, mir}} {
		if len(side.ranges) == 0 {
			continue
		}
		var reached map[string]int64
		if side.chain != nil {
			reached = a.derive(side.chain, side.ranges, "attention: re-read records the full queue dropped")
		}
		for _, r := range side.ranges {
			k := overflowKey{side.mirror, r.id}
			got, ok := reached[r.id]
			if ok {
				skip[k] = true // its queued records were re-read
			} else {
				got = r.after // not read: derive the queued records as usual
			}
			if got < r.to {
				// Try again at the next pass; until then the watermark
				// stays below what was not derived.
				if ok {
					side.water[r.id] = got
				} else {
					side.water[r.id] = min(side.water[r.id], over[k].from-1)
				}
				a.pmu.Lock()
				o, had := a.overflow[k]
				if !had {
					o = over[k]
				}
				if ok {
					o.from = min(o.from, got+1)
				} else {
					o.from = min(o.from, over[k].from)
				}
				o.to = max(o.to, r.to)
				a.overflow[k] = o
				a.pmu.Unlock()
			}
		}
	}
	return skip
}
