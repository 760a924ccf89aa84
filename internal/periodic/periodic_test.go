package periodic

import (
	"context"
	"runtime"
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
