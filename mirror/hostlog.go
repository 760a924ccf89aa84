package mirror

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/adpnode/adpnode/adp/archive"
	"github.com/adpnode/adpnode/adp/room"
	"github.com/adpnode/adpnode/adp/tlogproof"
	"github.com/adpnode/adpnode/adp/tlogwitness"
	"github.com/adpnode/adpnode/internal/periodic"
	"github.com/adpnode/adpnode/internal/safehttp"
)

// The host log's proof in a mirror's archives. A host's own archive embeds
// extra.host_log, the proof of the room's last record in its transparency
// log; a mirror serving the same room fetches that proof once the room has
// ended (its last record is final), checks it with the kernel against the
// chain it verified itself (archive.CheckHostLogProof), stores it under
// m/p/ and embeds it, so a reader of the mirror's archive gets the same
// guarantee as from the host, witnesses included.
//
// Fetches run off every lock on a pool of proofWorkers goroutines for all
// rooms together, through the mirror's guarded HTTP client, with a body
// cap and a per-room backoff. A proof is replaced only by a stronger one
// (more cosignatures of witnesses the mirror knows, then more verified
// cosignatures); once a known witness cosigned it, the room is done.
const (
	proofWorkers      = 2                      // fetches in flight, all rooms together
	proofBodyMax      = 64 << 10               // bytes read of an answer
	proofBackoffMin   = 5 * time.Second        // first wait after an attempt
	proofBackoffMax   = 10 * time.Minute       // the wait stops doubling here
	proofScanEvery    = 500 * time.Millisecond // while a room needs looking at
	proofScanIdle     = 30 * time.Second       // otherwise (a safety net)
	proofFetchTimeout = 10 * time.Second
	proofQueue        = 64 // rooms queued for the workers; the rest wait for the next scan
	// maxAnnouncedLogs and maxAnnouncedKeys bound the witness keys
	// remembered from announcements (known keys).
	maxAnnouncedLogs = 1024
	maxAnnouncedKeys = 32
)

// InclusionPath is the host API path of one record's log proof (hostapi).
const InclusionPath = "/v1/log/inclusion"

// storedProof is the value under m/p/<host key>/<room>. In memory the
// mirror keeps it without Proof (read from Badger when an archive is
// built), so a thousand rooms' proofs cost no memory.
type storedProof struct {
	Seq        int64           `json:"seq"`
	RecordHash string          `json:"record_hash"`
	Known      int             `json:"known"`     // cosignatures of witnesses the mirror knew
	Witnesses  int             `json:"witnesses"` // verified cosignatures
	Proof      *tlogproof.File `json:"proof"`
}

func (p *storedProof) check() *archive.HostLogCheck {
	if p == nil {
		return nil
	}
	return &archive.HostLogCheck{Known: p.Known, Witnesses: make([]tlogwitness.Cosigned, p.Witnesses)}
}

// proofState is one room's fetch schedule.
type proofState struct {
	next    time.Time     // no fetch before
	backoff time.Duration // the last wait; doubles after each attempt
	queued  bool
	done    bool // a known witness cosigned the stored proof, or upgrades gave up
	stored  *storedProof
}

// proofJob is one queued fetch: the room and the last record it wants proved.
type proofJob struct {
	r    *Room
	seq  int64
	hash string
}

// hostLogs is the mirror's proof fetcher.
type hostLogs struct {
	client *http.Client
	q      chan proofJob
	// base returns the origin whose InclusionPath answers for a room
	// (tests point it elsewhere).
	base func(r *Room) string

	mu        sync.Mutex
	rooms     map[string]*proofState         // by room key
	announced map[string]map[string]struct{} // log origin -> witness vkeys announced for it

	inflight, maxInflight atomic.Int64
	scans                 atomic.Int64
	wake                  *periodic.Signal // wakes the scan (wakeProofScan)
}

