package witness

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dgraph-io/badger/v4"
	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/adpnode/adpnode/adp/tlogproof"
	"github.com/adpnode/adpnode/adp/tlogwitness"
	"github.com/adpnode/adpnode/internal/periodic"
	"github.com/adpnode/adpnode/internal/storelayout"
)

// HostLog is what the submitter reads from the host log (*tlog.Log).
type HostLog interface {
	// Checkpoint returns the latest signed checkpoint and its body.
	Checkpoint(ctx context.Context) ([]byte, tlogproof.Checkpoint, error)
	// Consistency proves the tree of size1 a prefix of that of size2.
	Consistency(ctx context.Context, size1, size2 uint64) (tlogproof.ConsistencyProof, error)
	// Verifier verifies the log's own signatures.
	Verifier() note.Verifier
}

// Target is a witness the host submits its checkpoints to.
type Target struct {
	// URL is the witness's submission prefix; the host POSTs to
	// URL + "/add-checkpoint".
	URL string
	// Verifier checks the witness's cosignature/v1 lines.
	Verifier *tlogwitness.CosignatureVerifier
}

// MaxTargets bounds the configured witnesses (one goroutine each).
const MaxTargets = 32

// ParseTarget parses the --witness flag's "URL=vkey".
func ParseTarget(s string) (Target, error) {
	u, vkey, ok := strings.Cut(s, "=")
	if !ok {
		return Target{}, errors.New(`witness must be URL=vkey (the witness's submission URL and its cosignature/v1 verifier key)`)
	}
	pu, err := url.Parse(u)
	if err != nil || (pu.Scheme != "http" && pu.Scheme != "https") || pu.Host == "" || pu.RawQuery != "" || pu.Fragment != "" {
		return Target{}, fmt.Errorf("witness URL %q is not an http(s) URL without query", u)
	}
	v, err := tlogwitness.NewCosignatureVerifier(vkey)
	if err != nil {
		return Target{}, fmt.Errorf("witness key: %w", err)
	}
	return Target{URL: strings.TrimSuffix(u, "/"), Verifier: v}, nil
}

// Defaults of discovery.
const (
	// DefaultMaxDiscovered bounds the witnesses learnt from announcements.
	DefaultMaxDiscovered = 16
	// DefaultDiscoveredTTL is how long a discovered witness is kept
	// without a fresh announcement.
	DefaultDiscoveredTTL = 10 * time.Minute
	// recheckEvery is how often one witness key's origin is checked at
	// most (a refused or unreachable origin is not asked again sooner).
	recheckEvery = 10 * time.Minute
	// maxDiscoveryBody bounds a discovery document read.
	maxDiscoveryBody = 64 << 10
	// maxAnswerBody bounds a witness's answer read.
	maxAnswerBody = 4 << 10
)

// SubmitterConfig configures a Submitter.
type SubmitterConfig struct {
	Log     HostLog
	Targets []Target
	// DB, when set, keeps the newest cosigned checkpoint (key
	// storelayout.TlogCosigned), so its cosignatures survive a restart.
	DB *badger.DB
	// Discover, when set, is the client that checks a discovered
	// witness's origin and submits to it (internal/safehttp rules: no
	// private addresses outside tests); nil disables Offer.
	Discover *http.Client
	// MaxDiscovered and DiscoveredTTL bound discovered witnesses
	// (defaults DefaultMaxDiscovered, DefaultDiscoveredTTL); CheckEvery
	// is the least time between two origin checks (default 1 s).
	MaxDiscovered int
	DiscoveredTTL time.Duration
	CheckEvery    time.Duration
	// Poll is how often the log's checkpoint is read (default 500 ms):
	// always, or, when Log is a RoundNotifier, for a few polls after each
	// round and every 30 s otherwise.
	Poll time.Duration
	// MinBackoff and MaxBackoff bound the retry delay after a failed
	// submission (defaults 1 s and 5 min), doubling in between.
	MinBackoff, MaxBackoff time.Duration
	// Timeout bounds one submission or origin check (default 10 s).
	Timeout time.Duration
	Client  *http.Client
	Logger  *slog.Logger
	// Fence, when set, is the log's restore fence (*tlog.Log). While the
	// log holds back after a restore, the submitter lifts the fence once
	// every witness that may hold a tree of this log — the configured
	// ones, and those whose cosignatures of this log it had stored —
	// cosigned the held-back checkpoint: none holds a larger tree, so
	// going on forks nothing.
	Fence Fence
}

