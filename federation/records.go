package federation

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"time"

	"github.com/dgraph-io/badger/v4"

	pubsub "github.com/libp2p/go-libp2p-pubsub"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/adpnode/adpnode/adp/assertion"
	"github.com/adpnode/adpnode/adp/identity"
	"github.com/adpnode/adpnode/adp/record"
	"github.com/adpnode/adpnode/adp/room"
	"github.com/adpnode/adpnode/directory"
	"github.com/adpnode/adpnode/hostport"
	"github.com/adpnode/adpnode/internal/storelayout"
)

// Checkpoint is a host's signed commitment to a record (see assertion).
type Checkpoint = assertion.Checkpoint

// RecordMsg is one message of a host's record stream.
type RecordMsg struct {
	Record     json.RawMessage `json:"record"`
	Checkpoint json.RawMessage `json:"checkpoint"`
}

// StreamedRecord is a verified record stream message.
type StreamedRecord struct {
	Record     *record.Record
	Envelope   *identity.Envelope
	Checkpoint Checkpoint
	Signed     []byte // the checkpoint assertion as signed
	Host       peer.ID
}

// FeedFollower is the record publisher's name among the followers of the
// host's change feed (its position: storelayout.FeedPos + FeedFollower).
const FeedFollower = "record-publisher"

const (
	// positionEvery is how often the publisher stores its position while
	// it advances (and once more when it stops): after a crash it
	// publishes again at most what it published in the last interval,
	// which mirrors take as the records they hold.
	positionEvery = time.Second
	// backlogWait bounds how long a publisher that starts behind the
	// feed's head waits for a peer on its record topic before it
	// publishes what it has not: a restarted node has no peer at first,
	// and gossip reaches only the peers there when a message goes out.
	backlogWait = 30 * time.Second
	// maxBacklog bounds what a start publishes of records written before
	// it (a federation turned off for a long while and on again): older
	// ones are left to the mirrors' backfill, as what the feed pruned.
	maxBacklog = 10_000
)

// publishLoop follows the host's change feed and publishes every record
// of a public room, in feed order, with a checkpoint on this host's record
// topic; records of restricted and private rooms never leave the host
// (DECISIONS 12). It also asks for the announcement of every public or
// restricted room a record changed (announceLoop).
//
// It stores its position, so that a stop does not skip what it had not
// yet published: a restarted publisher first waits (at most backlogWait)
// for a peer on its record topic, then publishes from where it was. A
// federation run on a data dir for the first time starts at the feed's
// head. Should the feed have pruned past it (it fell more than the feed
// keeps behind), it counts what it skips (Stats.RecordDropped) and goes
// on from the head: mirrors backfill those records when the room's
// announcement shows them its new head.
func (f *Federation) publishLoop(ctx context.Context) {
	pos, saved := f.feedFrom, f.feedFrom
	defer func() {
		if pos != saved {
			f.savePosition(pos)
		}
	}()
	if pos < f.n.FeedHead() {
		f.awaitRecordPeer(ctx)
	}
	last := time.Now()
	for {
		err := f.n.Follow(ctx, pos, func(batch []hostport.FeedEntry) error {
			if !f.publishBatch(ctx, batch) {
				return ctx.Err() // stopping: the batch stays unpublished
			}
			pos = batch[len(batch)-1].Seq
			if time.Since(last) >= positionEvery {
				f.savePosition(pos)
				saved, last = pos, time.Now()
			}
			return nil
		})
		if ctx.Err() != nil {
			return
		}
		if !errors.Is(err, hostport.ErrFeedBehind) {
			// The host closed first, or its store failed.
			f.log.Warn("record publisher stopped; mirrors backfill from announcements", "err", err)
			return
		}
		head := f.n.FeedHead()
		f.stats.RecordDropped.Add(int64(head - pos))
		f.log.Warn("record publisher fell behind what the change feed keeps; mirrors backfill the records it skips", "skipped", head-pos)
		pos = head
	}
}