func (m *Mirror) openHostLogs() error {
	m.hl = &hostLogs{
		client: safehttp.Client(safehttp.Options{Timeout: proofFetchTimeout, AllowPrivate: m.cfg.AllowPrivateTargets}),
		q:      make(chan proofJob, proofQueue), base: roomOrigin,
		rooms: map[string]*proofState{}, announced: map[string]map[string]struct{}{},
		wake: periodic.NewSignal(),
	}
	return scan(m.db, []byte(pfxProof), func(k, v []byte) error {
		var p storedProof
		if err := json.Unmarshal(v, &p); err != nil || p.Proof == nil {
			m.log.Warn("unreadable stored host log proof; fetching it again", "key", string(k))
			return nil
		}
		p.Proof = nil
		m.hl.rooms[string(k[len(pfxProof):])] = &proofState{stored: &p, done: p.Known > 0}
		return nil
	})
}

// startHostLogs starts the scan and the workers (goroutines the mirror
// owns, stopped by Close).
func (m *Mirror) startHostLogs() {
	m.goLoop(func(ctx context.Context) {
		periodic.Loop(ctx, m.hl.wake.C(), proofScanEvery, proofScanIdle, func() time.Duration {
			if m.scanProofs() {
				return proofScanEvery
			}
			return 0
		})
	})
	for range proofWorkers {
		m.goLoop(m.proofWorker)
	}
}

// roomOrigin is scheme://host[:port] of a room's URL.
func roomOrigin(r *Room) string {
	u, err := url.Parse(r.url)
	if err != nil || u.Host == "" {
		return ""
	}
	return u.Scheme + "://" + u.Host
}

// finalTip returns the room's last record when the verified chain shows
// the room ended and nothing is known past its tip: no record can follow.
func (r *Room) finalTip(now int64) (int64, string, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.frozen || !r.st.Created() || r.st.StatusAt(now) != room.StatusEnded || r.st.Seq < r.want.Load() || len(r.pending) > 0 {
		return 0, "", false
	}
	return r.st.Seq, r.st.LastHash, true
}

// wakeProofScan runs the proof scan soon (non-blocking): a room was
// added, or an attempt ended.
func (m *Mirror) wakeProofScan() {
	m.hl.wake.Wake()
}

// scanProofs queues the ended rooms whose proof is due. It reports
// whether a room still needs looking at (open, waiting for its next
// attempt, or not queued for busy workers): without one, the scan
// sleeps until a room is added or an attempt ends.
func (m *Mirror) scanProofs() (more bool) {
	defer m.hl.scans.Add(1)
	now, wall := m.now(), time.Now()
	for _, r := range m.Rooms() {
		// A room whose proof is done is not looked at again: its tip is
		// final, and finalTip would take the room's lock, which ingest
		// uses, for every ended room twice a second.
		m.hl.mu.Lock()
		ps := m.hl.rooms[r.rk]
		skip := ps != nil && (ps.done || ps.queued)
		m.hl.mu.Unlock()
		if skip {
			continue
		}
		more = true
		seq, hash, ok := r.finalTip(now)
		if !ok {
			continue
		}
		m.hl.mu.Lock()
		ps = m.hl.rooms[r.rk]
		if ps == nil {
			ps = &proofState{}
			m.hl.rooms[r.rk] = ps
		}
		due := !ps.queued && !ps.done && !wall.Before(ps.next)
		if due {
			select {
			case m.hl.q <- proofJob{r: r, seq: seq, hash: hash}:
				ps.queued = true
			default: // the workers are busy: the next scan tries again
			}
		}
		m.hl.mu.Unlock()
	}
	return more
}

// proofWorker fetches queued proofs, one at a time.
func (m *Mirror) proofWorker(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case j := <-m.hl.q:
			m.fetchProof(ctx, j)
		}
	}
}

// errRefused marks an answer the mirror refused (counted as refused).
var errRefused = errors.New("refused")

