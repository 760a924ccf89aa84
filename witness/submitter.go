package witness

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/adpnode/adpnode/adp/tlogproof"
	"github.com/adpnode/adpnode/adp/tlogwitness"
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

// SubmitterConfig configures a Submitter.
type SubmitterConfig struct {
	Log     HostLog
	Targets []Target
	// Poll is how often the log's checkpoint is read (default 500 ms).
	Poll time.Duration
	// MinBackoff and MaxBackoff bound the retry delay after a failed
	// submission (defaults 1 s and 5 min), doubling in between.
	MinBackoff, MaxBackoff time.Duration
	// Timeout bounds one submission (default 10 s).
	Timeout time.Duration
	Client  *http.Client
	Logger  *slog.Logger
}

// Submitter sends each new host checkpoint, with its consistency proof
// from the size each witness last cosigned, to every configured witness,
// and keeps the cosignatures of the latest checkpoint. Each witness has a
// goroutine of its own, so a slow or dead witness delays no other.
type Submitter struct {
	cfg  SubmitterConfig
	wake []chan struct{}

	mu    sync.Mutex
	note  []byte                  // latest checkpoint the workers saw
	size  uint64                  // its size
	lines map[int]string          // target index -> cosignature of note
	state map[int]*SubmitterStats // per target

	cancel context.CancelFunc
	done   sync.WaitGroup
}

// SubmitterStats describes one witness's state.
type SubmitterStats struct {
	URL       string
	Size      uint64 // size the witness last cosigned (as far as the host knows)
	Failures  int    // consecutive failures
	LastError string
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
	if cfg.Client == nil {
		cfg.Client = &http.Client{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	s := &Submitter{cfg: cfg, lines: map[int]string{}, state: map[int]*SubmitterStats{}}
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	for i, t := range cfg.Targets {
		s.state[i] = &SubmitterStats{URL: t.URL}
		s.wake = append(s.wake, make(chan struct{}, 1))
	}
	s.done.Add(1 + len(cfg.Targets))
	go s.poll(ctx)
	for i := range cfg.Targets {
		go s.worker(ctx, i)
	}
	return s, nil
}

// Close stops the submitter and waits for its goroutines.
func (s *Submitter) Close() {
	s.cancel()
	s.done.Wait()
}

// poll reads the log's checkpoint and wakes the workers when it changed.
func (s *Submitter) poll(ctx context.Context) {
	defer s.done.Done()
	t := time.NewTicker(s.cfg.Poll)
	defer t.Stop()
	for {
		raw, cp, err := s.cfg.Log.Checkpoint(ctx)
		if err == nil {
			s.mu.Lock()
			changed := !bytes.Equal(raw, s.note)
			if changed {
				s.note, s.size, s.lines = raw, cp.Size, map[int]string{}
			}
			s.mu.Unlock()
			if changed {
				for _, w := range s.wake {
					select {
					case w <- struct{}{}:
					default:
					}
				}
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// worker submits to target i whenever the checkpoint changes, with
// exponential backoff after failures.
func (s *Submitter) worker(ctx context.Context, i int) {
	defer s.done.Done()
	backoff := time.Duration(0)
	var witnessSize uint64 // what the host believes the witness holds
	for {
		if backoff == 0 {
			select {
			case <-ctx.Done():
				return
			case <-s.wake[i]:
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
		_, have := s.lines[i]
		s.mu.Unlock()
		if raw == nil || have {
			backoff = 0
			continue
		}
		line, newSize, err := s.submit(ctx, i, raw, size, witnessSize)
		if ctx.Err() != nil {
			return
		}
		s.mu.Lock()
		st := s.state[i]
		if err == nil {
			witnessSize = size
			if bytes.Equal(raw, s.note) {
				s.lines[i] = line
			}
			st.Size, st.Failures, st.LastError = size, 0, ""
			backoff = 0
		} else {
			if newSize != witnessSize {
				witnessSize = newSize
			}
			st.Failures++
			st.LastError = err.Error()
			if backoff == 0 {
				backoff = s.cfg.MinBackoff
			} else if backoff *= 2; backoff > s.cfg.MaxBackoff {
				backoff = s.cfg.MaxBackoff
			}
			s.cfg.Logger.Warn("witness submission failed", "witness", s.cfg.Targets[i].URL, "size", size, "failures", st.Failures, "retry_in", backoff.String(), "err", err)
		}
		s.mu.Unlock()
	}
}

// errStale is a 409 whose size the worker adopts and retries at once.
type errStale struct{ size uint64 }

func (e errStale) Error() string { return "witness holds size " + strconv.FormatUint(e.size, 10) }

// submit sends raw to target i from old (retrying once at the size a 409
// names) and returns the verified cosignature line.
func (s *Submitter) submit(ctx context.Context, i int, raw []byte, size, old uint64) (string, uint64, error) {
	for attempt := 0; ; attempt++ {
		line, err := s.post(ctx, i, raw, size, old)
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

func (s *Submitter) post(ctx context.Context, i int, raw []byte, size, old uint64) (string, error) {
	t := s.cfg.Targets[i]
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
	resp, err := s.cfg.Client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
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
		n, err := note.Open(append(append([]byte{}, raw...), line...), note.VerifierList(s.cfg.Log.Verifier(), t.Verifier))
		if err != nil {
			continue
		}
		for _, sig := range n.Sigs {
			if sig.Name == t.Verifier.Name() && sig.Hash == t.Verifier.KeyHash() {
				return line, nil
			}
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

// Cosigned returns the latest checkpoint the submitter has seen with the
// cosignature lines collected for it so far (in target order), and how
// many witnesses cosigned it. Serve this at the log's checkpoint URL.
func (s *Submitter) Cosigned() ([]byte, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := append([]byte{}, s.note...)
	n := 0
	for i := range s.cfg.Targets {
		if l, ok := s.lines[i]; ok {
			out = append(out, l...)
			n++
		}
	}
	return out, n
}

// CosignedFor returns raw, the log's latest checkpoint, with the
// cosignature lines collected for it, or raw unchanged when the
// submitter has not seen it yet.
func (s *Submitter) CosignedFor(raw []byte) []byte {
	s.mu.Lock()
	same := bytes.Equal(raw, s.note)
	s.mu.Unlock()
	if !same {
		return raw
	}
	out, _ := s.Cosigned()
	return out
}

// VerifierKeys lists the configured witnesses' cosignature/v1 keys.
func (s *Submitter) VerifierKeys() []string {
	out := make([]string, len(s.cfg.Targets))
	for i, t := range s.cfg.Targets {
		out[i] = t.Verifier.Key()
	}
	return out
}

// Stats returns each witness's state.
func (s *Submitter) Stats() []SubmitterStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]SubmitterStats, len(s.cfg.Targets))
	for i := range out {
		out[i] = *s.state[i]
	}
	return out
}
