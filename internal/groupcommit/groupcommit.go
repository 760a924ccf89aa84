// Package groupcommit batches Badger writes from many goroutines into few
// synced transactions: each write is answered only once the transaction
// holding it is durable, and one fsync serves a whole batch.
package groupcommit

import (
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
	sets []KV
	done func(error)
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
	c.in <- request{sets, done}
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
				r.done(err)
			}
		}
		batch = batch[n:]
	}
}

func (c *Committer) writeSome(batch []request) (int, error) {
	txn := c.db.NewTransaction(true)
	defer txn.Discard()
	n := 0
	for _, r := range batch {
		var err error
		for _, e := range r.sets {
			if err = apply(txn, e); err != nil {
				break
			}
		}
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
		for _, r := range batch[:n] {
			for _, e := range r.sets {
				if err := apply(txn, e); err != nil {
					return n, err
				}
			}
		}
	}
	return n, txn.Commit()
}

func apply(txn *badger.Txn, e KV) error {
	if e.Del {
		return txn.Delete(e.K)
	}
	return txn.Set(e.K, e.V)
}
