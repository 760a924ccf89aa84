package federation

import (
	"context"
	"time"

	pubsub "github.com/libp2p/go-libp2p-pubsub"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/adpnode/adpnode/adp/identity"
	"github.com/adpnode/adpnode/adp/room"
	"github.com/adpnode/adpnode/index"
	"github.com/adpnode/adpnode/node"
)

// announceReq asks for a room's entry to be re-announced; urgent ones
// (a new room, a status change) go out at the next flush, others (a new
// seq) at most every seqAnnounceEvery per room.
type announceReq struct {
	id     string
	urgent bool
}

const (
	flushEvery       = 200 * time.Millisecond
	seqAnnounceEvery = 2 * time.Second
	// publishBurst bounds how many announcements go out back to back; the
	// rest wait for the next flush so gossipsub's per-peer queues never
	// overflow (a full queue drops messages silently).
	publishBurst = 256
)

// onNodeEvent runs on the node's writer goroutine: it only queues work.
func (f *Federation) onNodeEvent(e node.Event) {
	f.snapDirty.Store(true)
	urgent := e.Kind == node.EventStatus || e.Record != nil && (e.Record.Seq == 1 || e.Status != room.StatusActive)
	if e.Record != nil && !urgent {
		if env, err := identity.ParseEnvelope(e.Record.Envelope); err == nil {
			switch env.Event.Type {
			case "room.update", "room.close", "room.cancel":
				urgent = true
			}
		}
	}
	select {
	case f.announceQ <- announceReq{e.RoomID, urgent}:
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

// announceLoop announces changed rooms — urgent changes within 200 ms, seq
// changes at most every 2 s per room — and re-announces every local room
// each interval, all paced in bursts of at most publishBurst.
func (f *Federation) announceLoop(ctx context.Context) {
	tick := time.NewTicker(f.cfg.AnnounceInterval)
	defer tick.Stop()
	flush := time.NewTicker(flushEvery)
	defer flush.Stop()
	pending := map[string]bool{} // room -> urgent
	last := map[string]time.Time{}
	for _, s := range f.n.Summaries() {
		pending[s.ID] = true
	}
	for {
		select {
		case <-ctx.Done():
			return
		case r := <-f.announceQ:
			pending[r.id] = pending[r.id] || r.urgent
		case <-flush.C:
			now := time.Now()
			sent := 0
			for id, urgent := range pending {
				if sent >= publishBurst {
					break
				}
				if !urgent && now.Sub(last[id]) < seqAnnounceEvery {
					continue
				}
				f.announceRoom(ctx, id)
				last[id] = now
				delete(pending, id)
				sent++
			}
		case <-tick.C:
			for _, s := range f.n.Summaries() {
				pending[s.ID] = true
			}
		}
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
// peer's, private rooms, oversize, and whatever admit rejects (future
// timestamps, room IDs another host holds). Ignore: expired, duplicate,
// stale, over a limit, or from a host whose binding is not verified.
// Entries are stored here, so that an ignored (not forwarded) entry of
// an unverified host is still known locally.
func (f *Federation) validateAnnouncement(ctx context.Context, _ peer.ID, m *pubsub.Message) pubsub.ValidationResult {
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
	if e.ExpiresAt <= f.n.NowMs() {
		return f.count(pubsub.ValidationIgnore)
	}
	return f.count(f.admit(ctx, e))
}

// consumeIndex drains the index subscription (validateAnnouncement has
// stored what it accepted).
func (f *Federation) consumeIndex(ctx context.Context, sub *pubsub.Subscription) {
	defer sub.Cancel()
	for {
		if _, err := sub.Next(ctx); err != nil {
			return
		}
	}
}

// Directory returns the rooms of the federation this node knows, each
// room ID once: its own public and restricted rooms, then remote rooms
// of hosts whose binding is verified (unverified hosts' rooms stay out).
func (f *Federation) Directory() []node.RoomSummary {
	verified := true
	out := f.n.Summaries()
	seen := make(map[string]bool, len(out))
	for i := range out {
		out[i].Verified = &verified
		seen[out[i].ID] = true
	}
	for _, e := range f.idx.Entries(f.n.NowMs(), true) {
		if seen[e.Room.ID] {
			continue
		}
		s := e.Room
		s.Verified = &verified
		out = append(out, s)
	}
	return out
}
