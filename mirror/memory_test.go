//go:build e2e

package mirror_test

import (
	"math"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/adpnode/adpnode/internal/adptest"
	"github.com/adpnode/adpnode/internal/fedtest"
	"github.com/adpnode/adpnode/internal/testwait"
	"github.com/adpnode/adpnode/mirror"
	"github.com/adpnode/adpnode/node"
)

// bulkRoomID is the ID node.BulkLoad gives its first room.
const bulkRoomID = "b000000000000000000a"

// heapSampleRate is the heap profile's sampling rate during the test: one
// sample per 4 KiB allocated, scaled back as pprof does.
const heapSampleRate = 4096

// ownHeap estimates the heap in use by objects that the kernel (adp/...)
// and the mirror allocated, as of a fresh GC: the allocation sites of the
// heap profile whose first frame outside the runtime is in those packages. Badger's caches and memtables, libp2p and
// the like, whose sizes move by megabytes on their own, are not counted.
func ownHeap() (int64, map[string]int64) {
	for i := 0; i < 3; i++ {
		runtime.GC()
	}
	var recs []runtime.MemProfileRecord
	n, _ := runtime.MemProfile(nil, true)
	for {
		recs = make([]runtime.MemProfileRecord, n+64)
		var ok bool
		if n, ok = runtime.MemProfile(recs, true); ok {
			recs = recs[:n]
			break
		}
	}
	var total int64
	sites := map[string]int64{}
	for _, r := range recs {
		frames := runtime.CallersFrames(r.Stack())
		for {
			f, more := frames.Next()
			if !strings.HasPrefix(f.Function, "runtime.") {
				if strings.HasPrefix(f.Function, "github.com/adpnode/adpnode/adp/") || strings.HasPrefix(f.Function, "github.com/adpnode/adpnode/mirror.") {
					if objs := r.InUseObjects(); objs > 0 {
						size := float64(r.InUseBytes()) / float64(objs)
						est := int64(float64(r.InUseBytes()) / (1 - math.Exp(-size/heapSampleRate)))
						total += est
						sites[site(r.Stack())] += est
					}
				}
				break
			}
			if !more {
				break
			}
		}
	}
	return total, sites
}

// site names an allocation by its first three frames outside the runtime.
func site(stack []uintptr) string {
	var names []string
	frames := runtime.CallersFrames(stack)
	for len(names) < 3 {
		f, more := frames.Next()
		if !strings.HasPrefix(f.Function, "runtime.") {
			names = append(names, f.Function[strings.LastIndex(f.Function, "/")+1:])
		}
		if !more {
			break
		}
	}
	return strings.Join(names, " < ")
}

// Cost bound: what a mirror keeps in memory does not grow with the records
// it mirrors. B backfills a 20,000-record room (5,000 under the race
// detector, which slows catch-up several times over); afterwards the heap held by
// the kernel's and the mirror's allocations has grown by less than 8 bytes
// per record (an in-memory history costs ~100).
func TestMirrorMemoryPerRecord(t *testing.T) {
	if testing.Short() {
		t.Skip("mirrors 20,000 records")
	}
	records := memRecords
	if v, err := strconv.Atoi(os.Getenv("MIRROR_MEM_RECORDS")); err == nil && v > 0 {
		records = v
	}
	dirA := t.TempDir()
	if err := node.BulkLoad(filepath.Join(dirA, "db"), 1, records, nil); err != nil {
		t.Fatal(err)
	}
	clock := adptest.NewClock()
	a := fedtest.Start(t, "A", dirA, clock, 0, fedtest.Options{Rates: noRates})
	b := fedtest.Start(t, "B", t.TempDir(), clock, 0, restartOpts)
	fedtest.Connect(t, b, a)
	testwait.Until(t, 20*time.Second, "B indexes the bulk room", func() bool {
		_, ok := b.Index.Room(bulkRoomID, clock.Ms())
		return ok
	})

	rate := runtime.MemProfileRate
	runtime.MemProfileRate = heapSampleRate
	defer func() { runtime.MemProfileRate = rate }()
	before, sitesBefore := ownHeap()
	if _, err := b.Mir.AddTarget(mirror.TargetRoom, a.Node.RoomURL(bulkRoomID)); err != nil {
		t.Fatal(err)
	}
	var r *mirror.Room
	testwait.Until(t, 300*time.Second, "B mirrors every record", func() bool {
		var ok bool
		r, ok = b.Mir.Room(bulkRoomID, "")
		return ok && r.Tip() == int64(records)
	})
	testwait.Until(t, 20*time.Second, "B's writes are durable", func() bool { return r.HistoryPendingForTest() == 0 })
	// A catch-up still in flight (a second gap worker comparing a batch
	// it fetched with the stored chain) holds its parsed batch until it
	// ends; what is measured is what stays once the mirror is idle.
	var grew int64
	var sitesAfter map[string]int64
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		var after int64
		after, sitesAfter = ownHeap()
		if grew = after - before; grew <= int64(8*records) || time.Now().After(deadline) {
			break
		}
	}
	t.Logf("mirroring %d records grew the kernel's and mirror's heap by %d bytes (%.1f bytes/record)", records, grew, float64(grew)/float64(records))
	if grew > int64(8*records) {
		type growth struct {
			site  string
			bytes int64
		}
		var top []growth
		for s, n := range sitesAfter {
			if d := n - sitesBefore[s]; d > 0 {
				top = append(top, growth{s, d})
			}
		}
		sort.Slice(top, func(i, j int) bool { return top[i].bytes > top[j].bytes })
		for i := 0; i < len(top) && i < 8; i++ {
			t.Logf("%9d bytes  %s", top[i].bytes, top[i].site)
		}
		t.Fatalf("heap grew by %.1f bytes per mirrored record", float64(grew)/float64(records))
	}
}
