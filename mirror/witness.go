package mirror

import (
	"context"
	"encoding/json"
	"sort"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/adpnode/adpnode/adp/assertion"
	"github.com/adpnode/adpnode/adp/identity"
	"github.com/adpnode/adpnode/adp/record"
	"github.com/adpnode/adpnode/federation"
)

// Gossip topics of mirrors.
const (
	EvidenceTopic = "adp/evidence/1.0"
	WitnessTopic  = "adp/witness/1.0"
)

// maxEvidenceGossip is the largest evidence gossiped: the federation's
// gossip message limit (1 MiB) less room for the pubsub envelope.
const maxEvidenceGossip = 1<<20 - 4096

// recordEvidence stores, logs, counts and gossips evidence, and freezes the
// host's rooms.
func (m *Mirror) recordEvidence(ev *Evidence) {
	if err := ev.Verify(); err != nil {
		m.log.Error("self-made evidence does not verify", "room", ev.RoomID, "seq", ev.Seq, "err", err)
		return
	}
	b, _ := json.Marshal(ev)
	if !m.storeEvidence(ev, b) {
		return
	}
	m.log.Warn("host misbehaviour detected", "kind", ev.Kind, "host", ev.Host, "room", ev.RoomID, "seq", ev.Seq, "reason", ev.Reason)
	m.goLoop(func(context.Context) { m.markFaulty(ev.Host) }) // callers hold room locks
	if len(b) > maxEvidenceGossip {
		// An invalid_record proof carries the room's whole chain. Gossip
		// would drop it silently; it stays stored and served.
		m.log.Warn("evidence too large to gossip", "room", ev.RoomID, "seq", ev.Seq, "bytes", len(b))
		return
	}
	m.goLoop(func(ctx context.Context) {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		if err := m.evTopic.Publish(ctx, b); err != nil && m.ctx.Err() == nil {
			m.log.Warn("gossip evidence", "room", ev.RoomID, "seq", ev.Seq, "err", err)
		}
	})
}

// storeEvidence keeps the first evidence per host, room and seq.
func (m *Mirror) storeEvidence(ev *Evidence, b []byte) bool {
	k := seqKey(pfxEvidence, roomKey(ev.Host, ev.RoomID), ev.Seq)
	stored := false
	err := m.db.Update(func(txn *badger.Txn) error {
		if _, err := txn.Get(k); err == nil {
			return nil
		}
		stored = true
		return txn.Set(k, b)
	})
	if err != nil {
		// Not kept: the next sighting of the same fault tries again.
		m.log.Error("store evidence", "host", ev.Host, "room", ev.RoomID, "seq", ev.Seq, "err", err)
		return false
	}
	if stored {
		m.stats.Evidence.Add(1)
	}
	return stored
}

// EvidenceList returns every stored piece of evidence.
func (m *Mirror) EvidenceList() []json.RawMessage {
	var out []json.RawMessage
	scan(m.db, []byte(pfxEvidence), func(_, v []byte) error {
		out = append(out, v)
		return nil
	})
	return out
}

func (m *Mirror) validateEvidence(_ peer.ID, data []byte) (any, federation.Verdict) {
	var ev Evidence
	if json.Unmarshal(data, &ev) != nil || ev.Verify() != nil {
		return nil, federation.Reject
	}
	return &ev, federation.Accept
}

func (m *Mirror) deliverEvidence(v any, _ peer.ID) {
	ev := v.(*Evidence)
	b, _ := json.Marshal(ev)
	if m.storeEvidence(ev, b) {
		m.log.Warn("host misbehaviour reported by a peer", "kind", ev.Kind, "host", ev.Host, "room", ev.RoomID, "seq", ev.Seq)
	}
	m.markFaulty(ev.Host)
}

// cosignLoop cosigns, for every healthy mirrored room whose verified tip
// advanced, the host checkpoint at the tip.
//
// Gossip is fire-and-forget, so a cosignature the host missed (it was
// restarting, say) is sent again every resendEvery while the tip stays put,
// and stored evidence is re-gossiped as well, for peers that joined since.
func (m *Mirror) cosignLoop(ctx context.Context) {
	const resendEvery = 30 * time.Second
	t := time.NewTicker(m.cfg.CosignEvery)
	defer t.Stop()
	sent := map[*Room]time.Time{}
	lastEvidence := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			now := time.Now()
			if now.Sub(lastEvidence) >= resendEvery {
				lastEvidence = now
				m.regossipEvidence(ctx)
			}
			for _, r := range m.Rooms() {
				r.mu.Lock()
				cp, cpSeq, tip, frozen := r.cp, r.cpSeq, r.st.Seq, r.frozen
				fresh := cp != nil && cpSeq == tip && !frozen && (cpSeq > r.cosigned || now.Sub(sent[r]) >= resendEvery)
				if fresh {
					r.cosigned = cpSeq
				}
				r.mu.Unlock()
				if !fresh {
					continue
				}
				sent[r] = now
				raw, err := m.fed.Signer().Sign(assertion.TypeCosign, assertion.Cosign{Witness: m.fed.HostKey(), Checkpoint: cp}, m.now())
				if err == nil {
					r.keepWitness(m.fed.HostKey(), cpSeq, raw)
					err = m.wTopic.Publish(ctx, raw)
				}
				if err != nil && ctx.Err() == nil {
					m.log.Warn("cosign", "room", r.url, "err", err)
				}
			}
		}
	}
}

