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
	start := time.Now()
	deadline := start.Add(within)
	poll := firstPoll
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", within, what)
			return time.Since(start)
		}
		time.Sleep(poll)
		poll = min(2*poll, maxPoll)
	}
	return time.Since(start)
}
