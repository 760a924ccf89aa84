package mirror

import (
	"encoding/binary"
	"encoding/json"

	"github.com/dgraph-io/badger/v4"

	"github.com/adpnode/adpnode/adp/identity"
	"github.com/adpnode/adpnode/internal/storelayout"
)

// Key spaces inside the node's Badger database: key and value shapes are
// in the storage layout table (internal/storelayout, docs/storage.md).
const (
	pfxTarget   = storelayout.MirrorTarget
	pfxMeta     = storelayout.MirrorMeta
	pfxRec      = storelayout.MirrorRecord
	pfxCp       = storelayout.MirrorCheckpoint
	pfxEvidence = storelayout.MirrorEvidence
	pfxMirrorW  = storelayout.MirrorWitness
	pfxHash     = storelayout.MirrorHash
	pfxSnap     = storelayout.MirrorSnapshot
	pfxTlogW    = storelayout.MirrorTlogWitness
	pfxProof    = storelayout.MirrorHostLog
	pfxFeed     = storelayout.MirrorFeed
	pfxFeedPos  = storelayout.MirrorFeedPos
)

func roomKey(host identity.AgentID, roomID string) string { return string(host) + "/" + roomID }

func seqKey(pfx, rk string, seq int64) []byte {
	k := make([]byte, 0, len(pfx)+len(rk)+9)
	k = append(k, pfx...)
	k = append(k, rk...)
	k = append(k, '/')
	return binary.BigEndian.AppendUint64(k, uint64(seq))
}

// roomMeta is what a mirror remembers about a room besides its records.
type roomMeta struct {
	Host     identity.AgentID `json:"host"`
	HostPeer string           `json:"host_peer"`
	RoomID   string           `json:"room_id"`
	URL      string           `json:"url"`
	Faulty   bool             `json:"faulty,omitempty"`
	FrozenAt int64            `json:"frozen_at,omitempty"`
	AddedAt  int64            `json:"added_at"`
}

func putJSON(txn *badger.Txn, k []byte, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return txn.Set(k, b)
}

// scan calls fn for every key/value under prefix.
func scan(db *badger.DB, prefix []byte, fn func(k, v []byte) error) error {
	return db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{PrefetchValues: true, PrefetchSize: 256, Prefix: prefix})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			v, err := it.Item().ValueCopy(nil)
			if err != nil {
				return err
			}
			if err := fn(it.Item().KeyCopy(nil), v); err != nil {
				return err
			}
		}
		return nil
	})
}

func (m *Mirror) getValue(k []byte) ([]byte, error) {
	var out []byte
	err := m.db.View(func(txn *badger.Txn) error {
		item, err := txn.Get(k)
		if err != nil {
			return err
		}
		out, err = item.ValueCopy(nil)
		return err
	})
	return out, err
}
