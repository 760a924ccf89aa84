package mirror

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/adpnode/adpnode/adp"
	"github.com/adpnode/adpnode/adp/assertion"
	"github.com/adpnode/adpnode/adp/identity"
	"github.com/adpnode/adpnode/adp/record"
	"github.com/adpnode/adpnode/adp/room"
	"github.com/adpnode/adpnode/directory"
	"github.com/adpnode/adpnode/federation"
	"github.com/adpnode/adpnode/hostport"
	"github.com/adpnode/adpnode/index"
	"github.com/adpnode/adpnode/internal/changefeed"
	"github.com/adpnode/adpnode/internal/groupcommit"
)

// maxPending bounds the out-of-order buffer of one room; beyond it records
// are dropped and backfilled later.
const maxPending = 20_000

// gapGrace is how long a stream record that arrived ahead of its
// predecessors waits for them before the room is backfilled. Gossip
// validates messages concurrently, so a host's stream often arrives a
// little out of order; backfilling at once fetches and verifies again what
// is already in flight, and under load that extra work makes the stream
// fall further behind.
const gapGrace = 100 * time.Millisecond

// Room is one mirrored room: its verified chain, replayed state and the
// host checkpoints that vouch for it.
type Room struct {
	m         *Mirror
	host      identity.AgentID
	hostPeer  peer.ID
	id        string
	url       string
	rk        string
	gapQueued atomic.Bool
	want      atomic.Int64 // highest seq known to exist

	hist *roomHistory

	mu       sync.Mutex
	meta     roomMeta
	st       *room.State
	snapSeq  int64  // seq of the newest stored snapshot
	removed  bool   // purged: store no snapshot
	cp       []byte // latest host checkpoint at or below the tip
	cpSeq    int64
	pending  map[int64]pendingRec
	gapArmed bool        // a gap check is scheduled
	gapTimer *time.Timer // the scheduled gap check (stopped in Mirror.Close)
	frozen   bool
	bytes    int64
	diskWait atomic.Bool // a retry is queued because the disk was full
	stallErr string      // why the last catch-up made no progress ("" when it did)
}

// pendingRec is a verified stream record waiting for its predecessors.
type pendingRec struct {
	rec  *record.Record
	env  *identity.Envelope
	cp   []byte
	live bool // arrived on the live stream
}

func (m *Mirror) newRoom(meta roomMeta, hostPeer peer.ID) *Room {
	rk := roomKey(meta.Host, meta.RoomID)
	hist := newRoomHistory(m.db, rk)
	return &Room{m: m, host: meta.Host, hostPeer: hostPeer, id: meta.RoomID, url: meta.URL, rk: rk, hist: hist,
		meta: meta, st: room.New(m.roomConfig(hist)), pending: map[int64]pendingRec{}}
}

// roomConfig is the kernel configuration of a mirrored room.
func (m *Mirror) roomConfig(hist *roomHistory) room.Config {
	return room.Config{Limits: room.ReplayLimits(), Packs: m.n.ExternalPacks(), History: hist}
}

// restoreRoom rebuilds a room from storage: from its stored snapshot and
// the records after it, or by verified replay of its whole chain when there
// is no usable snapshot (see loadSnapshot). Every replayed record is
// verified by the kernel. It returns whether a snapshot was used and how
// many records were replayed.
func (m *Mirror) restoreRoom(meta roomMeta) (*Room, bool, int, error) {
	hp, err := peer.Decode(meta.HostPeer)
	if err != nil {
		return nil, false, 0, err
	}
	r := m.newRoom(meta, hp)
	r.frozen = meta.Faulty
	fromSnapshot := false
	if st, bytes, ok := m.loadSnapshot(r); ok {
		r.st, r.bytes, r.snapSeq, fromSnapshot = st, bytes, st.Seq, true
	}
	replayed, err := r.replay()
	if err != nil && fromSnapshot {
		m.log.Warn("mirror room does not replay from its snapshot; replaying the whole chain", "room", meta.URL, "err", err)
		r = m.newRoom(meta, hp)
		r.frozen = meta.Faulty
		fromSnapshot = false
		replayed, err = r.replay()
	}
	if err != nil {
		return nil, false, 0, err
	}
	m.bytes.Add(r.bytes)
	// The newest stored checkpoint.
	err = m.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Reverse: true, Prefix: []byte(pfxCp + r.rk + "/")})
		defer it.Close()
		it.Seek(seqKey(pfxCp, r.rk, 1<<62))
		if it.Valid() {
			k := it.Item().Key()
			r.cpSeq = int64(binary.BigEndian.Uint64(k[len(k)-8:]))
			r.cp, err = it.Item().ValueCopy(nil)
			return err
		}
		return nil
	})
	return r, fromSnapshot, replayed, err
}

