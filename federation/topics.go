package federation

import (
	"context"

	pubsub "github.com/libp2p/go-libp2p-pubsub"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/adpnode/adpnode/adp/assertion"
	"github.com/adpnode/adpnode/adp/identity"
)

// Verdict is a validator's decision (gossipsub's three values).
type Verdict int

// Verdicts: Accept delivers and forwards; Reject drops and penalises the
// sender; Ignore drops without penalty (duplicates, stale news).
const (
	Accept Verdict = iota
	Reject
	Ignore
)

// TopicHandle publishes on a joined topic.
type TopicHandle struct {
	f *Federation
	t *pubsub.Topic
}

// Publish sends data to the topic.
func (h *TopicHandle) Publish(ctx context.Context, data []byte) error { return h.t.Publish(ctx, data) }

// JoinTopic joins a gossip topic for other components (mirrors: evidence
// and witness announcements). validate runs on every message from others
// (author is the message's signing peer); deliver gets what validate
// returned for accepted messages, including this node's own.
func (f *Federation) JoinTopic(name string, validate func(author peer.ID, data []byte) (any, Verdict), deliver func(v any, author peer.ID)) (*TopicHandle, error) {
	err := f.ps.RegisterTopicValidator(name, func(_ context.Context, _ peer.ID, m *pubsub.Message) pubsub.ValidationResult {
		author, err := peer.IDFromBytes(m.From)
		if err != nil {
			return f.count(pubsub.ValidationReject)
		}
		v, verdict := validate(author, m.Data)
		switch verdict {
		case Accept:
			m.ValidatorData = v
			return f.count(pubsub.ValidationAccept)
		case Ignore:
			return f.count(pubsub.ValidationIgnore)
		}
		return f.count(pubsub.ValidationReject)
	})
	if err != nil {
		return nil, err
	}
	t, err := f.ps.Join(name)
	if err != nil {
		return nil, err
	}
	sub, err := t.Subscribe(pubsub.WithBufferSize(1024))
	if err != nil {
		return nil, err
	}
	f.goLoop(func(ctx context.Context) {
		defer sub.Cancel()
		for {
			m, err := sub.Next(ctx)
			if err != nil {
				return
			}
			author, _ := peer.IDFromBytes(m.From)
			if m.ValidatorData != nil {
				deliver(m.ValidatorData, author)
			}
		}
	})
	return &TopicHandle{f: f, t: t}, nil
}

// Signer returns the node's assertion signer.
func (f *Federation) Signer() *assertion.Signer { return f.signer }

// OpenCheckpoint verifies a record.checkpoint assertion and that host
// signed it.
func OpenCheckpoint(raw []byte, host identity.AgentID) (Checkpoint, error) {
	cp, err := assertion.OpenCheckpoint(raw)
	if err != nil {
		return Checkpoint{}, err
	}
	if cp.Host != host {
		return Checkpoint{}, errWrongHost
	}
	return cp, nil
}
