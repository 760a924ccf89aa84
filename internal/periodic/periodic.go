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
