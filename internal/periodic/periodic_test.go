package periodic

import (
	"context"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/adpnode/adpnode/internal/testwait"
)

// Property: Run calls fn until its context ends and never after it
// returned: once it returned and no goroutine it could have left runs,
// the count of calls stays put.
func TestRunStopsWithContext(t *testing.T) {
	base := runtime.NumGoroutine()
	ctx, cancel := context.WithCancel(context.Background())
	var calls atomic.Int64
	done := make(chan struct{})
	go func() { Run(ctx, time.Millisecond, func() { calls.Add(1) }); close(done) }()
	testwait.Until(t, 20*time.Second, "three calls", func() bool { return calls.Load() >= 3 })
	cancel()
	<-done
	after := calls.Load()
	testwait.Goroutines(t, 20*time.Second, "Run's goroutines gone", base)
	if calls.Load() != after {
		t.Fatal("fn ran after Run returned")
	}
}

// fakeClock is a clock the test moves. Each After registers a waiter and
// announces it on waiting, so the test knows the loop is blocked.
type fakeClock struct {
	mu      sync.Mutex
	now     time.Time
	waiters []fakeWaiter
	waiting chan struct{}
}

type fakeWaiter struct {
	at time.Time
	c  chan time.Time
}

func (f *fakeClock) Now() time.Time { f.mu.Lock(); defer f.mu.Unlock(); return f.now }

func (f *fakeClock) After(d time.Duration) (<-chan time.Time, func()) {
	f.mu.Lock()
	c := make(chan time.Time, 1)
	w := fakeWaiter{f.now.Add(d), c}
	f.waiters = append(f.waiters, w)
	f.mu.Unlock()
	f.waiting <- struct{}{}
	return c, func() { f.drop(c) }
}

func (f *fakeClock) drop(c chan time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.waiters = slices.DeleteFunc(f.waiters, func(w fakeWaiter) bool { return w.c == c })
}

// advance moves the clock by d and fires the waiters due; it reports
// whether it fired any.
func (f *fakeClock) advance(d time.Duration) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now = f.now.Add(d)
	n := len(f.waiters)
	f.waiters = slices.DeleteFunc(f.waiters, func(w fakeWaiter) bool {
		if w.at.After(f.now) {
			return false
		}
		w.c <- f.now
		return true
	})
	return len(f.waiters) < n
}

// startLoop runs loop on a fake clock with fn answering next; runs
// receives one value per call of fn. It returns after the first run.
func startLoop(t *testing.T, wake <-chan struct{}, gap, idle, next time.Duration) (*fakeClock, chan struct{}) {
	t.Helper()
	clk := &fakeClock{now: time.Unix(1_000_000, 0), waiting: make(chan struct{}, 1<<10)}
	runs := make(chan struct{}, 1<<16)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		loop(ctx, wake, gap, idle, func() time.Duration { runs <- struct{}{}; return next }, clk)
		close(done)
	}()
	t.Cleanup(func() { cancel(); <-done })
	<-runs // the first run is at once
	return clk, runs
}

func drain(c chan struct{}) int {
	n := 0
	for {
		select {
		case <-c:
			n++
		default:
			return n
		}
	}
}

// Property: a Loop with nothing to do sleeps: over ten simulated minutes
// without a wake-up it runs once per idle interval (30 s), not once per
// gap (500 ms) as a ticker would; and a wake-up runs it at once.
func TestLoopSleepsWhenIdleAndWakesAtOnce(t *testing.T) {
	sig := NewSignal()
	clk, runs := startLoop(t, sig.C(), 500*time.Millisecond, 30*time.Second, 0)
	<-clk.waiting    // asleep on its idle timer
	for range 1200 { // 10 minutes in 500 ms steps
		if clk.advance(500 * time.Millisecond) {
			<-runs
			<-clk.waiting // asleep again
		}
	}
	if n := 1 + drain(runs); n > 21 {
		t.Fatalf("an idle loop ran %d times in 10 minutes (want at most 21, one per 30 s)", n)
	}
	clk.advance(10 * time.Second) // no timer is due
	sig.Wake()
	<-runs // served without the clock moving
}

// Property: a flood of wake-ups costs one run per gap: 10,000 Wake
// calls while the clock stands still run fn once, and the loop then
// waits for the gap to pass before it serves them with one more run.
func TestLoopFloodRunsOncePerGap(t *testing.T) {
	sig := NewSignal()
	clk, runs := startLoop(t, sig.C(), time.Second, 0, 0) // no idle timer: wake-ups only
	clk.advance(5 * time.Second)
	sig.Wake()
	<-runs
	for range 10_000 {
		sig.Wake()
	}
	<-clk.waiting // the loop waits out the gap
	if n := drain(runs); n != 0 {
		t.Fatalf("%d runs within the gap", n)
	}
	if !clk.advance(time.Second) {
		t.Fatal("no gap timer")
	}
	<-runs        // the flood's one run
	<-clk.waiting // and the wake-up left pending meanwhile waits out the gap again
	if n := drain(runs); n != 0 {
		t.Fatalf("%d more runs within the gap", n)
	}
}

// Property: the delay fn asks for is kept (a retry it knows of), and
// Loop returns when its context ends, never calling fn after.
func TestLoopRunsWhenAsked(t *testing.T) {
	clk, runs := startLoop(t, nil, 100*time.Millisecond, 0, 3*time.Second)
	<-clk.waiting
	if clk.advance(2 * time.Second) {
		t.Fatal("fired before the delay fn asked for")
	}
	if !clk.advance(time.Second) {
		t.Fatal("not fired at the delay fn asked for")
	}
	<-runs
}
