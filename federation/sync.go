package federation

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/adpnode/adpnode/adp/assertion"
	"github.com/adpnode/adpnode/adp/room"
	"github.com/adpnode/adpnode/directory"
	"github.com/adpnode/adpnode/index"
)

const errPrivate = fedError("private rooms are never announced")

// SyncProtocol lets a node that connects to a peer learn the peer's whole
// index at once instead of waiting for re-announcements: the peer answers
// with fresh announcements of its own rooms and the signed entries it
// holds for others. Every entry is verified like a gossiped one, with the
// host binding checked against the announced peer ID instead of the
// gossip author.
const SyncProtocol = "/adp/index-sync/1.0.0"

// Index-sync bounds: the answer is a snapshot, rebuilt at most every
// snapshotEvery, of at most maxSyncEntries entries cut into pages of at
// most syncPageBytes; each stream serves one page within syncDeadline.
const (
	maxSyncEntries = 20_000
	maxSyncPages   = 64
	syncPageBytes  = 1 << 20
	snapshotEvery  = 5 * time.Second
	// snapshotMinAge is how soon a snapshot is rebuilt after the index or
	// the local rooms changed.
	snapshotMinAge = time.Second
	syncDeadline   = 10 * time.Second
)

// syncPage is one page of an index-sync answer.
type syncPage struct {
	Entries []json.RawMessage `json:"entries"`
	Page    int               `json:"page"`
	Pages   int               `json:"pages"`
}

// encodeSyncPage encodes a syncPage whose entries are the signed
// announcements exactly as signed (see rawArray).
func encodeSyncPage(entries [][]byte, page, pages int) []byte {
	n := 48
	for _, e := range entries {
		n += len(e) + 1
	}
	b := append(make([]byte, 0, n), `{"entries":`...)
	b = rawArray(b, entries)
	return fmt.Appendf(b, `,"page":%d,"pages":%d}`, page, pages)
}

// syncRequest asks for one page (an empty request means page 0).
type syncRequest struct {
	Page int `json:"page"`
}

// syncSnapshot is the cached, already serialised index-sync answer.
type syncSnapshot struct {
	at     time.Time
	pages  [][]byte
	counts []int // entries per page
}

// snapshot returns the cached pages, rebuilding them when older than
// snapshotEvery, or than snapshotMinAge once something changed (so at most
// once a second however often peers ask): fresh announcements of this node's rooms and the signed
// entries of verified hosts, never unverified ones.
func (f *Federation) snapshot() syncSnapshot {
	f.snapMu.Lock()
	defer f.snapMu.Unlock()
	age := time.Since(f.snap.at)
	if f.snap.pages != nil && age < snapshotEvery && (age < snapshotMinAge || !f.snapDirty.Load()) {
		return f.snap
	}
	f.snapDirty.Store(false)
	now := f.n.NowMs()
	var entries [][]byte
	for _, sum := range f.n.Summaries() {
		if len(entries) >= maxSyncEntries {
			break
		}
		if p, ok := f.lastPublished(sum.ID); ok && p.expires > now {
			entries = append(entries, p.raw) // the one peers hold: same item id
		} else if raw, err := f.signAnnouncement(sum, now); err == nil {
			entries = append(entries, raw)
		}
	}
	for _, raw := range f.idx.Raw(now, true) {
		if len(entries) >= maxSyncEntries {
			break
		}
		entries = append(entries, raw)
	}
	var groups [][][]byte
	size := 0
	for _, raw := range entries {
		if len(groups) == 0 || size+len(raw) > syncPageBytes {
			if len(groups) == maxSyncPages {
				break
			}
			groups = append(groups, nil)
			size = 0
		}
		groups[len(groups)-1] = append(groups[len(groups)-1], raw)
		size += len(raw) + 1
	}
	if len(groups) == 0 {
		groups = [][][]byte{{}}
	}
	pages := make([][]byte, len(groups))
	counts := make([]int, len(groups))
	for i, g := range groups {
		pages[i], counts[i] = encodeSyncPage(g, i, len(groups)), len(g)
	}
	f.snap = syncSnapshot{at: time.Now(), pages: pages, counts: counts}
	return f.snap
}

