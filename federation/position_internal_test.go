package federation

import (
	"encoding/binary"
	"io"
	"log/slog"
	"testing"

	"github.com/dgraph-io/badger/v4"

	"github.com/adpnode/adpnode/internal/storelayout"
)

// positionHost is the part of a Host publisherStart reads.
type positionHost struct {
	Host
	head uint64
	db   *badger.DB
}

func (h positionHost) FeedHead() uint64 { return h.head }
func (h positionHost) DB() *badger.DB   { return h.db }

// TestPublisherStartPosition. Property: the record publisher starts
// where it stopped; with no stored position (federation's first start on
// a data dir) or one beyond the head, at the head; and never more than
// maxBacklog records behind the head, counting what it skips as dropped
// (a federation off for long and on again does not flood gossip).
func TestPublisherStartPosition(t *testing.T) {
	db, err := badger.Open(badger.DefaultOptions("").WithInMemory(true).WithLogger(nil))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	const head = 50_000
	f := &Federation{n: positionHost{head: head, db: db}, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	store := func(pos uint64) {
		t.Helper()
		if err := db.Update(func(txn *badger.Txn) error {
			return txn.Set([]byte(storelayout.FeedPos+FeedFollower), binary.BigEndian.AppendUint64(nil, pos))
		}); err != nil {
			t.Fatal(err)
		}
	}
	if got := f.publisherStart(); got != head {
		t.Fatalf("no stored position: starts after %d, want the head %d", got, head)
	}
	f.savePosition(head - 7)
	if got := f.publisherStart(); got != head-7 {
		t.Fatalf("stored %d: starts after %d", head-7, got)
	}
	store(head + 5)
	if got := f.publisherStart(); got != head {
		t.Fatalf("a position beyond the head: starts after %d, want %d", got, head)
	}
	store(3)
	if got := f.publisherStart(); got != head-maxBacklog {
		t.Fatalf("far behind: starts after %d, want %d", got, head-maxBacklog)
	}
	if got := f.stats.RecordDropped.Load(); got != head-maxBacklog-3 {
		t.Fatalf("dropped %d, want %d", got, head-maxBacklog-3)
	}
}
