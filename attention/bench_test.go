package attention

import (
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/adpnode/adpnode/directory"
)

// BenchmarkMatchAndAppend: 10,000 subscriptions (9,900 on one of 1,000
// tags, 100 keyword-only) against room changes offered at 1,000/s over
// 1,000 rooms. It reports the owner's cost per change (match + append +
// stored batch) and the p99 from a change (RoomChanged) to its items being
// stored and readable.
//
//	go test ./attention -run '^$' -bench MatchAndAppend -benchtime 3000x
func BenchmarkMatchAndAppend(b *testing.B) {
	w := newWorld()
	const rooms, subs = 1000, 10000
	for i := 0; i < rooms; i++ {
		w.put(directory.Entry{ID: roomID(i), Topic: fmt.Sprintf("topic %d v0", i), Tags: []string{fmt.Sprintf("t%d", i)}})
	}
	var mu sync.Mutex
	sent := map[string]time.Time{}
	var lat []time.Duration
	dir := b.TempDir()
	db := openDB(b, dir)
	defer db.Close()
	cfg := w.config(db)
	cfg.MaxSubscriptions = subs
	cfg.onPass = func() {
		now := time.Now()
		mu.Lock()
		for id, t0 := range sent {
			lat = append(lat, now.Sub(t0))
			delete(sent, id)
		}
		mu.Unlock()
	}
	a, err := Open(cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer a.Close()
	for i := 0; i < subs; i++ {
		body := fmt.Sprintf(`{"filter":{"tags":["t%d"]}}`, i%rooms)
		if i%100 == 99 {
			body = fmt.Sprintf(`{"filter":{"keyword":"topic %d "}}`, i%rooms)
		}
		req, err := ParseCreate([]byte(body))
		if err != nil {
			b.Fatal(err)
		}
		if _, err := a.Create(agentID(byte(i%200)), req); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	start := time.Now()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for i := 0; i < b.N; i++ {
		<-tick.C
		id := roomID(i % rooms)
		r := w.get(id)
		r.Topic = fmt.Sprintf("topic %d v%d", i%rooms, i)
		w.put(r)
		mu.Lock()
		if _, ok := sent[id]; !ok {
			sent[id] = time.Now()
		}
		mu.Unlock()
		a.RoomChanged(id)
	}
	for {
		mu.Lock()
		n := len(sent)
		mu.Unlock()
		if n == 0 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	el := time.Since(start)
	b.StopTimer()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	if len(lat) > 0 {
		b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99_ms")
		b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50_ms")
	}
	b.ReportMetric(float64(b.N)/el.Seconds(), "changes/s")
	var items int64
	a.mu.RLock()
	for _, s := range a.subs {
		items += s.Head
	}
	a.mu.RUnlock()
	b.ReportMetric(float64(items-int64(subs))/float64(b.N), "items/change")
}