// replayIndexBatch is how many replayed records' hashes are indexed per
// write batch; until a batch is written, the room's history answers them
// from memory.
const replayIndexBatch = 4096

// replay applies the stored records after the state's seq (all of them for
// a new state), and indexes their hashes: a data dir written before the
// hash index gets it during its first (whole) replay.
func (r *Room) replay() (int, error) {
	replayed := 0
	wb := r.m.db.NewWriteBatch()
	defer func() { wb.Cancel() }()
	flush := func(seq int64) error {
		if err := wb.Flush(); err != nil {
			return fmt.Errorf("index record hashes: %w", err)
		}
		r.hist.durable(seq)
		wb = r.m.db.NewWriteBatch()
		return nil
	}
	err := r.m.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{PrefetchValues: true, PrefetchSize: 256, Prefix: []byte(pfxRec + r.rk + "/")})
		defer it.Close()
		for it.Seek(seqKey(pfxRec, r.rk, r.st.Seq+1)); it.Valid(); it.Next() {
			k := it.Item().Key()
			seq := int64(binary.BigEndian.Uint64(k[len(k)-8:]))
			v, err := it.Item().ValueCopy(nil)
			if err != nil {
				return err
			}
			rec, env, err := record.Parse(v)
			if err != nil {
				return fmt.Errorf("seq %d: %w", seq, err)
			}
			if rec.Seq != seq || rec.RoomID != r.id {
				return fmt.Errorf("stored under seq %d: record of room %s seq %d", seq, rec.RoomID, rec.Seq)
			}
			if err := r.st.Apply(rec, env, nil); err != nil {
				return fmt.Errorf("seq %d: %w", seq, err)
			}
			for _, kv := range hashEntries(r.rk, rec, env) {
				if err := wb.Set(kv.K, kv.V); err != nil {
					return err
				}
			}
			r.bytes += int64(len(v))
			replayed++
			if replayed%replayIndexBatch == 0 {
				if err := flush(seq); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	if err := flush(r.st.Seq); err != nil {
		return 0, err
	}
	return replayed, nil
}

// hashEntries are the hash index entries of a record: its record hash and
// its envelope hash, each naming its seq.
func hashEntries(rk string, rec *record.Record, env *identity.Envelope) []groupcommit.KV {
	h, _ := identity.DecodeB64Len(rec.Hash, 32) // a parsed record's hash decodes
	v := seqValue(rec.Seq)
	return []groupcommit.KV{{K: hashKey(rk, [32]byte(h)), V: v}, {K: hashKey(rk, env.Digest), V: v}}
}

func (r *Room) saveMeta() error {
	r.mu.Lock()
	meta := r.meta
	r.mu.Unlock()
	return r.m.db.Update(func(txn *badger.Txn) error { return putJSON(txn, []byte(pfxMeta+r.rk), meta) })
}

// Tip returns the verified tip seq.
func (r *Room) Tip() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.st.Seq
}

func (r *Room) wantSeq(seq int64) {
	for {
		cur := r.want.Load()
		if seq <= cur || r.want.CompareAndSwap(cur, seq) {
			return
		}
	}
}

