package identity

import (
	"crypto/ed25519"
	"runtime"
	"syscall"
	"testing"
	"time"
)

// BenchmarkVerifyCachedVsStdlib runs the identity layer's verification
// (key decode cached) and crypto/ed25519.Verify in alternating rounds of
// 500 on one locked thread, summing each one's thread CPU time, so that
// the machine's slow and fast phases fall on both alike. It reports both
// per verification and their ratio.
func BenchmarkVerifyCachedVsStdlib(b *testing.B) {
	env, pub := benchEnvelope(b)
	sig, _ := DecodeB64(env.Signature)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var cached, std time.Duration
	n := 0
	for b.Loop() {
		t0 := threadCPU()
		for range 500 {
			if !VerifyStrict(pub, env.Digest[:], sig) {
				b.Fatal("verify failed")
			}
		}
		t1 := threadCPU()
		for range 500 {
			if !ed25519.Verify(pub, env.Digest[:], sig) {
				b.Fatal("verify failed")
			}
		}
		t2 := threadCPU()
		cached, std, n = cached+t1-t0, std+t2-t1, n+500
	}
	b.ReportMetric(float64(cached.Nanoseconds())/float64(n)/1e3, "cached_µs")
	b.ReportMetric(float64(std.Nanoseconds())/float64(n)/1e3, "stdlib_µs")
	b.ReportMetric(float64(cached)/float64(std), "ratio")
}

// threadCPU is the calling thread's user and system CPU time.
func threadCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(1 /* RUSAGE_THREAD */, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
