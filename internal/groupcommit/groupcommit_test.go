package groupcommit

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/dgraph-io/badger/v4"
)

// Many concurrent writers each get an answer only once their write is in
// the database; batches share transactions; a write larger than one
// transaction still lands; writes after Close are refused.
func TestCommitterBatchesAndCloses(t *testing.T) {
	db, err := badger.Open(badger.DefaultOptions(t.TempDir()).WithSyncWrites(true).WithLogger(nil))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	c := New(db, 64)
	var wg sync.WaitGroup
	for w := 0; w < 50; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < 20; i++ {
				k := []byte(fmt.Sprintf("k/%d/%d", w, i))
				if err := c.Commit([]KV{{K: k, V: []byte("v")}}); err != nil {
					t.Error(err)
					return
				}
				if err := db.View(func(txn *badger.Txn) error { _, err := txn.Get(k); return err }); err != nil {
					t.Errorf("%s acknowledged but not readable: %v", k, err)
				}
			}
		}(w)
	}
	wg.Wait()
	// Async writes run their callbacks in order, after durability.
	var order []int
	var mu sync.Mutex
	done := make(chan struct{})
	for i := 0; i < 100; i++ {
		i := i
		if err := c.Enqueue([]KV{{K: []byte(fmt.Sprintf("a/%03d", i)), V: []byte("v")}}, func(err error) {
			mu.Lock()
			order = append(order, i)
			if len(order) == 100 {
				close(done)
			}
			mu.Unlock()
		}); err != nil {
			t.Fatal(err)
		}
	}
	<-done
	for i, v := range order {
		if v != i {
			t.Fatalf("callbacks out of order at %d: %d", i, v)
		}
	}
	if err := c.Flush(); err != nil {
		t.Fatal(err)
	}
	c.Close()
	if err := c.Commit([]KV{{K: []byte("late"), V: nil}}); !errors.Is(err, ErrClosed) {
		t.Fatalf("write after Close: %v", err)
	}
}

// A failed transaction is reported to the OnError hook as well as to the
// writers (the node uses it to notice a full disk).
func TestCommitterOnError(t *testing.T) {
	db, err := badger.Open(badger.DefaultOptions("").WithInMemory(true).WithLogger(nil))
	if err != nil {
		t.Fatal(err)
	}
	c := New(db, 4)
	var mu sync.Mutex
	var seen []error
	c.OnError(func(err error) { mu.Lock(); seen = append(seen, err); mu.Unlock() })
	if err := c.Commit([]KV{{K: []byte("ok"), V: []byte("v")}}); err != nil {
		t.Fatal(err)
	}
	if err := c.Commit([]KV{{K: nil, V: []byte("empty key")}}); err == nil {
		t.Fatal("an empty key was committed")
	}
	c.Close()
	db.Close()
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 1 {
		t.Fatalf("hook saw %d errors, want 1: %v", len(seen), seen)
	}
}

// A request may delete keys; within one request its entries apply in
// order (a set then a delete of the same key leaves it deleted), and a
// delete shares the transaction of the sets beside it.
func TestCommitterDeletes(t *testing.T) {
	dir := t.TempDir()
	db, err := badger.Open(badger.DefaultOptions(dir).WithSyncWrites(true).WithLogger(nil))
	if err != nil {
		t.Fatal(err)
	}
	c := New(db, 4)
	if err := c.Commit([]KV{{K: []byte("a"), V: []byte("1")}, {K: []byte("b"), V: []byte("1")}}); err != nil {
		t.Fatal(err)
	}
	if err := c.Commit([]KV{{K: []byte("a"), Del: true}, {K: []byte("c"), V: []byte("1")}, {K: []byte("c"), Del: true}, {K: []byte("d"), V: []byte("2")}}); err != nil {
		t.Fatal(err)
	}
	c.Close()
	db.Close()
	// Restart on the same directory: what was acknowledged is there.
	if db, err = badger.Open(badger.DefaultOptions(dir).WithLogger(nil)); err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	want := map[string]bool{"a": false, "b": true, "c": false, "d": true}
	if err := db.View(func(txn *badger.Txn) error {
		for k, present := range want {
			_, err := txn.Get([]byte(k))
			if got := err == nil; got != present {
				t.Errorf("key %s present %v, want %v (err %v)", k, got, present, err)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// TestFeedEntriesDenseInCommitOrder. Property: every write with a feed
// entry gets one, in its own transaction, under dense seqs that follow
// commit order (a request split off an overflowing transaction included),
// and Advanced is told the last seq only once it is durable.
func TestFeedEntriesDenseInCommitOrder(t *testing.T) {
	db, err := badger.Open(badger.DefaultOptions(t.TempDir()).WithLogger(nil).WithMemTableSize(8 << 20))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	c := New(db, 64)
	var mu sync.Mutex
	var last uint64
	c.SetFeed(Feed{Prefix: []byte("f/"), Next: 1, Advanced: func(l uint64) {
		mu.Lock()
		defer mu.Unlock()
		if l <= last {
			t.Errorf("Advanced went from %d to %d", last, l)
		}
		last = l
	}})
	var wg sync.WaitGroup
	big := make([]byte, 300<<10)
	for w := 0; w < 20; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < 20; i++ {
				k := []byte(fmt.Sprintf("k/%d/%d", w, i))
				v := []byte("v")
				if i%5 == 0 {
					v = big // fills transactions: some requests move to the next
				}
				if _, err := c.CommitEntry([]KV{{K: k, V: v}}, k); err != nil {
					t.Error(err)
				}
			}
		}(w)
	}
	wg.Wait()
	c.Close()
	seen := map[string]bool{}
	var next uint64 = 1
	if err := db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte("f/"), PrefetchValues: true})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			seq := uint64(0)
			for _, b := range it.Item().Key()[2:] {
				seq = seq<<8 | uint64(b)
			}
			if seq != next {
				return fmt.Errorf("entry %d where %d was due", seq, next)
			}
			next++
			v, _ := it.Item().ValueCopy(nil)
			if seen[string(v)] {
				return fmt.Errorf("%s has two entries", v)
			}
			seen[string(v)] = true
			if _, err := txn.Get(v); err != nil {
				return fmt.Errorf("entry for %s without its write: %v", v, err)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(seen) != 400 || last != 400 {
		t.Fatalf("%d entries, Advanced last %d; want 400", len(seen), last)
	}
}
