package attention

import (
	"context"
	"sort"
	"sync"
	"testing"

	"github.com/adpnode/adpnode/adp/identity"
	"github.com/adpnode/adpnode/adp/record"
	"github.com/adpnode/adpnode/hostport"
	"github.com/adpnode/adpnode/internal/groupcommit"
)

// memSource is a change feed in memory, with the records it names: the
// node's or the mirror's as attention sees them. It outlives restarts of
// the service, as a node's feed does.
type memSource struct {
	posKey string
	mu     sync.Mutex
	floor  uint64 // entries at or below it are pruned
	feed   []hostport.FeedEntry
	recs   map[string]map[int64][]byte
	wake   chan struct{}
	closed bool
	// legacy: entries without flags, as a node stored them before flags
	// existed; reads counts Records calls.
	legacy bool
	reads  int
}

var _ Source = (*memSource)(nil)

func newMemSource(posKey string) *memSource {
	return &memSource{posKey: posKey, recs: map[string]map[int64][]byte{}, wake: make(chan struct{})}
}

// add stores r and appends its feed entry.
func (s *memSource) add(t testing.TB, r *record.Record) {
	raw, err := r.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	h, err := identity.DecodeB64Len(r.Hash, 32)
	if err != nil {
		t.Fatal(err)
	}
	env, err := identity.OpenEnvelope(r.Envelope)
	if err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.recs[r.RoomID] == nil {
		s.recs[r.RoomID] = map[int64][]byte{}
	}
	s.recs[r.RoomID][r.Seq] = raw
	e := hostport.FeedEntry{Seq: s.floor + uint64(len(s.feed)) + 1, RoomID: r.RoomID, RecordSeq: r.Seq, Hash: [32]byte(h)}
	if !s.legacy {
		e.Flags = hostport.FeedFlagsOf(&env.Event) // as the node's and the mirror's writers
	}
	s.feed = append(s.feed, e)
	close(s.wake)
	s.wake = make(chan struct{})
}

// prune drops every entry; a follower not at the head is then behind.
func (s *memSource) prune() {
	s.mu.Lock()
	s.floor += uint64(len(s.feed))
	s.feed = nil
	s.mu.Unlock()
}

func (s *memSource) FeedHead() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.floor + uint64(len(s.feed))
}

func (s *memSource) Follow(ctx context.Context, since uint64, fn func([]hostport.FeedEntry) error) error {
	pos := since
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		s.mu.Lock()
		head, wake, closed := s.floor+uint64(len(s.feed)), s.wake, s.closed
		var batch []hostport.FeedEntry
		behind := pos < s.floor
		if !behind && head > pos {
			batch = append(batch, s.feed[pos-s.floor:]...)
		}
		s.mu.Unlock()
		switch {
		case closed:
			return groupcommit.ErrClosed
		case behind:
			return hostport.ErrFeedBehind
		case len(batch) > 0:
			if err := fn(batch); err != nil {
				return err
			}
			pos = batch[len(batch)-1].Seq
			continue
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (s *memSource) FeedPosKey(follower string) []byte { return []byte(s.posKey + follower) }

func (s *memSource) Records(roomID string, after int64, limit int) ([][]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reads++
	var seqs []int64
	for seq := range s.recs[roomID] {
		if seq > after {
			seqs = append(seqs, seq)
		}
	}
	sort.Slice(seqs, func(i, j int) bool { return seqs[i] < seqs[j] })
	var out [][]byte
	for _, seq := range seqs {
		if len(out) == limit {
			break
		}
		out = append(out, s.recs[roomID][seq])
	}
	return out, nil
}

func (s *memSource) Heads() []Head {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Head
	for id, recs := range s.recs {
		h := Head{ID: id}
		for seq := range recs {
			h.Seq = max(h.Seq, seq)
		}
		out = append(out, h)
	}
	return out
}