// publisherStart is the feed position the publisher starts after: its
// stored position, or the feed's head when it has none (or a position
// beyond the head, from another data dir); at most maxBacklog behind the
// head (what it skips counts as dropped).
func (f *Federation) publisherStart() uint64 {
	head := f.n.FeedHead()
	var pos uint64
	found := false
	err := f.n.DB().View(func(txn *badger.Txn) error {
		item, err := txn.Get([]byte(storelayout.FeedPos + FeedFollower))
		if errors.Is(err, badger.ErrKeyNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		return item.Value(func(v []byte) error {
			if len(v) == 8 {
				pos, found = binary.BigEndian.Uint64(v), true
			}
			return nil
		})
	})
	if err != nil {
		f.log.Warn("read the record publisher's position; starting at the feed's head", "err", err)
	}
	if !found || pos > head {
		return head
	}
	if head-pos > maxBacklog {
		f.stats.RecordDropped.Add(int64(head - maxBacklog - pos))
		f.log.Warn("record publisher: more records than it republishes at a start were left unpublished; mirrors backfill them", "skipped", head-maxBacklog-pos)
		pos = head - maxBacklog
	}
	return pos
}

// savePosition stores the publisher's position (the node prunes the feed
// behind the slowest stored position).
func (f *Federation) savePosition(pos uint64) {
	err := f.n.DB().Update(func(txn *badger.Txn) error {
		return txn.Set([]byte(storelayout.FeedPos+FeedFollower), binary.BigEndian.AppendUint64(nil, pos))
	})
	if err != nil {
		f.log.Warn("store the record publisher's position", "err", err)
	}
}

// awaitRecordPeer waits until some peer subscribes to this host's record
// topic, at most backlogWait.
func (f *Federation) awaitRecordPeer(ctx context.Context) {
	deadline := time.NewTimer(backlogWait)
	defer deadline.Stop()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	topic := RecordTopic(f.h.ID())
	for len(f.ps.ListPeers(topic)) == 0 {
		select {
		case <-ctx.Done():
			return
		case <-deadline.C:
			return
		case <-tick.C:
		}
	}
}

// publishBatch handles one batch of feed entries: an announcement request
// per room it touches, and the records of public rooms on the record
// topic, read from the host in runs of consecutive seqs. It reports
// whether it went through the batch (false: ctx ended first).
func (f *Federation) publishBatch(ctx context.Context, batch []hostport.FeedEntry) bool {
	if ch := f.stall.Load(); ch != nil {
		select {
		case <-*ch:
		case <-ctx.Done():
			return false
		}
	}
	f.snapDirty.Store(true)
	rooms := map[string]*batchRoom{}
	for i := 0; i < len(batch); {
		e := batch[i]
		j := i + 1
		for j < len(batch) && batch[j].RoomID == e.RoomID && batch[j].RecordSeq == batch[j-1].RecordSeq+1 {
			j++
		}
		r, ok := rooms[e.RoomID]
		if !ok {
			r = &batchRoom{}
			r.s, r.ok = f.n.Summary(e.RoomID)
			rooms[e.RoomID] = r
			if r.ok && r.s.Visibility != room.Private {
				f.queueAnnounce(ctx, e.RoomID, e.RecordSeq == 1 || f.urgentChange(r.s))
			}
		}
		if r.ok && r.s.Visibility == room.Public {
			f.publishRun(ctx, batch[i:j])
		}
		i = j
	}
	return ctx.Err() == nil
}

type batchRoom struct {
	s  directory.Entry
	ok bool
}

// queueAnnounce hands announceLoop a room whose entry may have changed; it
// waits while the queue is full (announceLoop drains it between flushes).
func (f *Federation) queueAnnounce(ctx context.Context, id string, urgent bool) {
	select {
	case f.announceQ <- announceReq{id, urgent}:
	case <-ctx.Done():
	}
}

// publishRun publishes a run of one public room's records with
// consecutive seqs.
func (f *Federation) publishRun(ctx context.Context, run []hostport.FeedEntry) {
	roomID := run[0].RoomID
	raws, _, err := f.n.Events(roomID, "", run[0].RecordSeq-1, len(run))
	if err != nil {
		f.log.Warn("read records to publish; mirrors backfill them", "room", roomID, "seq", run[0].RecordSeq, "err", err)
		return
	}
	for i, raw := range raws {
		if i >= len(run) {
			break
		}
		msg, err := f.recordMessageRaw(run[i], raw)
		if err != nil {
			f.log.Error("checkpoint", "room", roomID, "seq", run[i].RecordSeq, "err", err)
			continue
		}
		f.stats.Published.Add(1)
		if err := f.recTopic.Publish(ctx, msg); err != nil && ctx.Err() == nil {
			f.log.Warn("publish record", "room", roomID, "seq", run[i].RecordSeq, "err", err)
		}
	}
}

// recordMessageRaw builds the stream message of a stored record (raw, its
// JSON as the host stores and serves it) named by its feed entry e. The
// record is the host's own, so it is not verified again; it must be the
// one e names.
func (f *Federation) recordMessageRaw(e hostport.FeedEntry, raw []byte) ([]byte, error) {
	var head struct {
		RoomID     string `json:"room_id"`
		Seq        int64  `json:"seq"`
		Hash       string `json:"hash"`
		ReceivedAt int64  `json:"received_at"`
	}
	if err := json.Unmarshal(raw, &head); err != nil {
		return nil, err
	}
	hash := identity.EncodeB64(e.Hash[:])
	if head.RoomID != e.RoomID || head.Seq != e.RecordSeq || head.Hash != hash {
		return nil, errFeedMismatch
	}
	cp, err := f.signer.Sign(assertion.TypeCheckpoint, Checkpoint{Host: f.signer.HostKey(), RoomID: e.RoomID, Seq: e.RecordSeq,
		Hash: hash, ReceivedAt: head.ReceivedAt}, f.n.NowMs())
	if err != nil {
		return nil, err
	}
	return json.Marshal(RecordMsg{Record: raw, Checkpoint: cp})
}

// ParseRecordMsg verifies a record stream message from host: the record
// (strict shape, envelope hash and signature, record hash), and a checkpoint
// signed by host's key naming exactly that record. It does not check chain
// continuity (mirrors do, with the kernel).
func ParseRecordMsg(data []byte, host peer.ID) (*StreamedRecord, error) {
	var m RecordMsg
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, err
	}
	rec, env, err := record.Parse(m.Record)
	if err != nil {
		return nil, err
	}
	cpEnv, err := assertion.Open(m.Checkpoint, assertion.TypeCheckpoint)
	if err != nil {
		return nil, err
	}
	key, ok := HostKeyOf(host)
	if !ok || cpEnv.Event.Actor != key {
		return nil, errWrongHost
	}
	var cp Checkpoint
	if err := json.Unmarshal(cpEnv.Event.Payload, &cp); err != nil {
		return nil, err
	}
	if cp.Host != key || cp.RoomID != rec.RoomID || cp.Seq != rec.Seq || cp.Hash != rec.Hash || cp.ReceivedAt != rec.ReceivedAt {
		return nil, errCheckpointMismatch
	}
	return &StreamedRecord{Record: rec, Envelope: env, Checkpoint: cp, Signed: m.Checkpoint, Host: host}, nil
}