// serveSync answers one index-sync request per stream from the cached
// snapshot: one page, within syncDeadline and the peer's pull budget
// (Limits.Pull). A peer may hold SyncPerPeer streams at once; more are
// reset, so a peer that never reads holds little for long.
func (f *Federation) serveSync(s network.Stream) {
	id := s.Conn().RemotePeer()
	if !f.syncSlots.acquire(id) {
		f.stats.SyncRefused.Add(1)
		s.Reset()
		return
	}
	defer f.syncSlots.release(id)
	if !f.pull.take(id, 1, 0, 0) {
		f.refusePull(s)
		return
	}
	s.SetDeadline(time.Now().Add(syncDeadline))
	var req syncRequest
	b, err := readFrame(bufio.NewReader(s), 256)
	switch {
	case err == nil:
		if json.Unmarshal(b, &req) != nil {
			s.Reset()
			return
		}
	case errors.Is(err, io.EOF): // EOF before any request: page 0
	default:
		s.Reset()
		return
	}
	f.stats.PullRead.Add(int64(len(b) + 4))
	snap := f.snapshot()
	var out []byte
	n := 0
	if req.Page < 0 || req.Page >= len(snap.pages) {
		out = encodeSyncPage(nil, req.Page, len(snap.pages))
	} else {
		out, n = snap.pages[req.Page], snap.counts[req.Page]
	}
	if !f.pull.take(id, 0, int64(len(b)+4+len(out)+4), n) {
		f.refusePull(s)
		return
	}
	f.stats.PullServed.Add(int64(len(out) + 4))
	f.stats.PullIDs.Add(int64(n))
	if writeFrame(s, out) != nil {
		s.Reset()
		return
	}
	s.Close()
}

// syncFrom pulls a peer's index, one page per stream.
func (f *Federation) syncFrom(ctx context.Context, id peer.ID) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	learned := 0
	for page, pages := 0, 1; page < pages && page < maxSyncPages; page++ {
		p, err := f.syncPage(ctx, id, page)
		if err != nil {
			f.log.Debug("index sync", "peer", id, "page", page, "err", err)
			break
		}
		pages = p.Pages
		for _, raw := range p.Entries {
			ok, err := f.admitRelayed(ctx, id, raw)
			if err != nil {
				f.log.Debug("index sync", "peer", id, "err", err)
				return
			}
			if ok {
				learned++
			}
		}
	}
	if learned > 0 {
		f.log.Debug("index sync", "peer", id, "learned", learned)
	}
}

// syncPage asks for one page on a stream of its own and reads it.
func (f *Federation) syncPage(ctx context.Context, id peer.ID, page int) (*syncPage, error) {
	s, err := f.h.NewStream(ctx, id, SyncProtocol)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	s.SetDeadline(time.Now().Add(syncDeadline))
	req, _ := json.Marshal(syncRequest{Page: page})
	if err := writeFrame(s, req); err != nil {
		s.Reset()
		return nil, err
	}
	b, err := readFrame(bufio.NewReader(s), 2*syncPageBytes)
	if err != nil {
		s.Reset()
		return nil, err
	}
	var p syncPage
	if err := json.Unmarshal(b, &p); err != nil {
		return nil, err
	}
	if len(p.Entries) > maxSyncEntries {
		return nil, errors.New("oversized sync page")
	}
	return &p, nil
}

// signAnnouncement signs the directory entry of a local room; private
// rooms are never announced.
func (f *Federation) signAnnouncement(sum directory.Entry, now int64) ([]byte, error) {
	if sum.Visibility == room.Private {
		return nil, errPrivate
	}
	return f.signer.Sign(assertion.TypeAnnounce, index.Announcement{Room: sum, Host: f.Binding(), ExpiresAt: now + f.ttlOf(sum).Milliseconds()}, now)
}

// syncNotifiee pulls the index from every newly connected peer.
type syncNotifiee struct{ f *Federation }

func (n syncNotifiee) Connected(_ network.Network, c network.Conn) {
	id := c.RemotePeer()
	n.f.goLoop(func(ctx context.Context) {
		// Give the peer a moment to register its protocols.
		select {
		case <-ctx.Done():
			return
		case <-time.After(100 * time.Millisecond):
		}
		n.f.syncPeer(ctx, id)
	})
}
func (syncNotifiee) Disconnected(network.Network, network.Conn) {}
func (syncNotifiee) Listen(network.Network, ma.Multiaddr)       {}
func (syncNotifiee) ListenClose(network.Network, ma.Multiaddr)  {}

// Disconnect closes every connection to a peer (operators, partition
// tests). Static peers are redialled by the dial loop.
func (f *Federation) Disconnect(id peer.ID) error { return f.h.Network().ClosePeer(id) }