// entryLike returns an index entry for target matching of a stored room.
func (r *Room) entryLike() *index.Entry {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := &index.Entry{}
	e.Room = directory.Entry{ID: r.id, URL: r.url, Visibility: room.Public, Tags: r.st.Tags}
	e.Host = index.Binding{Key: r.host, PeerID: r.hostPeer.String()}
	if u := r.url; len(u) > 0 {
		if i := indexOfPath(u); i > 0 {
			e.Host.Origin = u[:i]
		}
	}
	return e
}

func indexOfPath(u string) int {
	for i := len("https://"); i < len(u); i++ {
		if u[i] == '/' {
			return i
		}
	}
	return -1
}

// offerStream takes a verified stream record (record and its own host
// checkpoint already checked by the gossip validator).
func (r *Room) offerStream(sr *federation.StreamedRecord) {
	r.wantSeq(sr.Record.Seq)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.frozen {
		return
	}
	tip := r.st.Seq
	seq := sr.Record.Seq
	switch {
	case seq <= tip:
		r.checkConflictLocked(sr.Record, sr.Signed)
	case seq == tip+1:
		if r.applyLocked(sr.Record, sr.Envelope, sr.Signed, true) {
			r.drainLocked()
		}
	default:
		if len(r.pending) < maxPending {
			r.pending[seq] = pendingRec{sr.Record, sr.Envelope, sr.Signed, true}
		}
		r.armGapLocked()
	}
}

// armGapLocked schedules a gap check gapGrace from now, unless one is
// scheduled.
func (r *Room) armGapLocked() {
	if r.gapArmed || r.m.ctx.Err() != nil {
		return
	}
	r.gapArmed = true
	tip := r.st.Seq
	r.gapTimer = time.AfterFunc(gapGrace, func() { r.gapCheck(tip) })
}

// gapCheck backfills the room if records still wait for predecessors and
// the tip has not moved since the check was armed at armedTip; if it moved,
// the stream is filling the gap and the check is armed again.
func (r *Room) gapCheck(armedTip int64) {
	if r.m.ctx.Err() != nil {
		return
	}
	r.mu.Lock()
	r.gapArmed = false
	waiting := len(r.pending) > 0 && !r.frozen
	if waiting && r.st.Seq > armedTip {
		r.armGapLocked()
		waiting = false
	}
	r.mu.Unlock()
	if waiting {
		r.m.queueGap(r)
	}
}

// drainLocked applies buffered records that now continue the chain.
func (r *Room) drainLocked() {
	for {
		p, ok := r.pending[r.st.Seq+1]
		if !ok {
			break
		}
		delete(r.pending, p.rec.Seq)
		if !r.applyLocked(p.rec, p.env, p.cp, p.live) {
			return
		}
	}
	for s := range r.pending {
		if s <= r.st.Seq {
			delete(r.pending, s)
		}
	}
}

