package node

import (
	"encoding/json"
	"errors"
	"sort"

	"github.com/dgraph-io/badger/v4"

	"github.com/adpnode/adpnode/adp"
	"github.com/adpnode/adpnode/adp/assertion"
	"github.com/adpnode/adpnode/adp/identity"
)

// The host side of witnessing: other nodes' mirrors cosign checkpoints of
// this node's rooms (mirror.cosignLoop); the node keeps, per room and
// witness, the newest cosignature whose checkpoint names a record it holds,
// and lists them in the archive manifest's extra with its host key.

// AcceptCosignatures makes the archive manifests of this node's rooms carry
// hostKey (the node's federation key, which signs its checkpoints) and the
// stored cosignatures (Manifest.Extra "host_key" and "witnesses").
func (n *Node) AcceptCosignatures(hostKey identity.AgentID) {
	n.lisMu.Lock()
	n.witnessKey = hostKey
	n.lisMu.Unlock()
}

// ErrCosignNotHeld is KeepCosign's answer for a checkpoint that does not
// name a record this node holds (another seq, another hash, not its room).
var ErrCosignNotHeld = adp.Errorf(adp.CodeInvalidEvent, "cosignature of a checkpoint this host does not hold")

// KeepCosign stores c, a verified cosignature of a checkpoint of one of
// this node's rooms, if the checkpoint matches the stored record and no
// cosignature of the same witness at a later or equal seq is kept.
func (n *Node) KeepCosign(c *assertion.Cosignature) error {
	h, ok := n.RecordHash(c.Checkpoint.RoomID, c.Checkpoint.Seq)
	if !ok || h != c.Checkpoint.Hash {
		return ErrCosignNotHeld
	}
	k := witnessKey(c.Checkpoint.RoomID, c.Witness)
	return n.db.Update(func(txn *badger.Txn) error {
		item, err := txn.Get(k)
		switch {
		case err == nil:
			old, err := item.ValueCopy(nil)
			if err != nil {
				return err
			}
			if prev, err := assertion.OpenCosign(old); err == nil && prev.Checkpoint.Seq >= c.Checkpoint.Seq {
				return nil
			}
		case !errors.Is(err, badger.ErrKeyNotFound):
			return err
		}
		return txn.Set(k, c.Raw)
	})
}

// witnessExtra is the manifest extra of a room: host_key and witnesses,
// once AcceptCosignatures has been called; nil before.
func (n *Node) witnessExtra(roomID string) map[string]any {
	n.lisMu.RLock()
	key := n.witnessKey
	n.lisMu.RUnlock()
	if key == "" {
		return nil
	}
	return map[string]any{"host_key": key, "witnesses": n.witnesses(roomID)}
}

// witnesses lists the stored cosignatures of a room, in byte order.
func (n *Node) witnesses(roomID string) []json.RawMessage {
	out := []json.RawMessage{}
	prefix := []byte(pfxWitness + roomID + "/")
	err := n.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{PrefetchValues: true, Prefix: prefix})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			v, err := it.Item().ValueCopy(nil)
			if err != nil {
				return err
			}
			out = append(out, v)
		}
		return nil
	})
	if err != nil {
		n.log.Warn("read witness cosignatures", "room", roomID, "err", err)
	}
	sort.Slice(out, func(i, j int) bool { return string(out[i]) < string(out[j]) })
	return out
}

func witnessKey(roomID string, witness identity.AgentID) []byte {
	return []byte(pfxWitness + roomID + "/" + string(witness))
}
