// Package periodic runs background work at a fixed interval, owned by the
// caller's context: the one loop every owned ticker goroutine of the
// process would otherwise write again.
package periodic

import (
	"context"
	"time"
)

// Run calls fn every interval until ctx ends. It returns when ctx ends;
// fn runs on the caller's goroutine and is never called after Run returns.
func Run(ctx context.Context, interval time.Duration, fn func()) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			fn()
		}
	}
}

// Signal wakes a Loop. Wake never blocks, and any number of Wake calls
// between two runs of the loop make one wake-up: a flood of work costs
// the loop one run per its least gap, not one per Wake.
type Signal struct{ c chan struct{} }

// NewSignal returns a Signal nothing has woken yet.
func NewSignal() *Signal { return &Signal{c: make(chan struct{}, 1)} }

// Wake tells the loop there is work. Safe on a nil Signal (it does
// nothing).
func (s *Signal) Wake() {
	if s == nil {
		return
	}
	select {
	case s.c <- struct{}{}:
	default:
	}
}

// C is the channel a Loop waits on.
func (s *Signal) C() <-chan struct{} {
	if s == nil {
		return nil
	}
	return s.c
}

// Loop runs fn when woken and when the delay fn last asked for has
// passed, until ctx ends; a loop with nothing to do sleeps. fn returns
// how long until it must run again without a wake-up (a retry, a
// deadline it knows of); 0 or less means not before the next wake-up,
// or idle when idle > 0 (a safety net for what no one signals). Two
// runs are at least gap apart, however often wake fires, so a wake-up
// is served within gap. fn runs first at once, on the caller's
// goroutine, and is never called after Loop returns.
func Loop(ctx context.Context, wake <-chan struct{}, gap, idle time.Duration, fn func() time.Duration) {
	loop(ctx, wake, gap, idle, fn, realClock{})
}

// clock is what Loop reads and waits on; tests drive a fake one.
type clock interface {
	Now() time.Time
	// After returns a channel that receives after d, and a stop func.
	After(d time.Duration) (<-chan time.Time, func())
}

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }
func (realClock) After(d time.Duration) (<-chan time.Time, func()) {
	t := time.NewTimer(d)
	return t.C, func() { t.Stop() }
}

func loop(ctx context.Context, wake <-chan struct{}, gap, idle time.Duration, fn func() time.Duration, c clock) {
	for {
		last := c.Now()
		next := fn()
		if next <= 0 {
			next = idle
		}
		var timer <-chan time.Time // nil: no timer, only a wake-up runs fn
		stop := func() {}
		if next > 0 {
			timer, stop = c.After(max(next, gap))
		}
		select {
		case <-ctx.Done():
			stop()
			return
		case <-timer:
			continue
		case <-wake:
			stop()
		}
		// Woken: run at once, unless the last run was less than gap ago.
		if wait := gap - c.Now().Sub(last); wait > 0 {
			t, stop := c.After(wait)
			select {
			case <-ctx.Done():
				stop()
				return
			case <-t:
			}
		}
	}
}
