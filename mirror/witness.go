package mirror

import (
	"context"
	"encoding/json"
	"net/url"
	"slices"
	"sort"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/adpnode/adpnode/adp/assertion"
	"github.com/adpnode/adpnode/adp/identity"
	"github.com/adpnode/adpnode/adp/tlogproof"
	"github.com/adpnode/adpnode/federation"
	"github.com/adpnode/adpnode/index"
)

// Gossip topics of mirrors.
const (
	EvidenceTopic = "adp/evidence/1.0"
	// WitnessTopic carries witness announcements (assertion.TypeWitness).
	// The retired checkpoint.cosign assertions went on adp/witness/1.0.
	WitnessTopic = "adp/witness-announce/1.0"
)

// WitnessPath is where a node serves its mirror's tlog-witness: the
// submission prefix below its origin.
const WitnessPath = "/v1/witness"

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
	_ = scan(m.db, []byte(pfxEvidence), func(_, v []byte) error {
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

// evidenceLoop gossips this mirror's witness announcement every
// AnnounceWitnessEvery, and re-gossips stored evidence every 30 s for
// peers that joined since (gossip is fire-and-forget).
func (m *Mirror) evidenceLoop(ctx context.Context) {
	const resendEvery = 30 * time.Second
	t := time.NewTicker(m.cfg.AnnounceWitnessEvery)
	defer t.Stop()
	lastEvidence := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if now := time.Now(); now.Sub(lastEvidence) >= resendEvery {
				lastEvidence = now
				m.regossipEvidence(ctx)
			}
			m.announceWitness(ctx)
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
			_ = m.evTopic.Publish(ctx, b) // best effort: published again on the next pass
		}
	}
}

// announceWitness gossips which host logs this mirror's tlog-witness
// witnesses (the origins of the healthy hosts it mirrors) and where to
// submit, so that those hosts submit their checkpoints to it.
func (m *Mirror) announceWitness(ctx context.Context) {
	if m.witness == nil || m.wTopic == nil {
		return
	}
	logs := m.witnessedLogs()
	if len(logs) == 0 {
		return
	}
	raw, err := m.fed.Signer().Sign(assertion.TypeWitness, assertion.Witness{Witness: m.fed.HostKey(),
		VKey: m.witness.VerifierKey(), URL: m.n.Origin() + WitnessPath, Logs: logs}, m.now())
	if err == nil {
		err = m.wTopic.Publish(ctx, raw)
	}
	if err != nil && ctx.Err() == nil {
		m.log.Warn("announce witness", "err", err)
	}
}

// witnessedLogs lists the log origins of the hosts this mirror mirrors
// and does not hold faulty (their rooms' and their current ones), sorted, at most assertion.MaxWitnessLogs.
func (m *Mirror) witnessedLogs() []string {
	seen := map[string]bool{}
	for _, r := range m.Rooms() {
		u, err := url.Parse(r.url)
		if err != nil || u.Host == "" || m.Faulty(r.host) {
			continue
		}
		seen[tlogproof.Origin(u.Host)] = true
		if o := m.currentOrigin(r.host); o != "" {
			seen[o] = true
		}
	}
	out := make([]string, 0, len(seen))
	for o := range seen {
		out = append(out, o)
	}
	sort.Strings(out)
	if len(out) > assertion.MaxWitnessLogs {
		out = out[:assertion.MaxWitnessLogs]
	}
	return out
}

// validateWitness accepts well-formed witness announcements by the peer
// whose key signed them.
func (m *Mirror) validateWitness(author peer.ID, data []byte) (any, federation.Verdict) {
	w, err := assertion.OpenWitness(data)
	if err != nil {
		return nil, federation.Reject
	}
	if k, ok := federation.HostKeyOf(author); !ok || k != w.Witness {
		return nil, federation.Reject
	}
	return w, federation.Accept
}

// deliverWitness hands announcements of witnesses that witness this
// node's own host log to the listener (the host's witness submitter,
// which checks the witness's origin before it submits there).
func (m *Mirror) deliverWitness(v any, _ peer.ID) {
	w := v.(assertion.Witness)
	if w.Witness == m.fed.HostKey() {
		return
	}
	m.noteAnnounced(w.VKey, w.Logs)
	own := tlogproof.Origin(m.n.Host())
	if !slices.Contains(w.Logs, own) {
		return
	}
	m.witnessMu.Lock()
	fn := m.onWitness
	m.witnessMu.Unlock()
	if fn != nil {
		fn(w)
	}
}

// OnWitness registers fn to be told of the witnesses that announce they
// witness this node's host log (from gossip; fn must not block).
func (m *Mirror) OnWitness(fn func(assertion.Witness)) {
	m.witnessMu.Lock()
	m.onWitness = fn
	m.witnessMu.Unlock()
}

// announcedOrigin is a host's log origin as its newest verified
// announcement names it.
type announcedOrigin struct {
	origin string // the log origin
	base   string // scheme://host[:port]: where the host answers now
	issued int64
}

// maxOrigins bounds the hosts whose current origin is kept.
const maxOrigins = 4096

// noteOrigin keeps the log origin of the host of a mirrored room's
// announcement when federation verified its binding (the origin's
// discovery document names the host key and peer), newest announcement
// first. A host that changed its public URL announces its rooms under the
// new origin: its log goes on under that origin (tlog), and the witness
// follows it. The rooms keep the URLs they were mirrored under.
func (m *Mirror) noteOrigin(e *index.Entry) {
	if !m.fed.Verified(e.Host) {
		return
	}
	u, err := url.Parse(e.Host.Origin)
	if err != nil || u.Host == "" {
		return
	}
	o := tlogproof.Origin(u.Host)
	m.originsMu.Lock()
	defer m.originsMu.Unlock()
	cur, ok := m.origins[e.Host.Key]
	if ok && (cur.origin == o || cur.issued > e.IssuedAt) {
		return
	}
	if m.origins == nil || len(m.origins) >= maxOrigins && !ok {
		m.origins = map[identity.AgentID]announcedOrigin{} // bounded: refilled from the index
	}
	m.origins[e.Host.Key] = announcedOrigin{origin: o, base: u.Scheme + "://" + u.Host, issued: e.IssuedAt}
}

// currentOrigin returns the host's log origin from its newest verified
// announcement ("" when none was seen).
func (m *Mirror) currentOrigin(host identity.AgentID) string {
	m.originsMu.Lock()
	defer m.originsMu.Unlock()
	return m.origins[host].origin
}

// proofOrigin returns where the host of a room answers for its log
// (scheme://host[:port]) and the log origin its proofs are signed under:
// its current ones when its newest verified announcement names another
// origin than the room's URL (the host changed its public URL), else the
// room URL's.
func (m *Mirror) proofOrigin(r *Room) (base, logOrigin string) {
	base = m.hl.base(r)
	u, err := url.Parse(r.url)
	if err != nil || u.Host == "" {
		return base, ""
	}
	logOrigin = tlogproof.Origin(u.Host)
	m.originsMu.Lock()
	cur, ok := m.origins[r.host]
	m.originsMu.Unlock()
	if ok && cur.origin != logOrigin {
		return cur.base, cur.origin
	}
	return base, logOrigin
}
