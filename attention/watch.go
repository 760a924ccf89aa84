package attention

import (
	"fmt"
	"sync"

	"github.com/adpnode/adpnode/adp"
	"github.com/adpnode/adpnode/adp/identity"
	"github.com/adpnode/adpnode/live"
)

// Watcher is one live stream of an agent: mentions, join-request outcomes
// and subscription feed items, as SSE items. C closes when the stream is
// dropped (Reason says why). Items are pushed after they are stored: a
// client subscribes, then reads its feeds after its cursors, and
// de-duplicates by (stream, seq).
type Watcher struct {
	C      <-chan live.Item
	c      chan live.Item
	agent  identity.AgentID
	once   sync.Once
	mu     sync.Mutex
	reason string
}

func (w *Watcher) end(reason string) {
	w.once.Do(func() {
		w.mu.Lock()
		w.reason = reason
		w.mu.Unlock()
		close(w.c)
	})
}

// Reason says why C closed.
func (w *Watcher) Reason() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.reason
}

// Watch opens a live stream for agent (at most MaxWatchers at a time).
func (a *Attention) Watch(agent identity.AgentID) (*Watcher, error) {
	if a.closed.Load() {
		return nil, adp.Errorf(adp.CodeUnavailable, "shutting down")
	}
	a.wmu.Lock()
	defer a.wmu.Unlock()
	ws := a.watchers[agent]
	if len(ws) >= a.cfg.MaxWatchers {
		return nil, adp.Reason(adp.CodeRateLimited, "stream_cap", fmt.Sprintf("an agent may hold at most %d live streams", a.cfg.MaxWatchers)).
			WithData("limit", a.cfg.MaxWatchers)
	}
	if ws == nil {
		ws = map[*Watcher]struct{}{}
		a.watchers[agent] = ws
	}
	c := make(chan live.Item, a.cfg.WatchBuffer)
	w := &Watcher{C: c, c: c, agent: agent}
	ws[w] = struct{}{}
	return w, nil
}

// Unwatch ends a live stream.
func (a *Attention) Unwatch(w *Watcher) {
	a.wmu.Lock()
	if ws := a.watchers[w.agent]; ws != nil {
		delete(ws, w)
		if len(ws) == 0 {
			delete(a.watchers, w.agent)
		}
	}
	a.wmu.Unlock()
	w.end("closed")
}

// Watchers counts open live streams.
func (a *Attention) Watchers() int {
	a.wmu.Lock()
	defer a.wmu.Unlock()
	n := 0
	for _, ws := range a.watchers {
		n += len(ws)
	}
	return n
}

// deliver pushes stored items to live streams; a stream whose buffer is
// full is dropped ("lagging": the client reads its feeds to catch up).
func (a *Attention) deliver(evs []liveEvent) {
	if len(evs) == 0 {
		return
	}
	a.wmu.Lock()
	defer a.wmu.Unlock()
	for _, e := range evs {
		for w := range a.watchers[e.agent] {
			select {
			case w.c <- e.item:
			default:
				delete(a.watchers[e.agent], w)
				w.end("lagging")
			}
		}
		if len(a.watchers[e.agent]) == 0 {
			delete(a.watchers, e.agent)
		}
	}
}