// regossipEvidence publishes stored evidence again (small pieces only:
// gossip messages are capped at 1 MiB).
func (m *Mirror) regossipEvidence(ctx context.Context) {
	for i, b := range m.EvidenceList() {
		if i >= 100 {
			return
		}
		if len(b) <= maxEvidenceGossip {
			m.evTopic.Publish(ctx, b)
		}
	}
}

// validateCosign accepts well-formed cosignatures (witness and host
// signatures valid). Whether the checkpoint matches the chain is for the
// host to judge in deliverCosign.
func (m *Mirror) validateCosign(author peer.ID, data []byte) (any, federation.Verdict) {
	c, err := assertion.OpenCosign(data)
	if err != nil {
		return nil, federation.Reject
	}
	if k, ok := federation.HostKeyOf(author); !ok || k != c.Witness {
		return nil, federation.Reject
	}
	return c, federation.Accept
}

// deliverCosign hands cosignatures of this node's own rooms to the host,
// which keeps those whose checkpoint matches its stored record (the newest
// per witness); cosignatures of rooms this node mirrors stay here.
func (m *Mirror) deliverCosign(v any, _ peer.ID) {
	c := v.(*assertion.Cosignature)
	if c.Checkpoint.Host != m.fed.HostKey() {
		m.deliverMirroredCosign(c)
		return
	}
	if err := m.n.KeepCosign(c); err != nil {
		// Not held: a witness of another chain. A storage error: the
		// witness resends its cosignature, and it is stored then.
		m.log.Warn("cosignature not kept", "witness", c.Witness, "room", c.Checkpoint.RoomID, "seq", c.Checkpoint.Seq, "err", err)
	}
}

// deliverMirroredCosign keeps another witness's cosignature of a room this
// node mirrors when the checkpoint names a record of the verified chain
// (same seq, same hash), for the mirror's archive of the room.
func (m *Mirror) deliverMirroredCosign(c *assertion.Cosignature) {
	if c.Witness == m.fed.HostKey() {
		return
	}
	r, ok := m.Room(c.Checkpoint.RoomID, c.Checkpoint.Host)
	if !ok {
		return
	}
	h, ok := r.recordHash(c.Checkpoint.Seq)
	if !ok || h != c.Checkpoint.Hash {
		return
	}
	r.keepWitness(c.Witness, c.Checkpoint.Seq, c.Raw)
}

// keepWitness stores a cosignature of this mirrored room unless one of the
// witness at a later or equal seq is already kept.
func (r *Room) keepWitness(witness identity.AgentID, seq int64, raw []byte) {
	k := []byte(pfxMirrorW + r.rk + "/" + string(witness))
	err := r.m.db.Update(func(txn *badger.Txn) error {
		if item, err := txn.Get(k); err == nil {
			old, _ := item.ValueCopy(nil)
			if prev, err := assertion.OpenCosign(old); err == nil && prev.Checkpoint.Seq >= seq {
				return nil
			}
		}
		return txn.Set(k, raw)
	})
	if err != nil {
		r.m.log.Warn("mirror witness", "room", r.url, "err", err)
	}
}

// witnesses lists the kept cosignatures of this mirrored room.
func (r *Room) witnesses() []json.RawMessage {
	out := []json.RawMessage{}
	scan(r.m.db, []byte(pfxMirrorW+r.rk+"/"), func(_, v []byte) error {
		out = append(out, append(json.RawMessage(nil), v...))
		return nil
	})
	sort.Slice(out, func(i, j int) bool { return string(out[i]) < string(out[j]) })
	return out
}

// recordHash returns the hash of the verified record at seq.
func (r *Room) recordHash(seq int64) (string, bool) {
	var hash string
	err := r.m.db.View(func(txn *badger.Txn) error {
		item, err := txn.Get(seqKey(pfxRec, r.rk, seq))
		if err != nil {
			return err
		}
		return item.Value(func(v []byte) error {
			rec, _, err := record.Parse(v)
			if err == nil {
				hash = rec.Hash
			}
			return err
		})
	})
	return hash, err == nil && hash != ""
}