// Fence is a log that holds back after a restore (tlog.Log.Fenced).
type Fence interface {
	Fenced() (size uint64, fenced bool)
	Unfence() error
}

// Submitter sends each new host checkpoint, with its consistency proof
// from the size each witness last cosigned, to every witness, and keeps
// the cosignatures of the newest checkpoint any witness cosigned. The
// witnesses are the configured ones and those discovered by Offer. Each
// has a goroutine of its own, so a slow or dead witness delays no other.
type Submitter struct {
	cfg SubmitterConfig
	ctx context.Context

	mu      sync.Mutex
	targets []*target // configured first, then discovered
	note    []byte    // latest checkpoint the workers saw
	size    uint64    // its size
	lines   map[string]string
	best    cosigned             // newest checkpoint with at least one cosignature
	checked map[string]time.Time // vkey -> last origin check (discovery)
	checkQ  chan offer
	prior   []string // witnesses whose cosignatures were stored at start
	waitLog bool     // the fence's wait for prior witnesses was logged
	closed  bool
	cancel  context.CancelFunc
	done    sync.WaitGroup
	polls   atomic.Int64 // reads of the log's checkpoint (Polls)
}

// target is one witness and its worker's state.
type target struct {
	Target
	client     *http.Client
	discovered bool
	seen       time.Time // last announcement (discovered)
	wake       chan struct{}
	stop       context.CancelFunc
	stats      SubmitterStats
}

// cosigned is a checkpoint with the cosignature lines collected for it,
// by verifier key; it is what DB keeps.
type cosigned struct {
	Note  []byte            `json:"note"`
	Size  uint64            `json:"size"`
	Lines map[string]string `json:"lines"`
}

// offer is a discovered witness waiting for its origin check.
type offer struct {
	vkey, url string
	verifier  *tlogwitness.CosignatureVerifier
}

// SubmitterStats describes one witness's state.
type SubmitterStats struct {
	URL        string
	Discovered bool
	Size       uint64 // size the witness last cosigned (as far as the host knows)
	Failures   int    // consecutive failures
	LastError  string
}

