package mirror

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/adpnode/adpnode/federation"
)

const backfillBatch = 1000

// setStalled records whether the room's catch-up is stuck ("" clears it);
// a new stall is logged at warn and counted.
func (m *Mirror) setStalled(r *Room, why string) {
	r.mu.Lock()
	was := r.stallErr
	r.stallErr = why
	r.mu.Unlock()
	switch {
	case why != "" && was == "":
		m.stats.Stalls.Add(1)
		m.log.Warn("mirror stalled: records exist past the verified tip and no peer serves them", "room", r.url,
			"verified_seq", r.Tip(), "want_seq", r.want.Load(), "err", why)
	case why == "" && was != "":
		m.log.Info("mirror catching up again", "room", r.url, "verified_seq", r.Tip())
	}
}

// StalledRooms counts rooms whose catch-up is stuck.
func (m *Mirror) StalledRooms() int {
	n := 0
	for _, r := range m.Rooms() {
		if r.Info().Stalled {
			n++
		}
	}
	return n
}

// gapLoop catches queued rooms up to the highest seq known to exist, from
// the host first and then from any other peer: records verify against the
// host's checkpoints wherever they come from.
func (m *Mirror) gapLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case r := <-m.gapQ:
			r.gapQueued.Store(false)
			m.catchUp(ctx, r)
		}
	}
}

// catchUp fetches the room from peers until the tip reaches the highest
// seq known to exist and the last answer was not a full batch: a full one
// suggests the peer holds more (announcements lag the chain, and a host
// that went down leaves its last one standing).
func (m *Mirror) catchUp(ctx context.Context, r *Room) {
	// The mirror never dials: which peers this node is connected to is the
	// federation's business (static peers, Connect, Disconnect), and a
	// mirror that redialled a host would undo an operator's Disconnect.
	ctx = network.WithNoDial(ctx, "mirror backfill uses existing connections")
	// The next batch is fetched and verified while this one is applied;
	// this function owns that goroutine and waits for it.
	var pf *prefetch
	defer func() { pf.drop() }()
	for ctx.Err() == nil {
		r.mu.Lock()
		tip, frozen := r.st.Seq, r.frozen
		r.mu.Unlock()
		if frozen {
			return
		}
		got, ok, why, next := m.fetchFromAny(ctx, r, tip, pf)
		pf = next
		if !ok {
			if tip < r.want.Load() && ctx.Err() == nil {
				m.setStalled(r, why)
				// Records are known to exist but nobody could serve them
				// now: retry later.
				m.goLoop(func(ctx context.Context) {
					select {
					case <-ctx.Done():
					case <-time.After(time.Second):
						m.queueGap(r)
					}
				})
			}
			return
		}
		m.setStalled(r, "")
		if got == 0 {
			return // the peer has nothing newer
		}
		if got < backfillBatch && r.Tip() >= r.want.Load() {
			return
		}
	}
}

// prefetch is a catch-up's next batch (after seq after, from peer from),
// fetched and verified on its own goroutine while the previous batch is
// applied. At most one is in flight per catch-up, so a catch-up holds at
// most two batches.
type prefetch struct {
	after    int64
	from     peer.ID
	done     chan struct{}
	b        *federation.BackfillBatch
	p        *preparedBatch
	fetchErr error
	prepErr  error
}

func (m *Mirror) startPrefetch(ctx context.Context, r *Room, from peer.ID, after int64) *prefetch {
	pf := &prefetch{after: after, from: from, done: make(chan struct{})}
	go func() {
		defer close(pf.done)
		if pf.b, pf.fetchErr = m.fed.Backfill(ctx, from, r.id, after, backfillBatch); pf.fetchErr == nil {
			pf.p, pf.prepErr = r.prepareBatch(pf.b)
		}
	}()
	return pf
}

// drop waits for an unused prefetch to end (nil is a no-op).
func (pf *prefetch) drop() {
	if pf != nil {
		<-pf.done
	}
}

