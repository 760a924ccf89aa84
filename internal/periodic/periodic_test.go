package periodic

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

func TestRunStopsWithContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var calls atomic.Int64
	done := make(chan struct{})
	go func() { Run(ctx, time.Millisecond, func() { calls.Add(1) }); close(done) }()
	for calls.Load() < 3 {
		time.Sleep(time.Millisecond)
	}
	cancel()
	<-done
	after := calls.Load()
	time.Sleep(10 * time.Millisecond)
	if calls.Load() != after {
		t.Fatal("fn ran after Run returned")
	}
}
