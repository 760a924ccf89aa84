package federation

import (
	"context"
	"encoding/json"
	"time"

	pubsub "github.com/libp2p/go-libp2p-pubsub"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/adpnode/adpnode/adp/assertion"
	"github.com/adpnode/adpnode/adp/identity"
	"github.com/adpnode/adpnode/adp/record"
	"github.com/adpnode/adpnode/adp/room"
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

// publishLoop publishes every accepted record of a public room with a
// checkpoint on this host's record topic. Records of restricted and
// private rooms never leave the host (DECISIONS 12).
func (f *Federation) publishLoop(ctx context.Context) {
	var drops int64
	for {
		select {
		case <-ctx.Done():
			return
		case e := <-f.recordQ:
			f.noteDrops(&drops, &f.stats.RecordDropped, "record stream queue full; mirrors will backfill")
			s, ok := f.n.Summary(e.RoomID)
			if !ok || s.Visibility != room.Public {
				continue
			}
			msg, err := f.recordMessage(e.Record)
			if err != nil {
				f.log.Error("checkpoint", "room", e.RoomID, "err", err)
				continue
			}
			f.stats.Published.Add(1)
			if err := f.recTopic.Publish(ctx, msg); err != nil && ctx.Err() == nil {
				f.log.Warn("publish record", "room", e.RoomID, "seq", e.Record.Seq, "err", err)
			}
		}
	}
}

func (f *Federation) recordMessage(rec *record.Record) ([]byte, error) {
	cp, err := f.signer.Sign(assertion.TypeCheckpoint, Checkpoint{Host: f.signer.HostKey(), RoomID: rec.RoomID, Seq: rec.Seq,
		Hash: rec.Hash, ReceivedAt: rec.ReceivedAt}, f.n.NowMs())
	if err != nil {
		return nil, err
	}
	recJSON, _ := rec.MarshalJSON()
	return json.Marshal(RecordMsg{Record: recJSON, Checkpoint: cp})
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