// NewSubmitter starts a submitter; Close stops it.
func NewSubmitter(cfg SubmitterConfig) (*Submitter, error) {
	if cfg.Log == nil {
		return nil, errors.New("witness submitter: Log is required")
	}
	if len(cfg.Targets) > MaxTargets {
		return nil, fmt.Errorf("at most %d witnesses", MaxTargets)
	}
	if cfg.Poll == 0 {
		cfg.Poll = 500 * time.Millisecond
	}
	if cfg.MinBackoff == 0 {
		cfg.MinBackoff = time.Second
	}
	if cfg.MaxBackoff == 0 {
		cfg.MaxBackoff = 5 * time.Minute
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 10 * time.Second
	}
	if cfg.MaxDiscovered == 0 {
		cfg.MaxDiscovered = DefaultMaxDiscovered
	}
	if cfg.DiscoveredTTL == 0 {
		cfg.DiscoveredTTL = DefaultDiscoveredTTL
	}
	if cfg.CheckEvery == 0 {
		cfg.CheckEvery = time.Second
	}
	if cfg.Client == nil {
		cfg.Client = &http.Client{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	s := &Submitter{cfg: cfg, lines: map[string]string{}, checked: map[string]time.Time{}, checkQ: make(chan offer, 8)}
	if err := s.load(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.ctx, s.cancel = ctx, cancel
	s.done.Add(2)
	go s.poll(ctx)
	go s.checker(ctx)
	s.mu.Lock()
	for _, t := range cfg.Targets {
		s.startLocked(&target{Target: t, client: cfg.Client})
	}
	s.mu.Unlock()
	return s, nil
}

// startLocked adds t and starts its worker.
func (s *Submitter) startLocked(t *target) {
	ctx, stop := context.WithCancel(s.ctx)
	t.stop, t.wake = stop, make(chan struct{}, 1)
	t.stats.URL, t.stats.Discovered = t.URL, t.discovered
	s.targets = append(s.targets, t)
	if s.note != nil {
		t.wake <- struct{}{}
	}
	s.done.Add(1)
	go s.worker(ctx, t)
}

// Close stops the submitter and waits for its goroutines.
func (s *Submitter) Close() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.cancel()
	s.done.Wait()
}

// load reads the stored cosigned checkpoint.
func (s *Submitter) load() error {
	if s.cfg.DB == nil {
		return nil
	}
	return s.cfg.DB.View(func(txn *badger.Txn) error {
		item, err := txn.Get([]byte(storelayout.TlogCosigned))
		if errors.Is(err, badger.ErrKeyNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		return item.Value(func(v []byte) error {
			var c cosigned
			if json.Unmarshal(v, &c) != nil || len(c.Lines) == 0 {
				s.cfg.Logger.Warn("stored cosigned checkpoint does not decode; ignored")
				return nil
			}
			// Keep only lines that still verify (the key is in the line's
			// map key): a damaged value must not be served as cosigned.
			for vkey, line := range c.Lines {
				if !s.verifies(c.Note, vkey, line) {
					delete(c.Lines, vkey)
				}
			}
			if len(c.Lines) > 0 {
				s.best = c
				s.prior = slices.Sorted(maps.Keys(c.Lines))
			}
			return nil
		})
	})
}

// verifies reports whether line is a cosignature by vkey of raw.
func (s *Submitter) verifies(raw []byte, vkey, line string) bool {
	v, err := tlogwitness.NewCosignatureVerifier(vkey)
	if err != nil {
		return false
	}
	return cosignsWith(s.cfg.Log.Verifier(), v, raw, line)
}

// cosignsWith reports whether line is v's cosignature of raw and raw
// is signed by the log itself (logV: the log's current origin and key).
// A checkpoint of another origin (the public URL changed) is not this
// log's, however well it is cosigned.
func cosignsWith(logV note.Verifier, v *tlogwitness.CosignatureVerifier, raw []byte, line string) bool {
	n, err := note.Open(append(append([]byte{}, raw...), line...), note.VerifierList(logV, v))
	if err != nil {
		return false
	}
	var byLog, byWitness bool
	for _, sig := range n.Sigs {
		byLog = byLog || sig.Name == logV.Name() && sig.Hash == logV.KeyHash()
		byWitness = byWitness || sig.Name == v.Name() && sig.Hash == v.KeyHash()
	}
	return byLog && byWitness
}

// RoundNotifier is a HostLog that tells when it began a round whose
// checkpoint it will publish (hostlog.Log). With one, the submitter
// reads the checkpoint every Poll for eagerPolls polls after each round
// and every idlePoll otherwise; a log without it is read every Poll.
type RoundNotifier interface {
	OnRound(fn func())
}

const (
	// eagerPolls is how many polls follow a round: they cover the time
	// the log takes to publish its checkpoint (up to about twice its
	// checkpoint interval).
	eagerPolls = 8
	// idlePoll is how often an idle log's checkpoint is read, for what
	// nothing signals (a checkpoint published late, discovered
	// witnesses expiring).
	idlePoll = 30 * time.Second
)

// poll reads the log's checkpoint and wakes the workers when it changed;
// it also drops discovered witnesses not announced for DiscoveredTTL.
func (s *Submitter) poll(ctx context.Context) {
	defer s.done.Done()
	rn, notified := s.cfg.Log.(RoundNotifier)
	var kicks atomic.Int64
	wake := periodic.NewSignal()
	if notified {
		rn.OnRound(func() {
			kicks.Add(1)
			wake.Wake()
		})
	}
	seen, eager := int64(0), eagerPolls // the log's first checkpoint may be on its way
	periodic.Loop(ctx, wake.C(), s.cfg.Poll, idlePoll, func() time.Duration {
		s.polls.Add(1)
		if k := kicks.Load(); k != seen {
			seen, eager = k, eagerPolls
		}
		s.pollOnce(ctx)
		if _, fenced := s.fenced(); !notified || fenced {
			return s.cfg.Poll // a fenced log waits for cosignatures: read it often
		}
		if eager > 0 {
			eager--
			return s.cfg.Poll
		}
		return 0
	})
}

// pollOnce reads the log's checkpoint once.
func (s *Submitter) pollOnce(ctx context.Context) {
	raw, cp, err := s.cfg.Log.Checkpoint(ctx)
	if err != nil {
		return
	}
	s.mu.Lock()
	if !bytes.Equal(raw, s.note) {
		s.note, s.size, s.lines = raw, cp.Size, map[string]string{}
		for _, t := range s.targets {
			select {
			case t.wake <- struct{}{}:
			default:
			}
		}
	}
	s.expireLocked(time.Now())
	s.mu.Unlock()
	s.checkFence()
}

// Polls counts the reads of the log's checkpoint so far.
func (s *Submitter) Polls() int64 { return s.polls.Load() }

// expireLocked stops discovered witnesses not announced since ttl.
func (s *Submitter) expireLocked(now time.Time) {
	kept := s.targets[:0]
	for _, t := range s.targets {
		if t.discovered && now.Sub(t.seen) > s.cfg.DiscoveredTTL {
			t.stop()
			s.cfg.Logger.Info("discovered witness expired", "witness", t.URL)
			continue
		}
		kept = append(kept, t)
	}
	clear(s.targets[len(kept):])
	s.targets = kept
}

// worker submits to t whenever the checkpoint changes, with exponential
// backoff after failures.
func (s *Submitter) worker(ctx context.Context, t *target) {
	defer s.done.Done()
	backoff := time.Duration(0)
	var witnessSize uint64 // what the host believes the witness holds
	vkey := t.Verifier.Key()
	for {
		if backoff == 0 {
			select {
			case <-ctx.Done():
				return
			case <-t.wake:
			}
		} else {
			timer := time.NewTimer(backoff)
			select {
			case <-ctx.Done():
				timer.Stop()
				return
			case <-timer.C:
			}
		}
		s.mu.Lock()
		raw, size := s.note, s.size
		_, have := s.lines[vkey]
		s.mu.Unlock()
		if raw == nil || have {
			backoff = 0
			continue
		}
		line, newSize, err := s.submit(ctx, t, raw, size, witnessSize)
		if ctx.Err() != nil {
			return
		}
		s.mu.Lock()
		st := &t.stats
		if err == nil {
			witnessSize = size
			if bytes.Equal(raw, s.note) {
				s.lines[vkey] = line
				s.keepLocked()
			}
			st.Size, st.Failures, st.LastError = size, 0, ""
			backoff = 0
		} else {
			witnessSize = newSize
			st.Failures++
			st.LastError = err.Error()
			if backoff == 0 {
				backoff = s.cfg.MinBackoff
			} else if backoff *= 2; backoff > s.cfg.MaxBackoff {
				backoff = s.cfg.MaxBackoff
			}
			if fs, fenced := s.fenced(); fenced && newSize > fs {
				s.cfg.Logger.Error("host log restored from a backup: a witness cosigned a larger tree of this log than the backup holds, so the log stays at the backup's tree (going on would fork it); restore a backup that holds every leaf the witnesses saw (an offline backup of the stopped node), or start a new log by changing public_url (docs/operations.md)",
					"witness", t.URL, "witness_size", newSize, "backup_size", fs, "retry_in", backoff.String())
			} else {
				s.cfg.Logger.Warn("witness submission failed", "witness", t.URL, "size", size, "failures", st.Failures, "retry_in", backoff.String(), "err", err)
			}
		}
		s.mu.Unlock()
		if err == nil {
			s.checkFence()
		}
	}
}

// fenced reports the log's restore fence.
func (s *Submitter) fenced() (uint64, bool) {
	if s.cfg.Fence == nil {
		return 0, false
	}
	return s.cfg.Fence.Fenced()
}

// checkFence lifts the log's restore fence once every witness that may
// hold a tree of this log cosigned the held-back checkpoint: the
// configured ones, and those whose stored cosignatures of this log came
// with the backup (a discovered one among them is waited for until it is
// discovered again).
func (s *Submitter) checkFence() {
	size, fenced := s.fenced()
	if !fenced {
		return
	}
	s.mu.Lock()
	if s.note == nil || s.size != size {
		s.mu.Unlock()
		return
	}
	var missing []string
	for _, t := range s.targets {
		// A discovered witness that never cosigned this log cannot hold
		// a larger tree of it, and must not hold the log back by refusing.
		if _, ok := s.lines[t.Verifier.Key()]; !ok && !t.discovered {
			missing = append(missing, t.Verifier.Key())
		}
	}
	var absent []string // prior witnesses the submitter does not reach yet
	for _, k := range s.prior {
		if _, ok := s.lines[k]; !ok {
			missing = append(missing, k)
			if !slices.ContainsFunc(s.targets, func(t *target) bool { return t.Verifier.Key() == k }) {
				absent = append(absent, k)
			}
		}
	}
	logWait := len(absent) > 0 && !s.waitLog
	s.waitLog = s.waitLog || logWait
	s.mu.Unlock()
	if logWait {
		s.cfg.Logger.Warn("host log restored from a backup: waiting for witnesses that cosigned it before the backup (configure them with --witness, or wait for their announcement)", "witnesses", absent)
	}
	if len(missing) > 0 {
		return
	}
	if err := s.cfg.Fence.Unfence(); err != nil {
		s.cfg.Logger.Warn("host log: lift the restore fence", "err", err)
	}
}

// keepLocked makes the current checkpoint, which just gained a
// cosignature, the newest cosigned one, and stores it.
func (s *Submitter) keepLocked() {
	s.best = cosigned{Note: s.note, Size: s.size, Lines: maps.Clone(s.lines)}
	if s.cfg.DB == nil {
		return
	}
	b, _ := json.Marshal(s.best)
	if err := s.cfg.DB.Update(func(txn *badger.Txn) error { return txn.Set([]byte(storelayout.TlogCosigned), b) }); err != nil {
		// Served from memory still; stored again with the next cosignature.
		s.cfg.Logger.Warn("store cosigned checkpoint", "err", err)
	}
}

// errStale is a 409 whose size the worker adopts and retries at once.
type errStale struct{ size uint64 }

func (e errStale) Error() string { return "witness holds size " + strconv.FormatUint(e.size, 10) }

// submit sends raw to target i from old (retrying once at the size a 409
// names) and returns the verified cosignature line.
func (s *Submitter) submit(ctx context.Context, t *target, raw []byte, size, old uint64) (string, uint64, error) {
	for attempt := 0; ; attempt++ {
		line, err := s.post(ctx, t, raw, size, old)
		var st errStale
		if errors.As(err, &st) && attempt == 0 && st.size <= size && st.size != old {
			old = st.size
			continue
		}
		if errors.As(err, &st) {
			return "", st.size, err
		}
		return line, old, err
	}
}

func (s *Submitter) post(ctx context.Context, t *target, raw []byte, size, old uint64) (string, error) {
	var proof []tlog.Hash
	if old > size {
		return "", fmt.Errorf("the witness holds size %d, above this log's %d: the log lost leaves or the witness saw a fork", old, size)
	}
	if old != 0 && old != size {
		p, err := s.cfg.Log.Consistency(ctx, old, size)
		if err != nil {
			return "", fmt.Errorf("consistency proof %d→%d: %w", old, size, err)
		}
		hs, err := tlogproof.DecodeHashes(p.Hashes)
		if err != nil {
			return "", err
		}
		for _, h := range hs {
			proof = append(proof, tlog.Hash(h))
		}
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.URL+"/add-checkpoint", bytes.NewReader(tlogwitness.FormatRequest(old, proof, raw)))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "text/plain; charset=utf-8")
	resp, err := t.client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBody))
	if err != nil {
		return "", err
	}
	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusConflict:
		n, err := strconv.ParseUint(strings.TrimSpace(string(body)), 10, 64)
		if err != nil {
			return "", fmt.Errorf("409 without a size: %q", truncate(body))
		}
		return "", errStale{n}
	default:
		return "", fmt.Errorf("witness answered %d: %s", resp.StatusCode, truncate(body))
	}
	// The answer is one or more signature lines; keep the one the
	// configured key verifies over this checkpoint.
	for _, line := range strings.SplitAfter(string(body), "\n") {
		if !strings.HasPrefix(line, "— ") || !strings.HasSuffix(line, "\n") {
			continue
		}
		if cosignsWith(s.cfg.Log.Verifier(), t.Verifier, raw, line) {
			return line, nil
		}
	}
	return "", fmt.Errorf("the witness's answer carries no cosignature its key verifies: %q", truncate(body))
}