// fetchFromAny tries the host, then every other connected peer, until one
// serves a batch that verifies. A refused batch is logged against its
// sender. It returns how many records the batch used held, or why no
// peer served one. pf, if it is the batch after tip, is used in place of
// a fetch from its peer; when the batch used was full, next is the
// prefetch of the one after it.
func (m *Mirror) fetchFromAny(ctx context.Context, r *Room, tip int64, pf *prefetch) (got int, ok bool, why string, next *prefetch) {
	if pf != nil && pf.after != tip {
		pf.drop()
		pf = nil
	}
	defer func() { pf.drop() }() // a prefetch no candidate used
	candidates := []peer.ID{r.hostPeer}
	for _, p := range m.fed.Peers() {
		if id, err := peer.Decode(p.PeerID); err == nil && id != r.hostPeer && p.Connected {
			candidates = append(candidates, id)
		}
	}
	why = "no connected peer serves the room"
	for _, id := range candidates {
		var b *federation.BackfillBatch
		var p *preparedBatch
		var fetchErr, prepErr error
		if pf != nil && pf.from == id {
			<-pf.done
			b, p, fetchErr, prepErr = pf.b, pf.p, pf.fetchErr, pf.prepErr
			pf = nil
		} else if b, fetchErr = m.fed.Backfill(ctx, id, r.id, tip, backfillBatch); fetchErr == nil {
			p, prepErr = r.prepareBatch(b)
		}
		if fetchErr != nil {
			why = "backfill from " + id.String() + ": " + fetchErr.Error()
			continue
		}
		n := 0
		err := prepErr
		if err == nil && p != nil {
			if len(b.Records) == backfillBatch && ctx.Err() == nil {
				next = m.startPrefetch(ctx, r, id, p.next()-1)
			}
			n, err = r.applyBatch(p)
		}
		if err != nil {
			next.drop()
			next = nil
			m.stats.Refused.Add(1)
			m.log.Warn("refused backfill batch", "room", r.url, "from", id, "err", err)
			why = "refused batch from " + id.String() + ": " + err.Error()
			continue
		}
		m.stats.Backfilled.Add(int64(n))
		if n > 0 || len(b.Records) == 0 {
			return len(b.Records), true, "", next
		}
		next.drop()
		next = nil
	}
	return 0, false, why, nil
}

// serveBackfill lets peers backfill mirrored rooms from this node: records
// after `after`, cut at the highest seq a stored host checkpoint vouches
// for, with that checkpoint.
func (m *Mirror) serveBackfill(roomID string, after int64, limit int) (federation.BackfillBatch, bool) {
	r, ok := m.Room(roomID, "")
	if !ok {
		return federation.BackfillBatch{}, false
	}
	var out federation.BackfillBatch
	m.commit.Flush()
	err := m.db.View(func(txn *badger.Txn) error {
		// Highest checkpoint within (after, after+limit].
		it := txn.NewIterator(badger.IteratorOptions{Reverse: true, Prefix: []byte(pfxCp + r.rk + "/")})
		defer it.Close()
		it.Seek(seqKey(pfxCp, r.rk, after+int64(limit)))
		if !it.Valid() {
			return nil
		}
		k := it.Item().Key()
		cpSeq := int64(binary.BigEndian.Uint64(k[len(k)-8:]))
		if cpSeq <= after {
			return nil
		}
		cp, err := it.Item().ValueCopy(nil)
		if err != nil {
			return err
		}
		// Records up to the checkpoint, within the byte budget: when the
		// budget cuts the batch short, it ends at the highest stored
		// checkpoint the cut still covers (or, when there is none, at
		// the first checkpoint: records are bounded by the body limit, so
		// the frame limit still holds).
		size := 0
		read := func(s int64) (bool, error) {
			item, err := txn.Get(seqKey(pfxRec, r.rk, s))
			if err != nil {
				return false, err
			}
			if size+int(item.ValueSize()) > federation.BackfillBytes && len(out.Records) > 0 {
				return false, nil
			}
			v, err := item.ValueCopy(nil)
			if err != nil {
				return false, err
			}
			size += len(v)
			out.Records = append(out.Records, v)
			return true, nil
		}
		for s := after + 1; s <= cpSeq; s++ {
			more, err := read(s)
			if err != nil {
				return err
			}
			if !more {
				break
			}
		}
		if cut := after + int64(len(out.Records)); cut < cpSeq {
			it.Seek(seqKey(pfxCp, r.rk, cut))
			var s int64
			if it.Valid() {
				k := it.Item().Key()
				s = int64(binary.BigEndian.Uint64(k[len(k)-8:]))
			}
			if s > after {
				if cp, err = it.Item().ValueCopy(nil); err != nil {
					return err
				}
				out.Records = out.Records[:s-after]
			} else {
				for s := cut + 1; s <= cpSeq; s++ {
					item, err := txn.Get(seqKey(pfxRec, r.rk, s))
					if err != nil {
						return err
					}
					v, err := item.ValueCopy(nil)
					if err != nil {
						return err
					}
					out.Records = append(out.Records, v)
				}
			}
		}
		out.Checkpoints = []json.RawMessage{cp}
		return nil
	})
	if err != nil {
		return federation.BackfillBatch{Error: "internal_error"}, true
	}
	return out, true
}
