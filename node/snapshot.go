package node

import (
	"context"
	"time"

	"github.com/adpnode/adpnode/internal/periodic"
)

// snapshotInterval is how often the states of rooms that changed are
// stored. After a crash, recovery replays at most the records accepted
// since (a clean stop stores every room).
const snapshotInterval = 5 * time.Second

// snapshotRooms stores the state of every room whose seq moved since its
// last snapshot, in one batch. A snapshot is a cache of what the chain
// says: losing one costs a longer replay, never data.
func (n *Node) snapshotRooms() error {
	// Under snapMu, a batch encoded before a room was evicted cannot land
	// over the final snapshot evict stored; cold rooms are skipped.
	n.snapMu.Lock()
	defer n.snapMu.Unlock()
	wb := n.db.NewWriteBatch()
	defer wb.Cancel()
	type done struct {
		hr  *hostedRoom
		seq int64
	}
	var written []done
	for _, hr := range n.roomList() {
		hr.mu.RLock()
		if hr.st == nil { // cold: its final state is stored
			hr.mu.RUnlock()
			continue
		}
		seq := hr.st.Seq
		if seq == hr.snapSeq.Load() {
			hr.mu.RUnlock()
			continue
		}
		b := hr.st.Encode()
		hr.mu.RUnlock()
		if err := wb.Set(snapshotKey(hr.id), b); err != nil {
			return err
		}
		written = append(written, done{hr, seq})
	}
	if len(written) == 0 {
		return nil
	}
	if err := wb.Flush(); err != nil {
		return err
	}
	for _, d := range written {
		d.hr.snapSeq.Store(d.seq)
	}
	return nil
}

// runSnapshots stores changed rooms' states every snapshotInterval until
// ctx ends.
func (n *Node) runSnapshots(ctx context.Context) {
	periodic.Run(ctx, snapshotInterval, func() {
		if err := n.snapshotRooms(); err != nil {
			n.log.Warn("store room snapshots", "err", err)
		}
		n.evictFinished()
		if err := n.pruneFeed(FeedKeep); err != nil {
			n.log.Warn("prune the change feed", "err", err)
		}
	})
}
