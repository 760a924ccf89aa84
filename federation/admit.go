package federation

import (
	"context"
	"errors"
	"time"

	pubsub "github.com/libp2p/go-libp2p-pubsub"

	"github.com/adpnode/adpnode/index"
)

// admit decides on a remote announcement whose signature and binding to
// its publishing peer are already checked, from gossip or index sync,
// and stores it when it passes. It returns the gossip verdict:
//
//   - Reject (the sender is penalised by peer scoring): issued in the
//     future, or a room ID that this node or a verified host holds (the
//     signed claim is kept as conflict evidence).
//   - Ignore (dropped, not forwarded): duplicates and stale news, over the
//     host's announcement rate or share of the index, and every entry of
//     a host whose binding is not verified yet — such entries are stored
//     locally (within the unverified caps) but not spread, and the
//     binding is queued for a check.
//   - Accept (forwarded): a new entry of a verified host.
func (f *Federation) admit(ctx context.Context, e *index.Entry) pubsub.ValidationResult {
	if f.ctx.Err() != nil { // closing: the store may be gone
		return pubsub.ValidationIgnore
	}
	now := f.n.NowMs()
	if e.IssuedAt > now+f.idx.Limits().Skew.Milliseconds() {
		f.stats.Future.Add(1)
		return pubsub.ValidationReject
	}
	if f.n.HostsRoom(e.Room.ID) {
		f.idx.AddConflict(e.Raw)
		f.stats.Conflicts.Add(1)
		return pubsub.ValidationReject
	}
	if !f.idx.Fresh(e.Host.Key, e.Room.ID, e.Nonce) {
		return pubsub.ValidationIgnore
	}
	if !f.rate.allow(e.Host.Key, time.Now()) {
		f.stats.RateLimited.Add(1)
		return pubsub.ValidationIgnore
	}
	verified := f.verifyInline(ctx, e.Host)
	stored, err := f.idx.Put(e, now)
	switch {
	case errors.Is(err, index.ErrFuture):
		f.stats.Future.Add(1)
		return pubsub.ValidationReject
	case errors.Is(err, index.ErrConflict):
		f.idx.AddConflict(e.Raw)
		f.stats.Conflicts.Add(1)
		return pubsub.ValidationReject
	case errors.Is(err, index.ErrHostFull):
		f.stats.OverCap.Add(1)
		return pubsub.ValidationIgnore
	case err != nil:
		f.log.Error("store index entry", "err", err)
		return pubsub.ValidationIgnore
	case !stored:
		return pubsub.ValidationIgnore
	}
	if verified {
		f.snapDirty.Store(true)
		f.reconStale.Store(true)
		return pubsub.ValidationAccept
	}
	f.queueCheck(e.Host)
	return pubsub.ValidationIgnore
}

// Inline binding checks: at most inlineChecks distinct bindings are
// checked from validators at once, within inlineTimeout, and at most
// inlineWaiters validators wait for them; everything beyond is stored
// unverified and checked by the background checkers.
const (
	inlineChecks  = 8
	inlineWaiters = 256
	inlineTimeout = 3 * time.Second
)

// verifyInline reports whether b is verified, checking it now when it
// was never checked (or is due again): so that a new honest host's first
// announcement is verified, and forwarded, as it passes through.
func (f *Federation) verifyInline(ctx context.Context, b index.Binding) bool {
	if f.Verified(b) {
		return true
	}
	select {
	case f.inline <- struct{}{}:
		defer func() { <-f.inline }()
	default:
		return false
	}
	f.checkMu.Lock()
	if c, ok := f.checks[b.Key]; ok && !c.due(b, f.cfg.AnnounceInterval) {
		f.checkMu.Unlock()
		return false
	}
	done, running := f.inflight[b.Key]
	if !running && len(f.inflight) >= inlineChecks {
		f.checkMu.Unlock()
		return false
	}
	if !running {
		done = make(chan struct{})
		f.inflight[b.Key] = done
		f.checkMu.Unlock()
		cctx, cancel := context.WithTimeout(ctx, inlineTimeout)
		_ = f.CheckBinding(cctx, b) // its outcome is recorded in f.checks
		cancel()
		f.checkMu.Lock()
		delete(f.inflight, b.Key)
		f.checkMu.Unlock()
		close(done)
	} else {
		f.checkMu.Unlock()
		t := time.NewTimer(inlineTimeout)
		defer t.Stop()
		select {
		case <-done:
		case <-ctx.Done():
		case <-t.C:
		}
	}
	return f.Verified(b)
}

// Verified reports whether b is the binding this node last verified for
// its host key (same peer ID and origin).
func (f *Federation) Verified(b index.Binding) bool {
	f.checkMu.Lock()
	defer f.checkMu.Unlock()
	c, ok := f.checks[b.Key]
	return ok && c.verified && c.peerID == b.PeerID && c.origin == b.Origin
}

// queueCheck asks the binding checkers to verify b soon (once per key
// until checked; non-blocking).
func (f *Federation) queueCheck(b index.Binding) {
	f.checkMu.Lock()
	c, checked := f.checks[b.Key]
	if f.queued[b.Key] || checked && !c.due(b, f.cfg.AnnounceInterval) || len(f.queued) >= cap(f.checkQ) {
		f.checkMu.Unlock()
		return
	}
	f.queued[b.Key] = true
	f.checkMu.Unlock()
	select {
	case f.checkQ <- b:
	default:
		f.checkMu.Lock()
		delete(f.queued, b.Key)
		f.checkMu.Unlock()
	}
}

// checkWorker verifies queued bindings one at a time.
func (f *Federation) checkWorker(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case b := <-f.checkQ:
			if err := f.CheckBinding(ctx, b); err != nil && ctx.Err() == nil {
				f.logCheckFailure(b, err)
			}
			f.checkMu.Lock()
			delete(f.queued, b.Key)
			f.checkMu.Unlock()
		}
	}
}

// logCheckFailure logs a failed binding check: at warn, but the quick
// retries of a streak (see retryIn) at debug. Checks refused because the
// origin is loopback or private repeat every few minutes for as long as
// the peer announces; only the first is logged above debug, with the
// operator's switch (Config.PrivateOriginsHint).
func (f *Federation) logCheckFailure(b index.Binding, err error) {
	var po *privateOrigin
	if !errors.As(err, &po) {
		f.checkMu.Lock()
		fails := f.checks[b.Key].fails
		f.checkMu.Unlock()
		if fails > 1 && fails <= retryBurst {
			// A quick retry of a streak already logged.
			f.log.Debug("host binding not confirmed", "host_key", b.Key, "origin", b.Origin, "err", err, "failures", fails)
			return
		}
		f.log.Warn("host binding not confirmed", "host_key", b.Key, "origin", b.Origin, "err", err, "failures", fails)
		return
	}
	if f.privateNoted.CompareAndSwap(false, true) {
		f.log.Info("host binding not checked: the origin is a loopback or private address (logged once)",
			"host_key", b.Key, "origin", b.Origin, "hint", f.cfg.PrivateOriginsHint)
		return
	}
	f.log.Debug("host binding not checked: private origin", "host_key", b.Key, "origin", b.Origin)
}
