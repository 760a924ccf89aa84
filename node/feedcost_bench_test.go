//go:build linux && e2e

package node_test

import (
	"context"
	"fmt"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/adpnode/adpnode/adp/record"
	"github.com/adpnode/adpnode/internal/adptest"
	"github.com/adpnode/adpnode/node"
)

// BenchmarkSubmitFeed measures durable writes (group-committed, synced
// Badger, 32 rooms written at once, reaction.create signals signed
// beforehand) with
// their change-feed entries ("on") and without ("off",
// node.Config.WithoutFeed): the feed's cost on the write path. "synced"
// is the node as it serves; "memory" (Badger in memory, no fsync) leaves
// the CPU of the write path alone, the feed's share of which bounds its
// share of synced throughput. Run the two as interleaved pairs of
// processes, e.g. with the test binary of `go test -c ./node`:
//
//	node.test -test.run '^$' -test.bench 'SubmitFeed/memory/on' -test.benchtime 20000x
//	node.test -test.run '^$' -test.bench 'SubmitFeed/memory/off' -test.benchtime 20000x
func BenchmarkSubmitFeed(b *testing.B) {
	for _, store := range []string{"synced", "memory"} {
		for _, c := range []struct {
			name    string
			without bool
		}{{"on", false}, {"off", true}} {
			b.Run(store+"/"+c.name, func(b *testing.B) { benchSubmit(b, store == "memory", c.without) })
		}
	}
}

func benchSubmit(b *testing.B, inMemory, without bool) {
	const rooms = 32
	cfg := node.Config{DataDir: b.TempDir(), Rates: node.NoRates(), WithoutFeed: without}
	if inMemory {
		cfg = node.Config{InMemory: true, Rates: node.NoRates(), WithoutFeed: without}
	}
	h := adptest.StartHostAt(b, cfg, adptest.NewClock())
	per := (b.N + rooms - 1) / rooms
	ids := make([]string, rooms)
	envs := make([][][]byte, rooms)
	for i := range rooms {
		a := adptest.NewAgent(fmt.Sprint("feedcost-", i))
		ids[i] = h.CreateRoom(b, a, h.RoomPayload("public"))
		raws, _, err := h.Node.Events(ids[i], a.ID, 0, 1)
		if err != nil || len(raws) != 1 {
			b.Fatal(raws, err)
		}
		create, env, err := record.Parse(raws[0])
		if err != nil {
			b.Fatal(err)
		}
		// Signals anchored on room.create (as adpload -mode reaction):
		// they need not wait for the head, so they can be signed now.
		for range per {
			envs[i] = append(envs[i], a.Envelope(h.Clock.Ms(), "reaction.create", ids[i], create.Seq, create.Hash,
				map[string]any{"event_id": env.Hash, "reaction": "agree"}))
		}
	}
	b.ResetTimer()
	cpu0 := processCPU(b)
	var wg sync.WaitGroup
	for i := range rooms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, env := range envs[i] {
				if _, err := h.Node.Submit(context.Background(), env, ids[i]); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64(per*rooms)/b.Elapsed().Seconds(), "writes/s")
	// The process's CPU time per write (the node's goroutines and
	// Badger's): steadier than writes/s on a shared machine.
	b.ReportMetric(float64((processCPU(b)-cpu0).Microseconds())/float64(per*rooms), "cpu-µs/write")
}

// processCPU is the process's user and system CPU time so far.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
