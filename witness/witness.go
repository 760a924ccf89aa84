// Package witness runs a C2SP tlog-witness: it keeps, per log origin, the
// last checkpoint it cosigned in Badger (restart-safe), answers
// `POST <prefix>/add-checkpoint` with a cosignature/v1 line when the new
// checkpoint provably extends that one, and reports split views (two
// checkpoints of one origin that cannot both be true). The checks
// themselves are the kernel's (adp/tlogwitness).
package witness

import (
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/dgraph-io/badger/v4"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/adpnode/adpnode/adp"
	"github.com/adpnode/adpnode/adp/tlogwitness"
	"github.com/adpnode/adpnode/httpwire"
)

// Config configures a Witness.
type Config struct {
	DB *badger.DB
	// Prefix is the key space inside DB (default "wit/").
	Prefix string
	// Cosigner signs accepted checkpoints.
	Cosigner *tlogwitness.Cosigner
	// Logs returns the log of an origin the witness vouches for.
	Logs func(origin string) (tlogwitness.Log, bool)
	// OnSplitView, when set, receives proof that a log forked (called
	// synchronously; keep it short).
	OnSplitView func(log tlogwitness.Log, sv *tlogwitness.SplitView, reason string)
	// PerOrigin bounds accepted requests per origin: a burst of Burst,
	// refilled at one every PerOrigin (defaults 10 and 100 ms).
	PerOrigin time.Duration
	Burst     int
	Now       func() time.Time
	Log       *slog.Logger
}

// Witness is a tlog-witness over a Badger key space.
type Witness struct {
	cfg Config

	mu      sync.Mutex // serializes updates (read state, check, write)
	buckets map[string]*bucket
}

type bucket struct {
	tokens float64
	at     time.Time
}

// maxBuckets bounds the rate limiter's memory; it only holds origins
// Logs knows, so this is reached only by a witness of that many logs.
const maxBuckets = 100_000