// applyLocked replays one authenticated record (vouched for by cp, or by a
// later checkpoint through the hash chain, checked by the caller) and
// stores it. A record the kernel rejects is evidence against the host.
func (r *Room) applyLocked(rec *record.Record, env *identity.Envelope, cp []byte, live bool) bool {
	if r.frozen {
		return false
	}
	if rec.RoomID != r.id {
		return false
	}
	if r.m.n.DiskFull() {
		// The node's disk is below its reserve: store nothing, fetch
		// again later (backfill) once space is back; one retry queued
		// per room at a time.
		if r.diskWait.CompareAndSwap(false, true) {
			r.m.goLoop(func(ctx context.Context) {
				select {
				case <-ctx.Done():
				case <-time.After(5 * time.Second):
					r.diskWait.Store(false)
					r.m.queueGap(r)
				}
			})
		}
		return false
	}
	if err := r.st.Apply(rec, env, nil); err != nil {
		var ce *record.ChainError
		switch {
		case adp.CodeOf(err) == adp.CodePackUnavailable:
			// Not the host's fault: the pack could not be fetched now.
			// Try again later; nothing is stored meanwhile.
			r.m.log.Warn("mirror cannot fetch an external pack yet", "room", r.url, "seq", rec.Seq, "err", err)
			r.m.retryLater(r)
		case adp.CodeOf(err) == adp.CodeUnavailable:
			// Not the host's fault either: this mirror could not read its
			// own store. Nothing is stored; fetched again later.
			r.m.log.Error("mirror cannot read its store; retrying the record later", "room", r.url, "seq", rec.Seq, "err", err)
			r.m.retryLater(r)
		case cp == nil:
			r.m.stats.Refused.Add(1)
			r.m.log.Warn("mirror refused record", "room", r.url, "seq", rec.Seq, "err", err)
		case errors.As(err, &ce) && rec.Seq == r.st.Seq+1:
			// The host vouches for a record at tip+1 that does not continue
			// the chain it vouched for before: a fork right after the tip.
			raw, _ := rec.MarshalJSON()
			if ev, eerr := r.equivocationLocked(r.st.Seq, cp); eerr == nil {
				ev.Conflict = []json.RawMessage{raw}
				ev.Reason = "host vouched for a record that does not continue its own chain at seq " + fmt.Sprint(rec.Seq)
				r.m.recordEvidence(ev)
			}
		default:
			r.invalidLocked(rec, cp, err)
		}
		return false
	}
	raw, _ := rec.MarshalJSON()
	sets := append([]groupcommit.KV{{K: seqKey(pfxRec, r.rk, rec.Seq), V: raw}}, hashEntries(r.rk, rec, env)...)
	if cp != nil {
		sets = append(sets, groupcommit.KV{K: seqKey(pfxCp, r.rk, rec.Seq), V: cp})
	}
	// Stored by the group committer: many records share one fsync. A
	// mirror is not authoritative, so acknowledging nothing, it may lose a
	// suffix in a crash and backfill it again.
	onVerified := r.m.cfg.OnVerified
	id, hist := r.id, r.hist
	if err := r.m.commit.EnqueueEntry(sets, changefeed.Entry(rec, hostport.FeedFlagsOf(&env.Event)), func(_ uint64, err error) {
		if err != nil {
			// The history keeps answering the record from memory.
			r.m.log.Error("mirror store", "room", id, "seq", rec.Seq, "err", err)
			return
		}
		hist.durable(rec.Seq)
		if onVerified != nil {
			onVerified(id, rec, live)
		}
	}); err != nil {
		r.frozen = true
		return false
	}
	if cp != nil {
		r.cp, r.cpSeq = cp, rec.Seq
	}
	r.bytes += int64(len(raw))
	r.m.bytes.Add(int64(len(raw)))
	r.m.stats.Verified.Add(1)
	r.m.publish(r.rk, raw)
	return true
}

// checkConflictLocked compares a host-signed record at or below the tip
// with the stored chain: the same hash is a duplicate; another hash is
// equivocation, provable with the stored chain and checkpoints.
func (r *Room) checkConflictLocked(rec *record.Record, cp []byte) {
	have, ok, err := r.st.RecordHash(rec.Seq)
	if err != nil {
		// Not read: no evidence against the host from a failing disk.
		r.m.log.Error("mirror history read", "room", r.url, "seq", rec.Seq, "err", err)
		return
	}
	if !ok || have == rec.Hash {
		return
	}
	ev, err := r.equivocationLocked(rec.Seq, cp)
	if err != nil {
		r.m.log.Error("building equivocation evidence", "room", r.url, "seq", rec.Seq, "err", err)
		return
	}
	r.m.recordEvidence(ev)
}

