package attention

import (
	"fmt"
	"testing"
	"time"

	"github.com/adpnode/adpnode/adp/room"
	"github.com/adpnode/adpnode/directory"
	"github.com/adpnode/adpnode/internal/testwait"
)

// inboxWith opens a service whose agent alice holds n retained mentions
// (Retention n), half of them in a restricted room she may read.
func inboxWith(tb testing.TB, n int) *Attention {
	w := newWorld()
	db := openDB(tb, tb.TempDir())
	cfg := w.config(db)
	cfg.Retention = n
	src := newMemSource("fp/")
	cfg.Local = src
	a, err := Open(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { a.Close(); db.Close() })
	w.put(directory.Entry{ID: roomID(1), Visibility: room.Public})
	w.put(directory.Entry{ID: roomID(2), Visibility: room.Restricted})
	w.read[roomID(2)+"/"+string(alice)] = true
	for i := 1; i <= n; i++ {
		r := mentionRecord(tb, roomID(1+i%2), int64(i), "message.create", alice)
		src.add(tb, r)
	}
	testwait.Until(tb, time.Minute, "the mentions stored", func() bool {
		a.mu.RLock()
		defer a.mu.RUnlock()
		ib := a.inboxes[alice]
		return ib != nil && ib.head == int64(n)
	})
	// The last pass may still be writing: read until the last item is there.
	testwait.Until(tb, time.Minute, "the last mention readable", func() bool {
		p, err := a.Mentions(alice, Cursor{After: int64(n - 1)}, 1)
		return err == nil && len(p.Items.([]MentionItem)) == 1
	})
	return a
}

// Property: an inbox read costs O(limit), not O(retained items): a page of
// 5 from an inbox of 1,000 allocates about what it does from one of 20
// (the visibility epoch comes from the index of non-public rooms, the age
// watermark from a binary search, and the page from a seek).
func TestInboxReadCostIsLimit(t *testing.T) {
	allocs := func(n int) float64 {
		a := inboxWith(t, n)
		return testing.AllocsPerRun(20, func() {
			for _, after := range []int64{0, int64(n / 2)} {
				p, err := a.Mentions(alice, Cursor{After: after}, 5)
				if err != nil || len(p.Items.([]MentionItem)) != 5 {
					t.Fatalf("after %d: %+v %v", after, p, err)
				}
			}
		})
	}
	small, large := allocs(20), allocs(1000)
	t.Logf("allocations per two reads of 5: %.0f with 20 retained, %.0f with 1,000", small, large)
	if large > 2*small+100 {
		t.Fatalf("a read of 5 from 1,000 retained items allocates %.0f, from 20 %.0f: it grows with the inbox", large, small)
	}
}

// BenchmarkInboxRead reads pages of 10 from an inbox of 1,000 and of
// 10,000 retained items: the cost per read stays flat (O(limit)).
func BenchmarkInboxRead(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("retained=%d", n), func(b *testing.B) {
			a := inboxWith(b, n)
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				after := int64(i*10) % int64(n-10)
				p, err := a.Mentions(alice, Cursor{After: after}, 10)
				if err != nil || len(p.Items.([]MentionItem)) != 10 {
					b.Fatalf("%+v %v", p, err)
				}
			}
		})
	}
}
