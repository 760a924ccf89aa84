// Package groupcommit batches Badger writes from many goroutines into few
// synced transactions: each write is answered only once the transaction
// holding it is durable, and one fsync serves a whole batch.
package groupcommit

import (
	"encoding/binary"
	"errors"
	"sync"

	"github.com/dgraph-io/badger/v4"
)

// KV is one key/value to set, or with Del one key to delete (V unused).
type KV struct {
	K, V []byte
	Del  bool
}

type request struct {
	sets  []KV
	entry []byte // the value of a feed entry (nil: none)
	seq   uint64 // the feed seq entry got (set by the committer)
	done  func(seq uint64, err error)
}

// Feed numbers the requests that carry a feed entry (EnqueueEntry): each
// gets the key Prefix + <seq:8 BE> in the transaction that holds its
// sets, seqs are dense and follow commit order (the committer assigns
// them as it builds a transaction, and a failed transaction uses none).
type Feed struct {
	Prefix []byte
	// Next is the seq the next entry gets.
	Next uint64
	// Advanced runs on the committer goroutine after a transaction that
	// wrote entries is durable, with the last seq it wrote. It must not
	// block.
	Advanced func(last uint64)
}

// Committer owns one goroutine that writes batches. Close stops it after
// writing what was queued.
type Committer struct {
	db   *badger.DB
	in   chan request
	quit chan struct{}
	once sync.Once
	wg   sync.WaitGroup
	mu   sync.RWMutex // guards sends against Close
	shut bool
	// onErr is told about every failed batch write (set before use).
	onErr func(error)
	feed  Feed // SetFeed; Next is owned by the committer goroutine
}

// ErrClosed is returned for writes offered after Close.
var ErrClosed = errors.New("groupcommit: closed")

// MaxBatch bounds how many requests share one transaction.
const MaxBatch = 1024

// New starts a committer on db.
func New(db *badger.DB, queue int) *Committer {
	c := &Committer{db: db, in: make(chan request, queue), quit: make(chan struct{})}
	c.wg.Add(1)
	go c.loop()
	return c
}

// Commit writes sets (and deletes) durably and returns when they are on
// disk.
func (c *Committer) Commit(sets []KV) error {
	done := make(chan error, 1)
	if err := c.Enqueue(sets, func(err error) { done <- err }); err != nil {
		return err
	}
	return <-done
}

// Enqueue queues sets; done runs on the committer goroutine once they are
// durable (or failed). It must not block.
func (c *Committer) Enqueue(sets []KV, done func(error)) error {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.shut {
		return ErrClosed
	}
	var d func(uint64, error)
	if done != nil {
		d = func(_ uint64, err error) { done(err) }
	}
	c.in <- request{sets: sets, done: d}
	return nil
}

// SetFeed turns on feed entries (EnqueueEntry). Call it before the first
// write.
func (c *Committer) SetFeed(f Feed) { c.feed = f }

// CommitEntry is Commit with a feed entry whose value is entry (SetFeed);
// it returns the entry's feed seq.
func (c *Committer) CommitEntry(sets []KV, entry []byte) (uint64, error) {
	type result struct {
		seq uint64
		err error
	}
	done := make(chan result, 1)
	if err := c.EnqueueEntry(sets, entry, func(seq uint64, err error) { done <- result{seq, err} }); err != nil {
		return 0, err
	}
	r := <-done
	return r.seq, r.err
}

// EnqueueEntry is Enqueue with a feed entry whose value is entry: it is
// written in the same transaction as sets, under the next feed seq, which
// done is given (with a nil error) once it is durable.
func (c *Committer) EnqueueEntry(sets []KV, entry []byte, done func(seq uint64, err error)) error {
	if c.feed.Prefix == nil {
		return errors.New("groupcommit: no feed (SetFeed)")
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.shut {
		return ErrClosed
	}
	c.in <- request{sets: sets, entry: entry, done: done}
	return nil
}

// OnError registers fn to be called, on the committer goroutine, with the
// error of every failed transaction (the node notes lack of space). Call it
// before the first Commit.
func (c *Committer) OnError(fn func(error)) { c.onErr = fn }

// Flush waits until everything queued before it is durable.
func (c *Committer) Flush() error { return c.Commit(nil) }

// Close writes what is queued and stops the goroutine.
func (c *Committer) Close() {
	c.once.Do(func() {
		c.mu.Lock()
		c.shut = true
		c.mu.Unlock()
		close(c.quit)
		c.wg.Wait()
	})
}

func (c *Committer) loop() {
	defer c.wg.Done()
	batch := make([]request, 0, MaxBatch)
	for {
		var first request
		select {
		case first = <-c.in:
		case <-c.quit:
			for {
				select {
				case r := <-c.in:
					c.flush([]request{r})
				default:
					return
				}
			}
		}
		batch = append(batch[:0], first)
	fill:
		for len(batch) < MaxBatch {
			select {
			case r := <-c.in:
				batch = append(batch, r)
			default:
				break fill
			}
		}
		c.flush(batch)
		// Drop the written requests: the reused array would otherwise
		// keep up to MaxBatch requests' keys, values and callbacks alive
		// after a burst.
		clear(batch)
	}
}

// flush writes a batch in as few transactions as Badger allows; a request
// is never split across transactions.
func (c *Committer) flush(batch []request) {
	for len(batch) > 0 {
		n, err := c.writeSome(batch)
		if err != nil && c.onErr != nil {
			c.onErr(err)
		}
		for _, r := range batch[:n] {
			if r.done != nil {
				r.done(r.seq, err)
			}
		}
		batch = batch[n:]
	}
}

func (c *Committer) writeSome(batch []request) (int, error) {
	txn := c.db.NewTransaction(true)
	defer txn.Discard()
	n := 0
	seq := c.feed.Next
	for i := range batch {
		err := c.applyRequest(txn, &batch[i], &seq)
		if errors.Is(err, badger.ErrTxnTooBig) && n > 0 {
			break
		}
		if err != nil {
			return max(n, 1), err
		}
		n++
	}
	if n < len(batch) {
		// The overflowing request may have left partial sets: rebuild.
		txn.Discard()
		txn = c.db.NewTransaction(true)
		seq = c.feed.Next
		for i := range batch[:n] {
			if err := c.applyRequest(txn, &batch[i], &seq); err != nil {
				return n, err
			}
		}
	}
	if err := txn.Commit(); err != nil {
		return n, err
	}
	if seq != c.feed.Next {
		c.feed.Next = seq
		if c.feed.Advanced != nil {
			c.feed.Advanced(seq - 1)
		}
	}
	return n, nil
}

// applyRequest adds r's sets, and its feed entry under *seq (then
// advanced), to txn.
func (c *Committer) applyRequest(txn *badger.Txn, r *request, seq *uint64) error {
	for _, e := range r.sets {
		if err := apply(txn, e); err != nil {
			return err
		}
	}
	if r.entry == nil {
		return nil
	}
	k := binary.BigEndian.AppendUint64(append(make([]byte, 0, len(c.feed.Prefix)+8), c.feed.Prefix...), *seq)
	if err := txn.Set(k, r.entry); err != nil {
		return err
	}
	r.seq = *seq
	*seq++
	return nil
}

func apply(txn *badger.Txn, e KV) error {
	if e.Del {
		return txn.Delete(e.K)
	}
	return txn.Set(e.K, e.V)
}
