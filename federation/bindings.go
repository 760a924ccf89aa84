package federation

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/adpnode/adpnode/adp/identity"
	"github.com/adpnode/adpnode/fedport"
	"github.com/adpnode/adpnode/index"
	"github.com/adpnode/adpnode/internal/periodic"
	"github.com/adpnode/adpnode/internal/safehttp"
	"github.com/adpnode/adpnode/internal/storelayout"
)

// HostInfo is a remote host as this node knows it.
type HostInfo = fedport.HostInfo

type bindingCheck struct {
	verified       bool
	peerID, origin string    // the binding checked (with the key)
	at             int64     // node clock (reported)
	wall           time.Time // wall clock (for throttling re-checks)
	err            string
	fails          int  // failed checks in a row of this binding
	private        bool // the last check was refused: a loopback or private origin
}

// due reports whether binding b should be (re)checked: never checked as
// it is now, failed more than an interval ago, or verified more than ten
// intervals ago.
func (c bindingCheck) due(b index.Binding, interval time.Duration) bool {
	if c.peerID != b.PeerID || c.origin != b.Origin {
		return true
	}
	return c.dueAt(interval)
}

// dueAt reports whether the check is old enough to be made again: a
// verified binding after ten intervals, another after one.
func (c bindingCheck) dueAt(interval time.Duration) bool {
	if c.wall.IsZero() {
		return true
	}
	if c.verified {
		return time.Since(c.wall) >= 10*interval
	}
	return time.Since(c.wall) >= c.retryIn(interval)
}

// Failed checks are retried soon, so that a host whose origin did not
// answer yet (still starting, briefly down) is listed once it does: after
// retryFirst, doubling with each failure in a row, at most every interval.
// A check refused because the origin is loopback or private waits the
// whole interval: only this node's own setting changes that, and a
// restart clears the checks. Past retryBurst failures in a row, the
// binding loop's pass every interval takes over from the retry timer.
const (
	retryFirst = time.Second
	retryBurst = 6
)

// retryIn is how long after a failed check the binding is checked again.
func (c bindingCheck) retryIn(interval time.Duration) time.Duration {
	if c.private || c.fails < 1 {
		return interval
	}
	return min(retryFirst<<min(c.fails-1, 20), interval)
}

// KnownHosts lists the remote hosts known from the index, with the result
// of cross-checking each binding against its discovery document.
func (f *Federation) KnownHosts() []HostInfo {
	now := f.n.NowMs()
	rooms := f.idx.RoomsOf(now)
	hosts := f.idx.Bindings(now) // before checkMu: the index's verifier takes it
	out := []HostInfo{}
	f.checkMu.Lock()
	defer f.checkMu.Unlock()
	for _, b := range hosts {
		hi := HostInfo{Binding: b, Rooms: rooms[b.Key]}
		if c, ok := f.checks[b.Key]; ok {
			hi.Verified = c.verified && c.peerID == b.PeerID && c.origin == b.Origin
			hi.CheckedAt, hi.CheckErr = c.at, c.err
			if !hi.Verified {
				hi.NotListed = f.notListedLocked(b, c)
			}
		}
		out = append(out, hi)
	}
	return out
}

// CheckBinding fetches the remote host's discovery document from the origin
// its announcements claim and verifies that it publishes the same host key
// and peer ID: an origin cannot be claimed by a key it does not serve.
func (f *Federation) CheckBinding(ctx context.Context, b index.Binding) error {
	err := f.checkBinding(ctx, b)
	c := bindingCheck{verified: err == nil, peerID: b.PeerID, origin: b.Origin, at: f.n.NowMs(), wall: time.Now()}
	var po *privateOrigin
	if err != nil {
		c.err = err.Error()
		c.private = errors.As(err, &po)
	}
	f.checkMu.Lock()
	was := f.checks[b.Key]
	var contra *contradiction
	if err != nil && !errors.As(err, &contra) && was.verified && was.peerID == b.PeerID && was.origin == b.Origin {
		// The origin did not answer (down, unreachable): a binding once
		// verified stays verified until the origin contradicts it.
		c.verified = true
	}
	if !c.verified {
		c.fails = 1
		if !was.verified && was.peerID == b.PeerID && was.origin == b.Origin {
			c.fails = was.fails + 1
		}
		if !c.private && c.fails <= retryBurst && ctx.Err() == nil {
			f.scheduleRetryLocked(b, c.wall.Add(c.retryIn(f.cfg.AnnounceInterval)))
		}
	}
	f.checks[b.Key] = c
	f.checkMu.Unlock()
	f.saveCheck(b.Key, c)
	if was.verified != c.verified || was.peerID != c.peerID || was.origin != c.origin {
		f.idx.Reverify()
		f.snapDirty.Store(true)
		f.reconStale.Store(true)
	}
	if c.verified {
		if n := f.idx.DropConflicts(b.Key, f.n.NowMs()); n > 0 {
			f.stats.Conflicts.Add(int64(n))
			f.log.Warn("dropped other hosts' claims on a verified host's room IDs", "host_key", b.Key, "dropped", n)
		}
	}
	return err
}