// fetchProof fetches, checks and stores one room's proof, then schedules
// the room's next attempt.
func (m *Mirror) fetchProof(ctx context.Context, j proofJob) {
	check, p, err := m.getProof(ctx, j)
	stored := false
	switch {
	case err == nil:
		stored, err = m.keepProof(j, check, p)
	case errors.Is(err, errRefused):
		m.stats.ProofsRefused.Add(1)
		m.log.Warn("host log proof refused", "room", j.r.url, "seq", j.seq, "err", err)
	case ctx.Err() == nil:
		m.log.Info("host log proof not fetched", "room", j.r.url, "seq", j.seq, "err", err)
	}
	defer m.wakeProofScan() // the room may need looking at again
	m.hl.mu.Lock()
	defer m.hl.mu.Unlock()
	ps := m.hl.rooms[j.r.rk]
	if ps == nil {
		return // purged meanwhile
	}
	ps.queued = false
	if err == nil && ps.stored != nil && ps.stored.Known > 0 {
		ps.done = true
		return
	}
	if ps.stored != nil && ps.stored.RecordHash == j.hash && ps.backoff >= proofBackoffMax {
		// A proof is stored and has waited the longest for a stronger
		// one: stop asking (a restart asks again).
		ps.done = true
		return
	}
	if stored || ps.backoff == 0 {
		ps.backoff = proofBackoffMin
	} else {
		ps.backoff = min(2*ps.backoff, proofBackoffMax)
	}
	ps.next = time.Now().Add(ps.backoff)
}

// getProof fetches one room's proof from its host and checks it with the
// kernel. Errors wrapping errRefused are answers the mirror refused.
func (m *Mirror) getProof(ctx context.Context, j proofJob) (*archive.HostLogCheck, *tlogproof.File, error) {
	m.hl.mu.Lock()
	base, origin := m.proofOrigin(j.r)
	m.hl.mu.Unlock()
	if origin == "" {
		return nil, nil, fmt.Errorf("room URL %q: %w", j.r.url, errRefused)
	}
	ctx, cancel := context.WithTimeout(ctx, proofFetchTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+InclusionPath+"?record_hash="+url.QueryEscape(j.hash), nil)
	if err != nil {
		return nil, nil, err
	}
	m.hl.enter()
	defer m.hl.inflight.Add(-1)
	m.stats.ProofsFetched.Add(1)
	resp, err := m.hl.client.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, proofBodyMax+1))
	switch {
	case err != nil:
		return nil, nil, err
	case resp.StatusCode != http.StatusOK:
		return nil, nil, fmt.Errorf("status %d: %w", resp.StatusCode, errRefused)
	case len(body) > proofBodyMax:
		return nil, nil, fmt.Errorf("answer over %d bytes: %w", proofBodyMax, errRefused)
	}
	var f tlogproof.File
	if err := json.Unmarshal(body, &f); err != nil {
		return nil, nil, fmt.Errorf("not a record proof (%v): %w", err, errRefused)
	}
	check, err := archive.CheckHostLogProof(f, archive.HostLogClaim{Host: j.r.host, Origin: origin,
		RoomID: j.r.id, Seq: j.seq, Hash: j.hash, Known: m.knownWitnesses(origin)})
	if err != nil {
		return nil, nil, fmt.Errorf("%v: %w", err, errRefused)
	}
	return check, &f, nil
}

// enter counts a fetch in flight and the most seen at once.
func (h *hostLogs) enter() {
	n := h.inflight.Add(1)
	for {
		cur := h.maxInflight.Load()
		if n <= cur || h.maxInflight.CompareAndSwap(cur, n) {
			return
		}
	}
}

