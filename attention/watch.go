package attention

import (
	"fmt"

	"github.com/adpnode/adpnode/adp"
	"github.com/adpnode/adpnode/adp/identity"
	"github.com/adpnode/adpnode/live"
)

// Watcher is one live stream of an agent: mentions, join-request outcomes
// and subscription feed items, as SSE items. It is a subscription of the
// agent's topic on the service's live.Hub, so it ends as every other live
// stream does: C closes and Reason says why (live.ReasonSlow when it fell
// WatchBuffer items behind, live.ReasonShutdown when the service closed,
// live.ReasonClosed when its holder closed it). Items are pushed after they
// are stored: a client subscribes, then reads its feeds after its cursors,
// and de-duplicates by (stream, seq).
type Watcher = live.Subscription[struct{}]

// streamCapRetryMs is the Retry-After of a refused stream: a slot frees as
// soon as one of the agent's streams ends, which the host cannot foresee.
const streamCapRetryMs = 5000

// Watch opens a live stream for agent. An agent holds at most MaxWatchers
// at a time; the cap is taken atomically by the hub, so concurrent opens
// cannot exceed it, and a stream's slot comes back as soon as it ends.
func (a *Attention) Watch(agent identity.AgentID) (*Watcher, error) {
	if a.closed.Load() {
		return nil, adp.Errorf(adp.CodeUnavailable, "shutting down")
	}
	w, ok := a.live.SubscribeAtMost(string(agent), a.cfg.MaxWatchers, struct{}{})
	if !ok {
		return nil, adp.Reason(adp.CodeRateLimited, "stream_cap", fmt.Sprintf("an agent may hold at most %d live streams", a.cfg.MaxWatchers)).
			WithData("limit", a.cfg.MaxWatchers).WithData("retry_after_ms", int64(streamCapRetryMs))
	}
	return w, nil
}

// Unwatch ends a live stream (its holder is done with it).
func (a *Attention) Unwatch(w *Watcher) { w.Close() }

// DrainStreams ends every live stream with live.ReasonShutdown and leaves
// the service open: a graceful shutdown drains the streams before it
// stops the HTTP server, so their handlers return (each client reads
// ": closed shutdown") instead of holding the server's Shutdown until its
// timeout.
func (a *Attention) DrainStreams() { a.live.Drain(live.ReasonShutdown) }

// Watchers counts open live streams.
func (a *Attention) Watchers() int { return a.live.Count() }

// deliver pushes stored items to live streams. An item is encoded only for
// an agent with a stream, and once for all of that agent's streams. The hub
// never blocks: a stream whose queue is full ends with live.ReasonSlow, and
// its client reads its feeds after its cursors to catch up.
func (a *Attention) deliver(evs []liveEvent) {
	for _, e := range evs {
		topic := string(e.agent)
		if !a.live.Watched(topic) {
			continue
		}
		a.live.Publish(topic, live.NewItem(e.event, mustJSON(e.data)), nil)
	}
}