// New returns a witness.
func New(cfg Config) (*Witness, error) {
	if cfg.DB == nil || cfg.Cosigner == nil || cfg.Logs == nil {
		return nil, errors.New("witness: DB, Cosigner and Logs are required")
	}
	if cfg.Prefix == "" {
		cfg.Prefix = "wit/"
	}
	if cfg.PerOrigin == 0 {
		cfg.PerOrigin = 100 * time.Millisecond
	}
	if cfg.Burst == 0 {
		cfg.Burst = 10
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	return &Witness{cfg: cfg, buckets: map[string]*bucket{}}, nil
}

// Name is the witness's name in its cosignature lines.
func (w *Witness) Name() string { return w.cfg.Cosigner.Name() }

// VerifierKey is the witness's cosignature/v1 verifier key.
func (w *Witness) VerifierKey() string { return w.cfg.Cosigner.VerifierKey() }

// stored is a State in Badger. Split, once set, is the split view the
// witness saw of the log: it cosigns nothing more of it, after a restart
// too.
type stored struct {
	Size  uint64       `json:"size"`
	Hash  []byte       `json:"hash"`
	Note  string       `json:"note"`
	Split *storedSplit `json:"split,omitempty"`
}

// storedSplit is a tlogwitness.SplitView in Badger.
type storedSplit struct {
	Notes [2]string `json:"notes"`
	Proof [][]byte  `json:"proof,omitempty"`
}

func toStored(st tlogwitness.State) stored {
	s := stored{Size: st.Size, Hash: st.Hash[:], Note: string(st.Note)}
	if sv := st.SplitView; sv != nil {
		s.Split = &storedSplit{Notes: [2]string{string(sv.Notes[0]), string(sv.Notes[1])}}
		for _, h := range sv.Proof {
			s.Split.Proof = append(s.Split.Proof, h[:])
		}
	}
	return s
}

func (s stored) state() (*tlogwitness.State, error) {
	if len(s.Hash) != 32 {
		return nil, errors.New("bad hash")
	}
	st := &tlogwitness.State{Size: s.Size, Hash: [32]byte(s.Hash), Note: []byte(s.Note)}
	if s.Split != nil {
		sv := &tlogwitness.SplitView{Notes: [2][]byte{[]byte(s.Split.Notes[0]), []byte(s.Split.Notes[1])}}
		for _, h := range s.Split.Proof {
			if len(h) != tlog.HashSize {
				return nil, errors.New("bad split view proof hash")
			}
			sv.Proof = append(sv.Proof, tlog.Hash(h))
		}
		st.SplitView = sv
	}
	return st, nil
}

func (w *Witness) key(origin string) []byte { return []byte(w.cfg.Prefix + origin) }

// State returns the stored state of origin (nil: never cosigned).
func (w *Witness) State(origin string) (*tlogwitness.State, error) {
	var st *tlogwitness.State
	err := w.cfg.DB.View(func(txn *badger.Txn) error {
		item, err := txn.Get(w.key(origin))
		if errors.Is(err, badger.ErrKeyNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		return item.Value(func(v []byte) error {
			var s stored
			if err := json.Unmarshal(v, &s); err != nil {
				return errors.New("witness: corrupt state of " + origin)
			}
			var err error
			if st, err = s.state(); err != nil {
				return errors.New("witness: corrupt state of " + origin + ": " + err.Error())
			}
			return nil
		})
	})
	return st, err
}

// allow takes a token of origin's bucket.
func (w *Witness) allow(origin string) bool {
	now := w.cfg.Now()
	b, ok := w.buckets[origin]
	if !ok {
		if len(w.buckets) >= maxBuckets {
			for k := range w.buckets { // drop an arbitrary one
				delete(w.buckets, k)
				break
			}
		}
		b = &bucket{tokens: float64(w.cfg.Burst), at: now}
		w.buckets[origin] = b
	}
	b.tokens += float64(now.Sub(b.at)) / float64(w.cfg.PerOrigin)
	b.at = now
	if b.tokens > float64(w.cfg.Burst) {
		b.tokens = float64(w.cfg.Burst)
	}
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

// AddCheckpoint decides one add-checkpoint body and returns the
// cosignature line to answer with.
func (w *Witness) AddCheckpoint(body []byte) (string, error) {
	req, err := tlogwitness.ParseRequest(body)
	if err != nil {
		return "", err
	}
	origin, ok := tlogwitness.Origin(req.Note)
	if !ok {
		return "", adp.Reason(adp.CodeInvalidRequest, "malformed_checkpoint", "the checkpoint has no origin line")
	}
	lg, ok := w.cfg.Logs(origin)
	if !ok {
		return "", adp.Reason(adp.CodeNotFound, "unknown_log", "this witness does not witness that log")
	}
	// The log's signature first: a request nobody but the log could have
	// made is the only kind that spends the log's budget, so a stranger
	// cannot starve the log of cosignatures.
	signed, err := tlogwitness.OpenRequest(lg, req)
	if err != nil {
		return "", err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.allow(origin) {
		e := adp.Reason(adp.CodeRateLimited, "witness_rate", "too many checkpoints for this log")
		e.Data["retry_after_ms"] = w.cfg.PerOrigin.Milliseconds() + 1
		return "", e
	}
	prev, err := w.State(origin)
	if err != nil {
		return "", err
	}
	d, err := signed.Check(prev)
	if err != nil {
		if d != nil && d.SplitView != nil {
			w.cfg.Log.Warn("split view: the log signed checkpoints that cannot both be true; it is cosigned no more", "origin", origin, "size", prev.Size, "new_size", d.Checkpoint.Size)
			// Kept with the state, so the witness cosigns nothing more of
			// this log, after a restart too.
			forked := *prev
			forked.SplitView = d.SplitView
			if serr := w.put(origin, forked); serr != nil {
				w.cfg.Log.Error("witness: split view not stored", "origin", origin, "err", serr)
			}
			if w.cfg.OnSplitView != nil {
				w.cfg.OnSplitView(lg, d.SplitView, err.Error())
			}
		}
		return "", err
	}
	line := w.cfg.Cosigner.Cosign(d.Body, uint64(w.cfg.Now().Unix()))
	if err := w.put(origin, d.Next); err != nil {
		// Not stored: answering would cosign a state a restart forgets.
		return "", adp.Errorf(adp.CodeUnavailable, "witness state not stored: %v", err)
	}
	return line, nil
}

// put stores origin's state.
func (w *Witness) put(origin string, st tlogwitness.State) error {
	b, _ := json.Marshal(toStored(st))
	return w.cfg.DB.Update(func(txn *badger.Txn) error { return txn.Set(w.key(origin), b) })
}

// ServeHTTP answers POST .../add-checkpoint (C2SP tlog-witness): 200
// with the cosignature line; 409 (text/x.tlog.size) with the size the
// witness holds, for another old size or another root at that size; 403
// for a checkpoint without the log's signature, or of a log the witness
// saw fork; 404 for an unknown log; 422 for a proof that does not
// verify; 413/429 past bounds; errors other than 409 in the ADP error
// shape.
func (w *Witness) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		rw.Header().Set("Allow", http.MethodPost)
		httpwire.Error(adp.Reason(adp.CodeInvalidRequest, "method", "add-checkpoint takes POST")).Write(rw)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(rw, r.Body, tlogwitness.MaxRequestBytes))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			httpwire.Error(adp.Reason(adp.CodePayloadTooLarge, "body_too_large", "add-checkpoint body is too large")).Write(rw)
			return
		}
		httpwire.Error(adp.Reason(adp.CodeInvalidRequest, "body_unreadable", "the body could not be read")).Write(rw)
		return
	}
	line, err := w.AddCheckpoint(body)
	if err != nil {
		if adp.CodeOf(err) == adp.CodeInternal || adp.CodeOf(err) == adp.CodeUnavailable {
			w.cfg.Log.Error("witness", "err", err)
		}
		httpwire.Error(err).Write(rw)
		return
	}
	rw.Header().Set("Content-Type", "text/plain; charset=utf-8")
	rw.WriteHeader(http.StatusOK)
	_, _ = io.WriteString(rw, line)
}