func truncate(b []byte) string {
	if len(b) > 200 {
		b = b[:200]
	}
	return string(b)
}

// Cosigned returns the newest checkpoint a witness cosigned, with the
// cosignature lines collected for it (in the order of their keys), and
// how many there are; nil and 0 before any. Serve this at the log's
// checkpoint URL when it is the latest.
func (s *Submitter) Cosigned() ([]byte, int) {
	raw, _, keys := s.Witnessed()
	return raw, len(keys)
}

// Witnessed returns the newest cosigned checkpoint with its cosignature
// lines, its tree size, and the verifier keys of the witnesses whose
// lines it carries (sorted); nil before any witness cosigned.
func (s *Submitter) Witnessed() (signed []byte, size uint64, vkeys []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.best.Lines) == 0 {
		return nil, 0, nil
	}
	vkeys = slices.Sorted(maps.Keys(s.best.Lines))
	signed = append([]byte{}, s.best.Note...)
	for _, k := range vkeys {
		signed = append(signed, s.best.Lines[k]...)
	}
	return signed, s.best.Size, vkeys
}

// CosignedFor returns raw, the log's latest checkpoint, with the
// cosignature lines collected for it, or raw unchanged when no witness
// has cosigned it yet.
func (s *Submitter) CosignedFor(raw []byte) []byte {
	s.mu.Lock()
	same := bytes.Equal(raw, s.best.Note)
	s.mu.Unlock()
	if !same {
		return raw
	}
	out, _, _ := s.Witnessed()
	if !bytes.HasPrefix(out, raw) { // a newer checkpoint was cosigned meanwhile
		return raw
	}
	return out
}

// VerifierKeys lists the witnesses' cosignature/v1 keys (configured, then
// discovered).
func (s *Submitter) VerifierKeys() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, len(s.targets))
	for i, t := range s.targets {
		out[i] = t.Verifier.Key()
	}
	return out
}

// Stats returns each witness's state.
func (s *Submitter) Stats() []SubmitterStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]SubmitterStats, len(s.targets))
	for i, t := range s.targets {
		out[i] = t.stats
	}
	return out
}
