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
	return time.Since(c.wall) >= interval
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
	if err != nil {
		c.err = err.Error()
	}
	f.checkMu.Lock()
	was := f.checks[b.Key]
	var contra *contradiction
	if err != nil && !errors.As(err, &contra) && was.verified && was.peerID == b.PeerID && was.origin == b.Origin {
		// The origin did not answer (down, unreachable): a binding once
		// verified stays verified until the origin contradicts it.
		c.verified = true
	}
	f.checks[b.Key] = c
	f.checkMu.Unlock()
	f.saveCheck(b.Key, c)
	if was.verified != c.verified || was.peerID != c.peerID || was.origin != c.origin {
		f.idx.Reverify()
		f.snapDirty.Store(true)
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