// equivocationLocked builds evidence that the host vouched for two chains:
// the stored records from seq up to the nearest stored checkpoint (a), and
// the conflicting checkpoint (b).
func (r *Room) equivocationLocked(seq int64, b []byte) (*Evidence, error) {
	if err := r.m.commit.Flush(); err != nil {
		return nil, err
	}
	var a []byte
	var recs []json.RawMessage
	err := r.m.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte(pfxCp + r.rk + "/")})
		defer it.Close()
		it.Seek(seqKey(pfxCp, r.rk, seq))
		if !it.Valid() {
			return fmt.Errorf("no stored checkpoint at or after seq %d", seq)
		}
		k := it.Item().Key()
		aSeq := int64(binary.BigEndian.Uint64(k[len(k)-8:]))
		var err error
		if a, err = it.Item().ValueCopy(nil); err != nil {
			return err
		}
		for s := seq; s <= aSeq; s++ {
			item, err := txn.Get(seqKey(pfxRec, r.rk, s))
			if err != nil {
				return err
			}
			v, err := item.ValueCopy(nil)
			if err != nil {
				return err
			}
			recs = append(recs, v)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &Evidence{Type: "adp.evidence", Kind: KindEquivocation, Host: r.host, RoomID: r.id, Seq: seq,
		Reason: fmt.Sprintf("host signed checkpoints for two different records at seq %d", seq), DetectedAt: r.m.now(),
		Detector: r.m.fed.HostKey(), Checkpoints: []json.RawMessage{a, b}, Records: recs}, nil
}

// invalidLocked records that the host vouched for a record the rules
// reject.
func (r *Room) invalidLocked(rec *record.Record, cp []byte, why error) {
	if err := r.m.commit.Flush(); err != nil {
		r.m.log.Error("store mirrored records", "room", r.id, "err", err)
	}
	var recs []json.RawMessage
	if err := scan(r.m.db, []byte(pfxRec+r.rk+"/"), func(_, v []byte) error {
		recs = append(recs, v)
		return nil
	}); err != nil {
		// Evidence without every earlier record does not verify offline:
		// keep none rather than a partial one.
		r.m.log.Error("read mirrored records for evidence", "room", r.id, "err", err)
		return
	}
	raw, _ := rec.MarshalJSON()
	recs = append(recs, raw)
	r.m.recordEvidence(&Evidence{Type: "adp.evidence", Kind: KindInvalidRecord, Host: r.host, RoomID: r.id, Seq: rec.Seq,
		Reason: why.Error(), DetectedAt: r.m.now(), Detector: r.m.fed.HostKey(), Checkpoints: []json.RawMessage{cp}, Records: recs})
}

// freeze stops ingest at the last consistent seq.
func (r *Room) freeze() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.freezeLocked()
}

func (r *Room) freezeLocked() {
	if r.frozen && r.meta.Faulty {
		return
	}
	r.frozen = true
	r.meta.Faulty, r.meta.FrozenAt = true, r.st.Seq
	meta := r.meta
	r.pending = map[int64]pendingRec{}
	if err := r.m.db.Update(func(txn *badger.Txn) error { return putJSON(txn, []byte(pfxMeta+r.rk), meta) }); err != nil {
		// Frozen in memory; after a restart replay finds the fault again.
		r.m.log.Error("store frozen mirror room", "room", r.id, "seq", meta.FrozenAt, "err", err)
	}
	r.m.live.CloseTopic(r.rk, reasonFrozen)
}

// remove freezes the room and returns the key prefixes of its stored data,
// for the caller to drop (reclaim.DropPrefixes, once for all rooms removed).
func (r *Room) remove() [][]byte {
	r.mu.Lock()
	r.m.live.CloseTopic(r.rk, reasonRemoved)
	r.mu.Unlock()
	r.freeze()
	r.mu.Lock()
	r.removed = true
	r.mu.Unlock()
	r.m.bytes.Add(-r.bytes)
	r.m.dropHostLogProof(r.rk)
	return [][]byte{[]byte(pfxProof + r.rk), []byte(pfxRec + r.rk + "/"), []byte(pfxCp + r.rk + "/"), []byte(pfxHash + r.rk + "/"), []byte(pfxSnap + r.rk), []byte(pfxMeta + r.rk)}
}

// preparedBatch is a backfill batch whose records parsed, verified and
// chain among themselves, cut at the highest record a host checkpoint of
// this room vouches for; it is not yet compared with the room's chain.
type preparedBatch struct {
	recs     []*record.Record
	envs     []*identity.Envelope
	vouched  int // index of the vouched record
	vouchCp  []byte
	firstSeq int64
}