type fedError string

func (e fedError) Error() string { return string(e) }

const (
	errWrongHost          = fedError("checkpoint not signed by the stream's host")
	errCheckpointMismatch = fedError("checkpoint does not name the record it carries")
	errFeedMismatch       = fedError("the stored record is not the one its change-feed entry names")
)

// recordSub is a subscription to a remote host's record topic.
type recordSub struct {
	topic  *pubsub.Topic
	sub    *pubsub.Subscription
	cancel context.CancelFunc
}

// validatorFor returns the record-topic validator for host's topic. Reject:
// not published by host, bad record or checkpoint, or a room the index
// knows is not public. Ignore: nothing (duplicates are deduplicated by
// message ID; gaps are the mirror's business).
func (f *Federation) validatorFor(host peer.ID) pubsub.ValidatorEx {
	return func(_ context.Context, _ peer.ID, m *pubsub.Message) pubsub.ValidationResult {
		if m.ReceivedFrom == f.h.ID() { // our own publication
			return pubsub.ValidationAccept
		}
		author, err := peer.IDFromBytes(m.From)
		if err != nil || author != host {
			return f.count(pubsub.ValidationReject)
		}
		sr, err := ParseRecordMsg(m.Data, host)
		if err != nil {
			f.log.Debug("rejected record", "host", host, "err", err)
			return f.count(pubsub.ValidationReject)
		}
		if e, ok := f.idx.Room(sr.Record.RoomID, f.n.NowMs()); ok && e.Room.Visibility != room.Public {
			return f.count(pubsub.ValidationReject)
		}
		m.ValidatorData = sr
		return f.count(pubsub.ValidationAccept)
	}
}

// validateRecord validates messages on this node's own record topic that
// arrive from others: only this node publishes there.
func (f *Federation) validateRecord(_ context.Context, _ peer.ID, m *pubsub.Message) pubsub.ValidationResult {
	if m.ReceivedFrom == f.h.ID() { // our own publication
		return pubsub.ValidationAccept
	}
	return f.count(pubsub.ValidationReject)
}

// FollowRecords subscribes to host's record stream and calls fn for every
// verified record (on one goroutine per host, in arrival order). Calling it
// again for the same host replaces fn.
func (f *Federation) FollowRecords(host peer.ID, fn func(*StreamedRecord)) error {
	f.subMu.Lock()
	defer f.subMu.Unlock()
	if old, ok := f.recSubs[host]; ok {
		old.cancel()
		old.sub.Cancel()
		old.topic.Close()
		_ = f.ps.UnregisterTopicValidator(RecordTopic(host))
		delete(f.recSubs, host)
	}
	name := RecordTopic(host)
	if err := f.ps.RegisterTopicValidator(name, f.validatorFor(host), pubsub.WithValidatorTimeout(5*time.Second)); err != nil {
		return err
	}
	t, err := f.ps.Join(name)
	if err != nil {
		return err
	}
	sub, err := t.Subscribe(pubsub.WithBufferSize(8192))
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(f.ctx)
	f.recSubs[host] = &recordSub{topic: t, sub: sub, cancel: cancel}
	f.goLoop(func(context.Context) {
		for {
			m, err := sub.Next(ctx)
			if err != nil {
				return
			}
			if sr, ok := m.ValidatorData.(*StreamedRecord); ok {
				fn(sr)
			}
		}
	})
	return nil
}
