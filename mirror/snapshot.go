package mirror

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/adpnode/adpnode/adp/identity"
	"github.com/adpnode/adpnode/adp/room"
	"github.com/adpnode/adpnode/internal/changefeed"
	"github.com/adpnode/adpnode/internal/periodic"
)

// snapshotInterval is how often the states of mirrored rooms that changed
// are stored. A restart replays only the records after a room's snapshot;
// Close stores every changed room.
const snapshotInterval = 5 * time.Second

// roomSnapshot is what m/s/<host key>/<room> holds: a room's replayed
// state and the bytes of its stored records up to the state's seq.
type roomSnapshot struct {
	Bytes int64           `json:"bytes"`
	State json.RawMessage `json:"state"`
}

func snapKey(rk string) []byte { return []byte(pfxSnap + rk) }

// RecoveryStats is what the mirror's last start did to rebuild its rooms.
type RecoveryStats struct {
	Rooms        int // rooms restored
	FromSnapshot int // of which from a stored snapshot
	Replayed     int // records replayed (snapshot tails and whole chains)
	// Took is how long restoring the rooms took.
	Took time.Duration
}

// RecoveryStats reports how the mirror's rooms were restored at Open.
func (m *Mirror) RecoveryStats() RecoveryStats { return m.recovered }

// snapshotRooms stores the state of every room whose seq moved since its
// last snapshot, once the records up to that seq are durable (a snapshot
// ahead of the stored chain would be discarded at the next start). A
// snapshot is a cache of what the chain says: losing one costs a longer
// replay, never data.
func (m *Mirror) snapshotRooms() error {
	m.snapMu.Lock()
	defer m.snapMu.Unlock()
	type snap struct {
		r   *Room
		seq int64
		b   []byte
	}
	var out []snap
	for _, r := range m.Rooms() {
		r.mu.Lock()
		if r.removed || !r.st.Created() || r.st.Seq == r.snapSeq {
			r.mu.Unlock()
			continue
		}
		b, err := json.Marshal(roomSnapshot{Bytes: r.bytes, State: r.st.Encode()})
		seq := r.st.Seq
		r.mu.Unlock()
		if err != nil {
			return err
		}
		out = append(out, snap{r, seq, b})
	}
	if len(out) == 0 {
		return nil
	}
	if err := m.commit.Flush(); err != nil {
		return err
	}
	wb := m.db.NewWriteBatch()
	defer wb.Cancel()
	for _, s := range out {
		if err := wb.Set(snapKey(s.r.rk), s.b); err != nil {
			return err
		}
	}
	if err := wb.Flush(); err != nil {
		return err
	}
	for _, s := range out {
		s.r.mu.Lock()
		s.r.snapSeq = max(s.r.snapSeq, s.seq)
		s.r.mu.Unlock()
	}
	return nil
}

// runSnapshots stores changed rooms' states every snapshotInterval until
// ctx ends.
func (m *Mirror) runSnapshots(ctx context.Context) {
	periodic.Run(ctx, snapshotInterval, func() {
		if err := m.snapshotRooms(); err != nil {
			m.log.Warn("store mirror room snapshots", "err", err)
		}
		if err := m.feed.Prune(changefeed.Keep); err != nil {
			m.log.Warn("prune the mirror's change feed", "err", err)
		}
	})
}

// loadSnapshot returns r's stored snapshot as a state (under r's history)
// and the stored bytes it counts, or false when there is none or it cannot
// be trusted: it must decode, be of r's room, and name a stored record of
// the room by seq and hash. A snapshot that is not trusted costs a whole
// replay and a warning.
func (m *Mirror) loadSnapshot(r *Room) (*room.State, int64, bool) {
	raw, err := m.getValue(snapKey(r.rk))
	if errors.Is(err, badger.ErrKeyNotFound) {
		return nil, 0, false
	}
	st, bytes, err := m.decodeSnapshot(r, raw, err)
	if err != nil {
		m.log.Warn("mirror room snapshot discarded; replaying the whole chain", "room", r.url, "err", err)
		return nil, 0, false
	}
	return st, bytes, true
}

func (m *Mirror) decodeSnapshot(r *Room, raw []byte, readErr error) (*room.State, int64, error) {
	if readErr != nil {
		return nil, 0, readErr
	}
	var s roomSnapshot
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, 0, fmt.Errorf("mirror snapshot: %w", err)
	}
	if s.Bytes < 0 {
		return nil, 0, fmt.Errorf("mirror snapshot: negative byte count")
	}
	st, err := room.Decode(m.roomConfig(r.hist), s.State)
	if err != nil {
		return nil, 0, err
	}
	if st.ID != r.id {
		return nil, 0, fmt.Errorf("snapshot is of room %s", st.ID)
	}
	h, ok, err := r.hist.storedHashes(st.Seq)
	if err != nil {
		return nil, 0, err
	}
	if !ok || identity.EncodeB64(h.rec[:]) != st.LastHash {
		return nil, 0, fmt.Errorf("snapshot at seq %d does not match the stored record", st.Seq)
	}
	return st, s.Bytes, nil
}
