package stack

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/adpnode/adpnode/adp/assertion"
	"github.com/adpnode/adpnode/adp/identity"
	"github.com/adpnode/adpnode/adp/tlogproof"
	"github.com/adpnode/adpnode/federation"
	"github.com/adpnode/adpnode/hostapi"
	"github.com/adpnode/adpnode/hostlog"
	"github.com/adpnode/adpnode/internal/safehttp"
	"github.com/adpnode/adpnode/witness"
)

// HostLogConfig turns on the host log (package tlog, in DATA/tlog,
// signed with the node key) of every record the node accepts, and its
// witness submitter. It lives here rather than in serve so that every
// host built by the stack — serve, devnet, adpload -inproc and the test
// helpers — wires it, and closes it, the same way.
type HostLogConfig struct {
	// Witnesses receive every checkpoint (serve's --witness).
	Witnesses []witness.Target
	// Discover also submits to the witnesses mirrors announce on
	// federation (it needs a Mirror); their origins are checked under
	// the federation's AllowPrivateOrigins, as other hosts' origins are.
	Discover bool
	// CheckpointInterval, RoundInterval and BatchMaxAge are hostlog.Config's
	// (zero: its defaults, 1 s, the checkpoint interval and 50 ms).
	CheckpointInterval time.Duration
	RoundInterval      time.Duration
	BatchMaxAge        time.Duration
	// MinBackoff and MaxBackoff bound the submitter's retry delay after a
	// failed submission (zero: the submitter's defaults).
	MinBackoff, MaxBackoff time.Duration
}

// errHostLogInMemory: a log kept beside an in-memory store would claim
// records a restart forgets.
var errHostLogInMemory = errors.New("stack: the host log needs a data directory (Node.DataDir); an in-memory node has none")

// openHostLog opens the host log, which follows the node's change feed,
// makes archives embed its proof, and starts the
// witness submitter, which always runs: it serves the stored
// cosignatures and submits to configured and discovered witnesses.
func (s *Stack) openHostLog(hc HostLogConfig, opts *hostapi.Options) error {
	n := s.Node
	key := s.fedKey
	if key == nil {
		var err error
		if key, err = federation.LoadOrCreateKey(s.cfg.KeyDir); err != nil {
			return err
		}
	}
	l, err := hostlog.Open(hostlog.Config{Dir: filepath.Join(s.cfg.Node.DataDir, hostlog.Dir), DB: n.DB(), Key: key,
		Origin: tlogproof.Origin(n.Host()), Source: n, Feed: n, Log: s.log, CheckpointInterval: hc.CheckpointInterval,
		RoundInterval: hc.RoundInterval, BatchMaxAge: hc.BatchMaxAge})
	if err != nil {
		return fmt.Errorf("host log: %w", err)
	}
	s.HostLog = l
	n.SetArchiveHostLog(identity.AgentIDFromKey(key.Public().(ed25519.PublicKey)), func(lastHash string) any {
		if p := l.ArchiveProof(lastHash); p != nil {
			return p
		}
		return nil // a typed nil would embed null
	})
	wc := witness.SubmitterConfig{Log: l, Targets: hc.Witnesses, DB: n.DB(), Logger: s.log,
		MinBackoff: hc.MinBackoff, MaxBackoff: hc.MaxBackoff, Fence: l}
	if hc.Discover && s.Mir != nil {
		wc.Discover = safehttp.Client(safehttp.Options{Timeout: 10 * time.Second, AllowPrivate: s.cfg.Federation.AllowPrivateOrigins})
	}
	if s.Witness, err = witness.NewSubmitter(wc); err != nil {
		return fmt.Errorf("witness submitter: %w", err)
	}
	l.SetWitnessed(s.Witness)
	opts.HostLog, opts.Witnessed = l, s.Witness
	if wc.Discover != nil {
		sub := s.Witness
		s.Mir.OnWitness(func(w assertion.Witness) {
			if err := sub.Offer(w.Witness.PublicKey(), w.VKey, w.URL); err != nil {
				s.log.Debug("witness announcement ignored", "witness", w.URL, "err", err)
			}
		})
	}
	return nil
}

// closeHostLog stops the submitter, then the log (it logs what the feed
// held and waits for a checkpoint covering it), before the node closes
// its database. A record the node accepts after this is in the feed,
// which the next start replays from the log's position.
func (s *Stack) closeHostLog() {
	if s.Witness != nil {
		s.Witness.Close()
	}
	if s.HostLog != nil {
		if err := s.HostLog.Close(); err != nil {
			s.log.Warn("host log close", "err", err)
		}
	}
}
