package testwait

import (
	"fmt"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// fakeTB records a failure instead of ending the goroutine.
type fakeTB struct {
	testing.TB
	failed string
}

func (f *fakeTB) Helper() {}
func (f *fakeTB) Fatalf(format string, args ...any) {
	f.failed = fmt.Sprintf(format, args...)
}

// Property: Until returns once the condition holds, having polled it until
// then, and does not fail the test.
func TestUntilReturnsWhenTheConditionHolds(t *testing.T) {
	var calls atomic.Int32
	f := &fakeTB{TB: t}
	Until(f, time.Minute, "the fifth poll", func() bool { return calls.Add(1) == 5 })
	if f.failed != "" {
		t.Fatalf("failed: %s", f.failed)
	}
	if n := calls.Load(); n != 5 {
		t.Fatalf("cond called %d times, want 5", n)
	}
}

// Property: a condition that never holds fails the test with the message
// naming what was awaited, once the deadline passed.
func TestUntilFailsNamingWhatWasAwaited(t *testing.T) {
	f := &fakeTB{TB: t}
	Until(f, 5*time.Millisecond, "room R1 listed", func() bool { return false })
	if want := "not within 5ms: room R1 listed"; f.failed != want {
		t.Fatalf("failure %q, want %q", f.failed, want)
	}
}

// Property: Goroutines returns once the goroutines above the limit have
// ended, and fails naming what was awaited, with the stacks, while one
// is still running.
func TestGoroutinesWaitsForLeftoversAndDumpsThem(t *testing.T) {
	base := runtime.NumGoroutine()
	stop := make(chan struct{})
	started := make(chan struct{})
	go func() {
		close(started)
		<-stop
	}()
	<-started
	// No process runs fewer than one goroutine: this wait fails, and the
	// stacks show the helper.
	f := &fakeTB{TB: t}
	Goroutines(f, 5*time.Millisecond, "the helper gone", 0)
	if !strings.HasPrefix(f.failed, "not within 5ms: the helper gone: ") || !strings.Contains(f.failed, "TestGoroutinesWaitsForLeftoversAndDumpsThem.func1") {
		t.Fatalf("failure %q, want what was awaited and the stacks", f.failed)
	}
	close(stop)
	f = &fakeTB{TB: t}
	if n := Goroutines(f, time.Minute, "the helper gone", base); f.failed != "" || n > base {
		t.Fatalf("Goroutines = %d (base %d), failed %q", n, base, f.failed)
	}
}
