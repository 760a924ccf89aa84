package witness_test

import (
	"crypto/ed25519"
	"crypto/rand"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/adpnode/adpnode/adp/tlogwitness"
)

// BenchmarkAddCheckpoint: one accepted add-checkpoint (parse, note
// signature, consistency proof in a log of about 1M leaves, cosignature,
// synced Badger write), in process without HTTP.
func BenchmarkAddCheckpoint(b *testing.B) {
	_, key, _ := ed25519.GenerateKey(rand.Reader)
	lg := newLog("host.test/adp-log", nil)
	lg.add(b, 1<<20, "l")
	f := &fixture{t: b, dir: b.TempDir(), key: key, logs: map[string]*memLog{lg.origin: lg}, real: true}
	f.open()
	defer f.close()
	// Checkpoints at sizes 2^20 - N + i, each with its proof from the last.
	n := b.N
	if n > 1<<19 {
		n = 1 << 19
	}
	full := lg.n
	bodies := make([][]byte, n+1)
	for i := 0; i <= n; i++ {
		size := full - int64(n) + int64(i)
		lg.n = size
		var proof []tlog.Hash
		if i > 0 {
			proof, _ = tlog.ProveTree(size, size-1, lg)
		}
		old := uint64(0)
		if i > 0 {
			old = uint64(size - 1)
		}
		bodies[i] = tlogwitness.FormatRequest(old, proof, lg.checkpoint(b))
	}
	if _, err := f.w.AddCheckpoint(bodies[0]); err != nil {
		b.Fatal(err)
	}
	f.w = mustUnlimited(b, f)
	b.ResetTimer()
	for i := 1; i <= n; i++ {
		if _, err := f.w.AddCheckpoint(bodies[i]); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(bodies[n])), "body-bytes")
}

// mustUnlimited reopens the fixture's witness with a rate limit the
// benchmark does not reach.
func mustUnlimited(b *testing.B, f *fixture) *witnessT {
	return f.unlimited(b, time.Nanosecond, 1<<30)
}
