package adptest

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/adpnode/adpnode/adp/identity"
)

// VerifyRate runs identity.OpenEnvelope (strict parse, JCS, SHA3-256,
// strict Ed25519) over envs on procs goroutines for d and returns
// envelopes per second: the verification ceiling that write benchmarks are
// measured against in the same run.
func VerifyRate(envs [][]byte, procs int, d time.Duration) float64 {
	var stop atomic.Bool
	var total atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for p := range procs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n := int64(0)
			for i := p; !stop.Load(); i++ {
				if _, err := identity.OpenEnvelope(envs[i%len(envs)]); err != nil {
					panic(err)
				}
				n++
			}
			total.Add(n)
		}()
	}
	time.Sleep(d)
	stop.Store(true)
	wg.Wait()
	return float64(total.Load()) / time.Since(start).Seconds()
}