// next is the seq after the batch's vouched part.
func (p *preparedBatch) next() int64 { return p.firstSeq + int64(p.vouched) + 1 }

// prepareBatch runs the checks of a batch that do not depend on the
// room's state (parse, signatures, links, checkpoint), without the room
// lock, so a catch-up can verify the next batch while the previous one is
// applied. nil, nil for an empty batch.
func (r *Room) prepareBatch(b *federation.BackfillBatch) (*preparedBatch, error) {
	if len(b.Records) == 0 {
		return nil, nil
	}
	recs := make([]*record.Record, len(b.Records))
	envs := make([]*identity.Envelope, len(b.Records))
	if err := parseParallel(b.Records, recs, envs); err != nil {
		return nil, err
	}
	for i := 1; i < len(recs); i++ {
		if err := record.Link(recs[i-1], recs[i]); err != nil {
			return nil, fmt.Errorf("batch does not chain: %w", err)
		}
	}
	// The highest record a host checkpoint vouches for.
	vouched := -1
	var vouchCp []byte
	for _, raw := range b.Checkpoints {
		cp, err := assertion.OpenCheckpoint(raw)
		if err != nil || cp.Host != r.host || cp.RoomID != r.id {
			continue
		}
		i := int(cp.Seq - recs[0].Seq)
		if i < 0 || i >= len(recs) {
			continue
		}
		if recs[i].Hash != cp.Hash {
			return nil, fmt.Errorf("checkpoint for seq %d names another record than the batch holds", cp.Seq)
		}
		if i > vouched {
			vouched, vouchCp = i, raw
		}
	}
	if vouched < 0 {
		return nil, fmt.Errorf("no host checkpoint vouches for the batch")
	}
	return &preparedBatch{recs: recs, envs: envs, vouched: vouched, vouchCp: vouchCp, firstSeq: recs[0].Seq}, nil
}

// applyBatch applies a prepared batch's vouched records under the room
// lock: records at or below the tip must match the stored chain, the rest
// must continue it.
func (r *Room) applyBatch(p *preparedBatch) (int, error) {
	recs, envs, vouched, vouchCp := p.recs, p.envs, p.vouched, p.vouchCp
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.frozen {
		return 0, nil
	}
	applied := 0
	for i := 0; i <= vouched; i++ {
		rec := recs[i]
		switch tip := r.st.Seq; {
		case rec.Seq <= tip:
			have, _, err := r.st.RecordHash(rec.Seq)
			if err != nil {
				return applied, fmt.Errorf("batch record %d: %w", rec.Seq, err)
			}
			if have != rec.Hash {
				if i == vouched {
					r.checkConflictLocked(rec, vouchCp)
				}
				return applied, fmt.Errorf("batch record %d differs from the verified chain", rec.Seq)
			}
		case rec.Seq == tip+1:
			var cp []byte
			if i == vouched {
				cp = vouchCp
			}
			if !r.applyLocked(rec, envs[i], cp, false) {
				return applied, fmt.Errorf("record %d was refused", rec.Seq)
			}
			applied++
		default:
			return applied, fmt.Errorf("batch starts at seq %d, past the tip %d", rec.Seq, tip)
		}
	}
	r.drainLocked()
	return applied, nil
}

// parseParallel parses and verifies records on every core: signature
// checks dominate catch-up.
func parseParallel(raws []json.RawMessage, recs []*record.Record, envs []*identity.Envelope) error {
	workers := min(runtime.GOMAXPROCS(0), len(raws))
	var wg sync.WaitGroup
	errs := make([]error, workers)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := w; i < len(raws); i += workers {
				r, env, err := record.Parse(raws[i])
				if err != nil {
					errs[w] = fmt.Errorf("record %d: %w", i, err)
					return
				}
				recs[i], envs[i] = r, env
			}
		}(w)
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