func (f *Federation) checkBinding(ctx context.Context, b index.Binding) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, b.Origin+"/.well-known/agent-discourse", nil)
	if err != nil {
		return err
	}
	resp, err := f.httpClient().Do(req)
	if err != nil {
		msg := "discovery document " + safehttp.Describe(f.log, "binding check", err)
		if errors.Is(err, safehttp.ErrRefused) {
			return &privateOrigin{msg}
		}
		return errors.New(msg)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 == 4 {
		return &contradiction{fmt.Sprintf("discovery document: HTTP %d", resp.StatusCode)}
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("discovery document: HTTP %d", resp.StatusCode)
	}
	var doc struct {
		HostKey identity.AgentID `json:"host_key"`
		PeerID  string           `json:"peer_id"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 256<<10)).Decode(&doc); err != nil {
		return &contradiction{"discovery document is not JSON"}
	}
	if doc.HostKey != b.Key || doc.PeerID != b.PeerID {
		return &contradiction{"discovery document names a different host key or peer ID"}
	}
	return nil
}

// privateOrigin is a binding check not made because the origin resolves
// to a loopback or private address and Config.AllowPrivateOrigins is off.
type privateOrigin struct{ msg string }

func (p *privateOrigin) Error() string { return p.msg }

// contradiction is a binding check failure in which the origin answered
// and denied the binding (as opposed to not answering).
type contradiction struct{ msg string }

func (c *contradiction) Error() string { return c.msg }

// httpClient refuses non-public addresses (internal/safehttp) unless the
// operator allows them: announced origins come from peers, and must not
// make this node probe its own network.
func (f *Federation) httpClient() *http.Client {
	return safehttp.Client(safehttp.Options{Timeout: 5 * time.Second, AllowPrivate: f.cfg.AllowPrivateOrigins})
}

// notListedLocked says why the rooms of a host whose binding b is not
// verified are not in the directory (checkMu held).
func (f *Federation) notListedLocked(b index.Binding, c bindingCheck) string {
	if c.peerID != b.PeerID || c.origin != b.Origin {
		return "host binding not checked yet"
	}
	if c.private {
		msg := "host URL " + b.Origin + " is loopback or private, and this node does not check such hosts"
		if f.cfg.PrivateOriginsHint != "" {
			msg += ": " + f.cfg.PrivateOriginsHint
		}
		return msg
	}
	msg := "host binding not confirmed: " + c.err
	if !c.wall.IsZero() {
		msg += fmt.Sprintf(" (checking again in %s)", max(0, time.Until(c.wall.Add(c.retryIn(f.cfg.AnnounceInterval)))).Round(time.Second))
	}
	return msg
}

// notListed says why the rooms of the host bound by b are not in this
// node's directory ("" when its binding is verified).
func (f *Federation) notListed(b index.Binding) string {
	f.checkMu.Lock()
	defer f.checkMu.Unlock()
	c, ok := f.checks[b.Key]
	if ok && c.verified && c.peerID == b.PeerID && c.origin == b.Origin {
		return ""
	}
	if !ok {
		return "host binding not checked yet"
	}
	return f.notListedLocked(b, c)
}

// scheduleRetryLocked asks the retry loop to check b again at at (checkMu
// held). At most cap(checkQ) retries wait; beyond, the binding loop's
// pass every interval checks the binding.
func (f *Federation) scheduleRetryLocked(b index.Binding, at time.Time) {
	if _, ok := f.retry[b.Key]; !ok && len(f.retry) >= cap(f.checkQ) {
		return
	}
	f.retry[b.Key] = pendingRetry{b: b, at: at}
	select {
	case f.retryKick <- struct{}{}:
	default:
	}
}

type pendingRetry struct {
	b  index.Binding
	at time.Time
}

// retryLoop queues the failed checks whose retry is due, sleeping until
// the next one.
func (f *Federation) retryLoop(ctx context.Context) {
	for {
		next := f.queueDueRetries(time.Now())
		var wake <-chan time.Time
		var t *time.Timer
		if !next.IsZero() {
			t = time.NewTimer(time.Until(next))
			wake = t.C
		}
		select {
		case <-ctx.Done():
		case <-wake:
		case <-f.retryKick:
		}
		if t != nil {
			t.Stop()
		}
		if ctx.Err() != nil {
			return
		}
	}
}

// queueDueRetries queues the retries due at now and returns when the next
// one is (zero: none waits).
func (f *Federation) queueDueRetries(now time.Time) time.Time {
	var due []index.Binding
	var next time.Time
	f.checkMu.Lock()
	for k, r := range f.retry {
		if !r.at.After(now) {
			due = append(due, r.b)
			delete(f.retry, k)
		} else if next.IsZero() || r.at.Before(next) {
			next = r.at
		}
	}
	f.checkMu.Unlock()
	for _, b := range due {
		f.queueCheck(b)
	}
	return next
}

// bindingLoop cross-checks host bindings once per announce interval.
func (f *Federation) bindingLoop(ctx context.Context) {
	periodic.Run(ctx, f.cfg.AnnounceInterval, func() { f.checkNewBindings(ctx) })
}

// checkNewBindings queues a cross-check of every host binding not
// checked in the last ten intervals (runs on the announce ticker), and
// forgets the checks of hosts the index no longer holds once they are
// due.
func (f *Federation) checkNewBindings(ctx context.Context) {
	now := f.n.NowMs()
	hosts := f.idx.Bindings(now)
	live := make(map[identity.AgentID]bool, len(hosts))
	for _, b := range hosts {
		live[b.Key] = true
		f.checkMu.Lock()
		c, ok := f.checks[b.Key]
		f.checkMu.Unlock()
		if ok && !c.due(b, f.cfg.AnnounceInterval) {
			continue
		}
		f.queueCheck(b)
	}
	var gone []identity.AgentID
	f.checkMu.Lock()
	for k, c := range f.checks {
		// A check is kept until it is due again even when the index
		// does not hold the host (yet): an entry in flight, or one
		// ignored while its host was checked, would otherwise meet a
		// forgotten check, be ignored and not forwarded.
		if !live[k] && c.dueAt(f.cfg.AnnounceInterval) {
			delete(f.checks, k)
			gone = append(gone, k)
		}
	}
	f.checkMu.Unlock()
	for _, k := range gone {
		f.saveCheck(k, bindingCheck{})
	}
}

// pfxCheck keys verified bindings in the node's store, so that a
// restarted node trusts what it verified until the next re-check.
const pfxCheck = storelayout.FederationBinding

type storedCheck struct {
	PeerID string `json:"peer_id"`
	Origin string `json:"origin"`
	At     int64  `json:"at"`
	Wall   int64  `json:"wall"`
}

// saveCheck stores a verified check, or deletes the stored one.
func (f *Federation) saveCheck(key identity.AgentID, c bindingCheck) {
	k := []byte(pfxCheck + string(key))
	err := f.n.DB().Update(func(txn *badger.Txn) error {
		if !c.verified {
			return txn.Delete(k)
		}
		v, _ := json.Marshal(storedCheck{PeerID: c.peerID, Origin: c.origin, At: c.at, Wall: c.wall.UnixMilli()})
		return txn.Set(k, v)
	})
	if err != nil {
		f.log.Warn("store binding check", "host_key", key, "err", err)
	}
}

// loadChecks restores stored verified bindings (at most 100,000).
func (f *Federation) loadChecks() {
	_ = f.n.DB().View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{PrefetchValues: true, Prefix: []byte(pfxCheck)})
		defer it.Close()
		for it.Rewind(); it.Valid() && len(f.checks) < 100_000; it.Next() {
			var sc storedCheck
			v, err := it.Item().ValueCopy(nil)
			if err != nil || json.Unmarshal(v, &sc) != nil {
				continue
			}
			key := identity.AgentID(it.Item().Key()[len(pfxCheck):])
			f.checks[key] = bindingCheck{verified: true, peerID: sc.PeerID, origin: sc.Origin, at: sc.At, wall: time.UnixMilli(sc.Wall)}
		}
		return nil
	})
}

// Conflicts returns the signed announcements refused for claiming a room
// ID that this node or a verified host holds (see index.AddConflict).
func (f *Federation) Conflicts() []json.RawMessage {
	list := f.idx.Conflicts()
	if list == nil {
		list = []json.RawMessage{}
	}
	return list
}
