package node

import (
	"sync"

	"github.com/adpnode/adpnode/adp"
	"github.com/adpnode/adpnode/adp/room"
	"github.com/adpnode/adpnode/adp/types"
)

// quotas are sliding one-minute windows of accepted writes per key (agent,
// room, class), ADP §21 / DECISIONS 9.
type quotas struct {
	mu sync.Mutex
	m  map[string][]int64 // key -> acceptance times (ms), oldest first
	// window is the sliding window in ms (0: one minute).
	window int64
}

func newQuotas() *quotas { return &quotas{m: map[string][]int64{}} }

func (q *quotas) span() int64 {
	if q.window > 0 {
		return q.window
	}
	return quotaWindow
}

const quotaWindow = 60_000

// allow reports whether one more event fits under limit at now; it does not
// count it (call hit after the write is durable).
func (q *quotas) allow(key string, limit int, now int64) bool {
	if limit <= 0 {
		return true
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	ts := prune(q.m[key], now, q.span())
	q.m[key] = ts
	return len(ts) < limit
}

func (q *quotas) hit(key string, limit int, now int64) {
	if limit <= 0 {
		return // unlimited: nothing to count
	}
	q.mu.Lock()
	q.m[key] = append(prune(q.m[key], now, q.span()), now)
	if len(q.m) > maxQuotaKeys {
		q.sweepLocked(now)
	}
	q.mu.Unlock()
}

// retryAfter returns the ms until the oldest hit in key leaves the window.
func (q *quotas) retryAfter(key string, now int64) int64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	ts := q.m[key]
	if len(ts) == 0 {
		return 0
	}
	return max(ts[0]+q.span()-now, 0)
}

// maxQuotaKeys triggers a sweep from hit, so a window the scheduler does not
// sweep stays bounded too.
const maxQuotaKeys = 1 << 16

func prune(ts []int64, now, window int64) []int64 {
	i := 0
	for i < len(ts) && now-ts[i] >= window {
		i++
	}
	if i == 0 {
		return ts
	}
	return append(ts[:0], ts[i:]...)
}

func (q *quotas) sweep(now int64) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.sweepLocked(now)
}

func (q *quotas) sweepLocked(now int64) {
	for k, ts := range q.m {
		if ts = prune(ts, now, q.span()); len(ts) == 0 {
			delete(q.m, k)
		} else {
			q.m[k] = ts
		}
	}
}

// rateFor returns the quota key suffix and per-minute limit for an event of
// kind k (and room-defined type def, when one applies): the kind default,
// or the type's rate_hint bounded by the host ceiling for that kind.
func (r Rates) rateFor(typ string, k adp.Kind, def *types.Definition) (string, int) {
	var limit, ceiling int
	switch k {
	case adp.KindMessage:
		limit, ceiling = r.Message, r.MessageCeiling
	case adp.KindSignal:
		limit, ceiling = r.Signal, r.SignalCeiling
	default:
		limit, ceiling = r.Control, r.ControlCeiling
	}
	if def != nil && def.RateHint > 0 && limit > 0 {
		hint := int(def.RateHint)
		if ceiling > 0 && hint > ceiling {
			hint = ceiling
		}
		return "t:" + typ, hint
	}
	return "k:" + string(k), limit
}

// rateSubject names what a rate limit counts, for error messages.
func rateSubject(a *room.Admission) string {
	switch {
	case a.Type == "room.create":
		return "rooms created by this agent"
	case a.Def != nil && a.Def.RateHint > 0:
		return a.Type + " events in this room"
	}
	return string(a.Kind) + " events in this room"
}
