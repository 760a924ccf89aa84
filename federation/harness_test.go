//go:build e2e

package federation_test

import (
	"sync"
	"testing"
	"time"

	"github.com/adpnode/adpnode/directory"
	"github.com/adpnode/adpnode/federation"
	"github.com/adpnode/adpnode/hostport"
	"github.com/adpnode/adpnode/internal/adptest"
	"github.com/adpnode/adpnode/internal/fedtest"
	"github.com/adpnode/adpnode/internal/testwait"
)

// Thin names over internal/fedtest, which runs federated peers in this
// process on 127.0.0.1 only.

func network(t testing.TB, k int, edges [][2]int) []*fedtest.Peer {
	t.Helper()
	return fedtest.Network(t, k, edges, fedtest.Options{})
}

func networkWith(t testing.TB, k int, edges [][2]int, o fedtest.Options) []*fedtest.Peer {
	t.Helper()
	return fedtest.Network(t, k, edges, o)
}

func connect(t testing.TB, a, b *fedtest.Peer) { t.Helper(); fedtest.Connect(t, a, b) }

func submit(t testing.TB, p *fedtest.Peer, a *adptest.Agent, typ, roomID string, payload any) *hostport.Result {
	t.Helper()
	return fedtest.MustSubmit(t, p, a, typ, roomID, payload)
}

// createRoom creates an hour-long room tagged "fed".
func createRoom(t testing.TB, p *fedtest.Peer, a *adptest.Agent, vis, topic string) string {
	t.Helper()
	return fedtest.CreateRoom(t, p, a, vis, topic, "fed")
}

// listed returns the directory entry for roomID at p, if any.
func listed(p *fedtest.Peer, roomID string) (directory.Entry, bool) {
	for _, s := range p.Fed.Directory() {
		if s.ID == roomID {
			return s, true
		}
	}
	return directory.Entry{}, false
}

// streamed collects, by room, the seqs of the records host streams to
// reader (FollowRecords), once host's record topic knows reader: a host
// publishes to the subscribers it knows.
type streamed struct {
	mu   sync.Mutex
	seqs map[string][]int64
}

func followStream(t testing.TB, host, reader *fedtest.Peer) *streamed {
	t.Helper()
	s := &streamed{seqs: map[string][]int64{}}
	if err := reader.Fed.FollowRecords(host.Fed.PeerID(), func(sr *federation.StreamedRecord) {
		s.mu.Lock()
		s.seqs[sr.Record.RoomID] = append(s.seqs[sr.Record.RoomID], sr.Record.Seq)
		s.mu.Unlock()
	}); err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, 10*time.Second, host.Name+" sees "+reader.Name+" on its record topic", func() bool {
		for _, id := range host.Fed.TopicPeers(federation.RecordTopic(host.Fed.PeerID())) {
			if id == reader.Fed.PeerID() {
				return true
			}
		}
		return false
	})
	return s
}

// of returns a copy of the seqs streamed for room so far.
func (s *streamed) of(room string) []int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]int64(nil), s.seqs[room]...)
}