// keepProof stores a checked proof unless the stored one is as strong and
// proves the same record.
func (m *Mirror) keepProof(j proofJob, check *archive.HostLogCheck, f *tlogproof.File) (bool, error) {
	m.hl.mu.Lock()
	ps := m.hl.rooms[j.r.rk]
	var old *storedProof
	if ps != nil {
		old = ps.stored
	}
	m.hl.mu.Unlock()
	if ps == nil {
		return false, nil
	}
	if old != nil && old.RecordHash == j.hash && !check.Stronger(old.check()) {
		return false, nil
	}
	if m.n.DiskFull() {
		// Below the disk reserve the mirror stores nothing; the backoff
		// brings the proof back later.
		return false, errors.New("disk below its reserve")
	}
	p := &storedProof{Seq: j.seq, RecordHash: j.hash, Known: check.Known, Witnesses: len(check.Witnesses), Proof: f}
	b, err := json.Marshal(p)
	if err != nil {
		return false, err
	}
	// One writer per room at a time (the room is queued once), and the
	// store happens before the state says so: a restart reads the same.
	if err := m.db.Update(func(txn *badger.Txn) error { return txn.Set([]byte(pfxProof+j.r.rk), b) }); err != nil {
		m.log.Warn("store host log proof", "room", j.r.url, "err", err)
		return false, err
	}
	meta := *p
	meta.Proof = nil
	m.hl.mu.Lock()
	ps = m.hl.rooms[j.r.rk]
	if ps != nil {
		ps.stored = &meta
	}
	m.hl.mu.Unlock()
	j.r.mu.Lock()
	removed := j.r.removed // set before the purge drops the room's keys
	j.r.mu.Unlock()
	if ps == nil || removed {
		// Purged while this was written: leave no key behind.
		if err := m.db.Update(func(txn *badger.Txn) error { return txn.Delete([]byte(pfxProof + j.r.rk)) }); err != nil {
			m.log.Warn("drop host log proof of a purged room", "room", j.r.url, "err", err)
		}
		return false, nil
	}
	m.stats.ProofsStored.Add(1)
	m.log.Info("host log proof stored", "room", j.r.url, "seq", j.seq, "tree_size", check.Checkpoint.Size,
		"witnesses", len(check.Witnesses), "known_witnesses", check.Known)
	return true, nil
}

// hostLogProof returns the room's stored proof and the hash of the record
// it proves, for extra.host_log when that record is the archive's last
// (nil when none).
func (m *Mirror) hostLogProof(rk string) (*tlogproof.File, string) {
	m.hl.mu.Lock()
	ps := m.hl.rooms[rk]
	have := ps != nil && ps.stored != nil
	m.hl.mu.Unlock()
	if !have {
		return nil, ""
	}
	v, err := m.getValue([]byte(pfxProof + rk))
	if err != nil {
		if !errors.Is(err, badger.ErrKeyNotFound) {
			m.log.Warn("read host log proof", "room", rk, "err", err)
		}
		return nil, ""
	}
	var p storedProof
	if err := json.Unmarshal(v, &p); err != nil || p.Proof == nil {
		return nil, ""
	}
	return p.Proof, p.RecordHash
}

// dropHostLogProof forgets a purged room's proof state (its key goes with
// the room's prefixes).
func (m *Mirror) dropHostLogProof(rk string) {
	m.hl.mu.Lock()
	delete(m.hl.rooms, rk)
	m.hl.mu.Unlock()
}

// knownWitnesses are the witness keys the mirror trusts on its own for a
// host log: its own witness's, and those announced on federation for
// that log's origin.
func (m *Mirror) knownWitnesses(origin string) []string {
	var out []string
	if m.witness != nil {
		out = append(out, m.witness.VerifierKey())
	}
	m.hl.mu.Lock()
	for k := range m.hl.announced[origin] {
		out = append(out, k)
	}
	m.hl.mu.Unlock()
	return out
}

// noteAnnounced remembers a witness key announced (by its own peer) for
// log origins this mirror mirrors, bounded.
func (m *Mirror) noteAnnounced(vkey string, logs []string) {
	mirrored := map[string]bool{}
	for _, o := range m.witnessedLogs() {
		mirrored[o] = true
	}
	m.hl.mu.Lock()
	defer m.hl.mu.Unlock()
	for _, o := range logs {
		if !mirrored[o] {
			continue
		}
		keys := m.hl.announced[o]
		if keys == nil {
			if len(m.hl.announced) >= maxAnnouncedLogs {
				continue
			}
			keys = map[string]struct{}{}
			m.hl.announced[o] = keys
		}
		if len(keys) < maxAnnouncedKeys {
			keys[vkey] = struct{}{}
		}
	}
}
