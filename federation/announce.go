package federation

import (
	"context"
	"time"

	pubsub "github.com/libp2p/go-libp2p-pubsub"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/adpnode/adpnode/adp/room"
	"github.com/adpnode/adpnode/index"
	"github.com/adpnode/adpnode/node"
)

// onNodeEvent runs on the node's writer goroutine: it only queues work.
func (f *Federation) onNodeEvent(e node.Event) {
	select {
	case f.announceQ <- e.RoomID:
	default: // the periodic re-announcement catches up
	}
	if e.Kind == node.EventRecord {
		select {
		case f.recordQ <- e:
		default:
			f.log.Warn("record stream queue full; mirrors will backfill", "room", e.RoomID, "seq", e.Record.Seq)
		}
	}
}

// announceLoop announces changed rooms (coalesced, at most every 200 ms
// per room) and re-announces every local room each interval.
func (f *Federation) announceLoop(ctx context.Context) {
	tick := time.NewTicker(f.cfg.AnnounceInterval)
	defer tick.Stop()
	flush := time.NewTicker(200 * time.Millisecond)
	defer flush.Stop()
	pending := map[string]bool{}
	f.announceAll(ctx)
	for {
		select {
		case <-ctx.Done():
			return
		case id := <-f.announceQ:
			pending[id] = true
		case <-flush.C:
			for id := range pending {
				f.announceRoom(ctx, id)
				delete(pending, id)
			}
		case <-tick.C:
			f.announceAll(ctx)
		}
	}
}

func (f *Federation) announceAll(ctx context.Context) {
	for _, s := range f.n.Summaries() {
		f.announce(ctx, s)
	}
}

func (f *Federation) announceRoom(ctx context.Context, id string) {
	if s, ok := f.n.Summary(id); ok {
		f.announce(ctx, s)
	}
}

// Binding returns this node's host binding.
func (f *Federation) Binding() index.Binding {
	var addrs []string
	for _, a := range f.h.Addrs() {
		addrs = append(addrs, a.String())
	}
	return index.Binding{Key: f.signer.HostKey(), PeerID: f.h.ID().String(), Origin: f.n.Origin(), Addrs: addrs}
}

// announce publishes a signed entry for a local room. Private rooms are
// never announced (DECISIONS 12).
func (f *Federation) announce(ctx context.Context, s node.RoomSummary) {
	if s.Visibility == room.Private {
		return
	}
	raw, err := f.signAnnouncement(s, f.n.NowMs())
	if err != nil {
		f.log.Error("sign announcement", "room", s.ID, "err", err)
		return
	}
	if err := f.idxTopic.Publish(ctx, raw); err != nil && ctx.Err() == nil {
		f.log.Warn("publish announcement", "room", s.ID, "err", err)
	}
}

// validateAnnouncement is the index topic validator. Reject (the sender is
// penalised): bad signature or shape, a key that is not the publishing
// peer's, private rooms, oversize. Ignore: expired, duplicate or stale.
func (f *Federation) validateAnnouncement(_ context.Context, _ peer.ID, m *pubsub.Message) pubsub.ValidationResult {
	if m.ReceivedFrom == f.h.ID() { // our own publication
		return pubsub.ValidationAccept
	}
	e, err := index.Parse(m.Data)
	if err != nil {
		f.log.Debug("rejected announcement", "from", m.ReceivedFrom, "err", err)
		return f.count(pubsub.ValidationReject)
	}
	author, err := peer.IDFromBytes(m.From)
	if err != nil || author.String() != e.Host.PeerID {
		return f.count(pubsub.ValidationReject)
	}
	if k, ok := HostKeyOf(author); !ok || k != e.Host.Key {
		return f.count(pubsub.ValidationReject)
	}
	if e.ExpiresAt <= f.n.NowMs() || !f.idx.Fresh(e.Host.Key, e.Room.ID, e.Nonce) {
		return f.count(pubsub.ValidationIgnore)
	}
	m.ValidatorData = e
	return f.count(pubsub.ValidationAccept)
}

// consumeIndex stores validated remote announcements.
func (f *Federation) consumeIndex(ctx context.Context, sub *pubsub.Subscription) {
	defer sub.Cancel()
	for {
		m, err := sub.Next(ctx)
		if err != nil {
			return
		}
		e, ok := m.ValidatorData.(*index.Entry)
		if !ok || m.ReceivedFrom == f.h.ID() {
			continue
		}
		if _, err := f.idx.Put(e, f.n.NowMs()); err != nil {
			f.log.Error("store index entry", "err", err)
		}
	}
}

// Directory returns the rooms of the federation this node knows: its own
// public and restricted rooms plus unexpired remote entries.
func (f *Federation) Directory() []node.RoomSummary {
	return append(f.n.Summaries(), f.idx.Summaries(f.n.NowMs())...)
}
