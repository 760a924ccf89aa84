//go:build e2e

package mirror_test

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/adpnode/adpnode/internal/adptest"
	"github.com/adpnode/adpnode/internal/fedtest"
	"github.com/adpnode/adpnode/mirror"
	"github.com/adpnode/adpnode/node"
)

// BenchmarkMirrorRestart times a mirror's start on a data dir holding one
// mirrored room of MIRROR_RESTART_RECORDS records (default 100,000),
// written in the layout of the code before the hash index and snapshots:
// the first start replays the whole chain (and indexes it), the second
// restores the room from the snapshot the first one's Close stored.
//
//	go test -run '^$' -bench MirrorRestart -benchtime 1x ./mirror/
func BenchmarkMirrorRestart(b *testing.B) {
	records := 100_000
	if v, err := strconv.Atoi(os.Getenv("MIRROR_RESTART_RECORDS")); err == nil && v > 0 {
		records = v
	}
	for i := 0; i < b.N; i++ {
		dirA := b.TempDir()
		if err := node.BulkLoad(filepath.Join(dirA, "db"), 1, records, nil); err != nil {
			b.Fatal(err)
		}
		clock := adptest.NewClock()
		a := fedtest.Start(b, "A", dirA, clock, 0, fedtest.Options{Rates: noRates})
		var recs [][]byte
		for after := int64(0); ; {
			page, more, err := a.Node.Events(bulkRoomID, "", after, 1000)
			if err != nil {
				b.Fatal(err)
			}
			for _, raw := range page {
				recs = append(recs, raw)
			}
			after += int64(len(page))
			if !more {
				break
			}
		}
		m := fedtest.Start(b, "B", b.TempDir(), clock, 0, restartOpts)
		if err := mirror.WriteLegacyRoomForTest(m.Node.DB(), a.Fed.HostKey(), a.Fed.PeerID().String(), bulkRoomID, a.Node.RoomURL(bulkRoomID), recs); err != nil {
			b.Fatal(err)
		}
		a.Stop()
		recs = nil
		for _, pass := range []string{"whole_replay", "from_snapshot"} {
			m.Stop()
			t0 := time.Now()
			m = fedtest.Start(b, "B", m.Dir, clock, m.Port, restartOpts)
			took := time.Since(t0)
			st := m.Mir.RecoveryStats()
			r, ok := m.Mir.Room(bulkRoomID, "")
			if !ok || r.Tip() != int64(records) {
				b.Fatalf("%s: room not restored to %d records", pass, records)
			}
			b.Logf("%s: %d records; node start %v, mirror restore %v (%+v)", pass, records, took.Round(time.Millisecond), st.Took.Round(time.Millisecond), st)
			b.ReportMetric(st.Took.Seconds(), pass+"_s")
		}
		m.Stop()
	}
}
