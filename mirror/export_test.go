package mirror

import (
	"time"

	"encoding/json"

	"github.com/dgraph-io/badger/v4"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/adpnode/adpnode/adp/assertion"
	"github.com/adpnode/adpnode/federation"

	"github.com/adpnode/adpnode/adp/identity"
)

// WantSeqForTest records that seq exists and queues a catch-up: a mirror
// told of records it cannot fetch.
func (r *Room) WantSeqForTest(seq int64) {
	r.wantSeq(seq)
	r.m.queueGap(r)
}

// HistoryPendingForTest reports how many applied records the room's
// history still answers from memory (not yet durable).
func (r *Room) HistoryPendingForTest() int { return r.hist.pending() }

// SnapshotKeyForTest is the key of a mirrored room's snapshot.
func SnapshotKeyForTest(host identity.AgentID, roomID string) []byte {
	return snapKey(roomKey(host, roomID))
}

// RecordKeyForTest is the key of a mirrored record.
func RecordKeyForTest(host identity.AgentID, roomID string, seq int64) []byte {
	return seqKey(pfxRec, roomKey(host, roomID), seq)
}

// HashKeyForTest is the hash index key of an envelope or record hash.
func HashKeyForTest(host identity.AgentID, roomID string, h [32]byte) []byte {
	return hashKey(roomKey(host, roomID), h)
}

// WriteLegacyRoomForTest stores a mirrored room the way the code before
// the hash index and snapshots did: its metadata and its records, nothing
// else.
func WriteLegacyRoomForTest(db *badger.DB, host identity.AgentID, hostPeer, roomID, url string, recs [][]byte) error {
	rk := roomKey(host, roomID)
	wb := db.NewWriteBatch()
	defer wb.Cancel()
	meta, _ := json.Marshal(roomMeta{Host: host, HostPeer: hostPeer, RoomID: roomID, URL: url, AddedAt: 1})
	if err := wb.Set([]byte(pfxMeta+rk), meta); err != nil {
		return err
	}
	for i, raw := range recs {
		if err := wb.Set(seqKey(pfxRec, rk, int64(i+1)), raw); err != nil {
			return err
		}
	}
	return wb.Flush()
}

// ValidateWitnessForTest runs the witness topic's validator on data as if
// author had published it.
func (m *Mirror) ValidateWitnessForTest(author peer.ID, data []byte) bool {
	_, v := m.validateWitness(author, data)
	return v == federation.Accept
}

// DeliverWitnessForTest hands a valid announcement to the topic's
// delivery, as after validation.
func (m *Mirror) DeliverWitnessForTest(data []byte) error {
	w, err := assertion.OpenWitness(data)
	if err != nil {
		return err
	}
	m.deliverWitness(w, "")
	return nil
}

// SetHostLogBaseForTest makes the mirror fetch host log proofs from base
// (a fake host) instead of each room's origin.
func (m *Mirror) SetHostLogBaseForTest(base string) {
	m.hl.mu.Lock()
	m.hl.base = func(*Room) string { return base }
	m.hl.mu.Unlock()
}

// HostLogForTest reports the proof fetcher's scan passes so far and the
// most fetches it had in flight at once.
func (m *Mirror) HostLogForTest() (scans, maxInflight int64) {
	return m.hl.scans.Load(), m.hl.maxInflight.Load()
}

// HostLogBackoffForTest is a room's current wait between proof fetches
// (0 before any attempt) and whether it is queued.
func (m *Mirror) HostLogBackoffForTest(host identity.AgentID, roomID string) (time.Duration, bool) {
	m.hl.mu.Lock()
	defer m.hl.mu.Unlock()
	ps := m.hl.rooms[roomKey(host, roomID)]
	if ps == nil {
		return 0, false
	}
	return ps.backoff, ps.queued
}

// ExpireHostLogBackoffForTest ends every room's wait for its next proof
// fetch, as if the backoff had elapsed.
func (m *Mirror) ExpireHostLogBackoffForTest() {
	m.hl.mu.Lock()
	defer m.hl.mu.Unlock()
	for _, ps := range m.hl.rooms {
		ps.next = time.Time{}
	}
}

// WakeProofScanForTest runs the proof scan soon.
func (m *Mirror) WakeProofScanForTest() { m.wakeProofScan() }

// HostLogKeyForTest is the key of a mirrored room's stored proof.
func HostLogKeyForTest(host identity.AgentID, roomID string) []byte {
	return []byte(pfxProof + roomKey(host, roomID))
}

// WitnessedLogsForTest lists the log origins the mirror's witness
// announces.
func (m *Mirror) WitnessedLogsForTest() []string { return m.witnessedLogs() }

// ReconcileForTest runs one reconciliation pass with the index.
func (m *Mirror) ReconcileForTest() { m.reconcile() }

// FailHistoryReadsForTest makes every store read of the room's history
// fail while on, and reports how many have failed so far.
func (r *Room) FailHistoryReadsForTest(on bool) int64 {
	r.hist.failReads.Store(on)
	return r.hist.failed.Load()
}

// HistoryReadsFailedForTest reports how many history reads failed.
func (r *Room) HistoryReadsFailedForTest() int64 { return r.hist.failed.Load() }

// Reconciles counts the runs of m's reconcile loop.
func Reconciles(m *Mirror) int64 { return m.reconciles.Load() }
