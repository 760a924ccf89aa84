package federation

import (
	"bufio"
	"context"
	"encoding/json"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/adpnode/adpnode/adp/room"
	"github.com/adpnode/adpnode/assertion"
	"github.com/adpnode/adpnode/index"
	"github.com/adpnode/adpnode/node"
)

const errPrivate = fedError("private rooms are never announced")

// SyncProtocol lets a node that connects to a peer learn the peer's whole
// index at once instead of waiting for re-announcements: the peer answers
// with fresh announcements of its own rooms and the signed entries it
// holds for others. Every entry is verified like a gossiped one, with the
// host binding checked against the announced peer ID instead of the
// gossip author.
const SyncProtocol = "/adp/index-sync/1.0.0"

const maxSyncEntries = 100_000

// serveSync answers an index sync request.
func (f *Federation) serveSync(s network.Stream) {
	defer s.Close()
	s.SetDeadline(time.Now().Add(30 * time.Second))
	now := f.n.NowMs()
	var out []json.RawMessage
	for _, sum := range f.n.Summaries() {
		if raw, err := f.signAnnouncement(sum, now); err == nil {
			out = append(out, raw)
		}
	}
	for _, raw := range f.idx.Raw(now) {
		out = append(out, raw)
	}
	b, _ := json.Marshal(out)
	writeFrame(s, b)
}

// syncFrom pulls a peer's index.
func (f *Federation) syncFrom(ctx context.Context, id peer.ID) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	s, err := f.h.NewStream(ctx, id, SyncProtocol)
	if err != nil {
		return
	}
	defer s.Close()
	if dl, ok := ctx.Deadline(); ok {
		s.SetDeadline(dl)
	}
	s.CloseWrite()
	b, err := readFrame(bufio.NewReader(s), maxFrame*4)
	if err != nil {
		return
	}
	var list []json.RawMessage
	if json.Unmarshal(b, &list) != nil || len(list) > maxSyncEntries {
		return
	}
	now := f.n.NowMs()
	learned := 0
	for _, raw := range list {
		e, err := index.Parse(raw)
		if err != nil {
			continue
		}
		pid, err := peer.Decode(e.Host.PeerID)
		if err != nil {
			continue
		}
		if k, ok := HostKeyOf(pid); !ok || k != e.Host.Key {
			continue
		}
		if ok, _ := f.idx.Put(e, now); ok {
			learned++
		}
	}
	if learned > 0 {
		f.log.Debug("index sync", "peer", id, "learned", learned)
	}
}

// signAnnouncement signs the directory entry of a local room; private
// rooms are never announced.
func (f *Federation) signAnnouncement(sum node.RoomSummary, now int64) ([]byte, error) {
	if sum.Visibility == room.Private {
		return nil, errPrivate
	}
	ttl := defaultAnnounceTTL * f.cfg.AnnounceInterval
	if sum.Status == room.StatusEnded || sum.Status == room.StatusCancelled {
		ttl = f.cfg.TombstoneTTL
	}
	return f.signer.Sign(assertion.TypeAnnounce, index.Announcement{Room: sum, Host: f.Binding(), ExpiresAt: now + ttl.Milliseconds()}, now)
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
		n.f.syncFrom(ctx, id)
	})
}
func (syncNotifiee) Disconnected(network.Network, network.Conn) {}
func (syncNotifiee) Listen(network.Network, ma.Multiaddr)       {}
func (syncNotifiee) ListenClose(network.Network, ma.Multiaddr)  {}

// Disconnect closes every connection to a peer (operators, partition
// tests). Static peers are redialled by the dial loop.
func (f *Federation) Disconnect(id peer.ID) error { return f.h.Network().ClosePeer(id) }
