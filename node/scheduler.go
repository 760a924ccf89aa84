package node

import (
	"container/heap"
	"context"
	"encoding/binary"
	"sync"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/adpnode/adpnode/adp/room"
)

// scheduler drives time transitions (§8): it wakes at each room's next
// start_time or end_time and runs the side effects of the new status —
// announcing it, and at the end closing live streams and fixing the
// archive's generation time. Status itself is a pure function of the
// contract and the clock, so transitions are idempotent; the archive marker
// in Badger makes end-of-room work run once, also across restarts.
type scheduler struct {
	n     *Node
	mu    sync.Mutex
	q     timerHeap
	at    map[string]int64 // room -> scheduled wake time
	wake  chan struct{}
	known map[string]room.Status
}

func newScheduler(n *Node) *scheduler {
	s := &scheduler{n: n, at: map[string]int64{}, wake: make(chan struct{}, 1), known: map[string]room.Status{}}
	now := n.NowMs()
	for _, hr := range n.roomList() {
		s.known[hr.id] = n.lifecycle(hr).StatusAt(now)
		s.touch(hr)
	}
	return s
}

// touch (re)schedules a room after a change to its times or status.
func (s *scheduler) touch(hr *hostedRoom) {
	now := s.n.NowMs()
	life := s.n.lifecycle(hr)
	next, ok := life.NextTransition(now)
	status := life.StatusAt(now)
	s.mu.Lock()
	if _, seen := s.known[hr.id]; !seen {
		s.known[hr.id] = status
	}
	if !ok {
		next = now // final state: run its side effects now
	}
	if cur, has := s.at[hr.id]; !has || cur != next {
		s.at[hr.id] = next
		heap.Push(&s.q, timerEntry{at: next, id: hr.id})
	}
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *scheduler) run(ctx context.Context) {
	sweep := time.NewTicker(30 * time.Second)
	defer sweep.Stop()
	for {
		due, wait := s.due()
		for _, id := range due {
			s.fire(id)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-s.wake:
		case <-t.C:
		case <-sweep.C:
			now := s.n.NowMs()
			s.n.nonces.sweep(now)
			s.n.quotas.sweep(now)
			s.n.status.sweep(now)
		}
		t.Stop()
	}
}

// due pops the rooms whose wake time has come and says how long to sleep.
func (s *scheduler) due() ([]string, time.Duration) {
	now := s.n.NowMs()
	s.mu.Lock()
	defer s.mu.Unlock()
	var ids []string
	for s.q.Len() > 0 {
		e := s.q[0]
		if s.at[e.id] != e.at { // superseded entry
			heap.Pop(&s.q)
			continue
		}
		if e.at > now {
			return ids, time.Duration(min(e.at-now, 60_000)) * time.Millisecond
		}
		heap.Pop(&s.q)
		delete(s.at, e.id)
		ids = append(ids, e.id)
	}
	return ids, time.Minute
}

// fire runs the side effects of a room's current status.
func (s *scheduler) fire(id string) {
	hr, ok := s.n.room(id)
	if !ok {
		return
	}
	now := s.n.NowMs()
	status := s.n.lifecycle(hr).StatusAt(now)
	s.mu.Lock()
	changed := s.known[id] != status
	s.known[id] = status
	s.mu.Unlock()
	if changed {
		s.n.endViewers(id, status)
	}
	switch status {
	case room.StatusEnded, room.StatusCancelled:
		s.n.finish(hr, status)
	default:
		s.touch(hr)
	}
}

// finish runs end-of-room work once: close live streams and, for ended
// rooms, persist the archive's generation time; then the room's state is
// stored and dropped from memory (evict, cold.go).
func (n *Node) finish(hr *hostedRoom, status room.Status) {
	n.hub.CloseTopic(hr.id, "room_"+string(status))
	n.markFinished(hr, status)
	if hr.archivedAt.Load() != 0 {
		n.evict(hr)
	}
}

func (n *Node) markFinished(hr *hostedRoom, status room.Status) {
	n.finishMu.Lock()
	defer n.finishMu.Unlock()
	if hr.archivedAt.Load() != 0 {
		return
	}
	at := n.NowMs()
	err := n.db.Update(func(txn *badger.Txn) error {
		return txn.Set([]byte(pfxArchive+hr.id), binary.BigEndian.AppendUint64(nil, uint64(at)))
	})
	if err != nil {
		n.log.Error("archive marker", "room", hr.id, "err", err)
		return
	}
	hr.archivedAt.Store(at)
	n.log.Info("room finished", "room", hr.id, "status", status)
}

type timerEntry struct {
	at int64
	id string
}

type timerHeap []timerEntry

func (h timerHeap) Len() int           { return len(h) }
func (h timerHeap) Less(i, j int) bool { return h[i].at < h[j].at }
func (h timerHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *timerHeap) Push(x any)        { *h = append(*h, x.(timerEntry)) }
func (h *timerHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
