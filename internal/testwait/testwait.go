// Package testwait is the tests' one way to wait for something to happen:
// Until polls a condition, backing off from 1 ms to 20 ms between polls,
// until it holds, and fails the test if it still does not hold when the
// deadline passes.
//
// The deadline only bounds the wait: it is never what a test asserts, so
// give it a generous margin (tests run on loaded 2-core machines, under the
// race detector, many times slower than on a quiet desk). A test that must
// show something did NOT happen does not sleep and look: it waits for a
// later event that would have come after it (a counter, a record, a
// channel), then checks.
package testwait

import (
	"runtime"
	"testing"
	"time"
)

const (
	firstPoll = time.Millisecond
	maxPoll   = 20 * time.Millisecond
)

// Until polls cond until it returns true and returns how long that took
// (for logs and benchmark metrics, never for an assertion). If cond is
// still false after within, it fails the test with t.Fatalf naming what
// was awaited.
func Until(t testing.TB, within time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	took, ok := poll(within, cond)
	if !ok {
		t.Fatalf("not within %v: %s", within, what)
	}
	return took
}

// poll polls cond until it holds (true) or within has passed (false).
func poll(within time.Duration, cond func() bool) (time.Duration, bool) {
	start := time.Now()
	deadline := start.Add(within)
	wait := firstPoll
	for !cond() {
		if time.Now().After(deadline) {
			return time.Since(start), false
		}
		time.Sleep(wait)
		wait = min(2*wait, maxPoll)
	}
	return time.Since(start), true
}

// Goroutines waits until the process runs at most limit goroutines and
// returns how many it runs. If there are still more after within, it fails
// the test naming what was awaited, with every goroutine's stack (the
// leaked ones among them).
func Goroutines(t testing.TB, within time.Duration, what string, limit int) int {
	t.Helper()
	n := runtime.NumGoroutine()
	if _, ok := poll(within, func() bool { n = runtime.NumGoroutine(); return n <= limit }); !ok {
		buf := make([]byte, 1<<20)
		t.Fatalf("not within %v: %s: %d goroutines, want at most %d\n%s", within, what, n, limit, buf[:runtime.Stack(buf, true)])
	}
	return n
}
