package node

import (
	"encoding/binary"
	"errors"
	"log/slog"
	"sync"

	"github.com/dgraph-io/badger/v4"
)

// Key spaces of the node's Badger database (ARCHITECTURE.md, Storage).
const (
	pfxRecord   = "r/" // r/<room>/<seq:8 BE>      -> record JSON
	pfxEnvelope = "e/" // e/<envelope hash 32>      -> <room>/<seq:8 BE>
	pfxNonce    = "n/" // n/<agent id>              -> nonce:8 | accepted_at:8
	pfxJoinReq  = "j/" // j/<room>/<request id>     -> join request JSON
	pfxArchive  = "x/" // x/<room>                  -> archive generated_at:8
	pfxPack     = "p/" // p/<digest>                -> external pack bytes
)

func recordKey(roomID string, seq int64) []byte {
	k := make([]byte, 0, len(pfxRecord)+len(roomID)+9)
	k = append(k, pfxRecord...)
	k = append(k, roomID...)
	k = append(k, '/')
	return binary.BigEndian.AppendUint64(k, uint64(seq))
}

func envelopeKey(digest [32]byte) []byte {
	return append([]byte(pfxEnvelope), digest[:]...)
}

func envelopeValue(roomID string, seq int64) []byte {
	v := append([]byte(roomID), '/')
	return binary.BigEndian.AppendUint64(v, uint64(seq))
}

func parseEnvelopeValue(v []byte) (string, int64, bool) {
	if len(v) < 10 || v[len(v)-9] != '/' {
		return "", 0, false
	}
	return string(v[:len(v)-9]), int64(binary.BigEndian.Uint64(v[len(v)-8:])), true
}

type kv struct{ k, v []byte }

// commitReq is one durable write waiting for the group committer.
type commitReq struct {
	sets []kv
	done chan error
}

// committer batches writes from many rooms into one synced Badger
// transaction (group commit): each waiter is answered only after the batch
// holding its write is durable.
type committer struct {
	db   *badger.DB
	in   chan *commitReq
	wg   sync.WaitGroup
	log  *slog.Logger
	once sync.Once
	quit chan struct{}
}

func newCommitter(db *badger.DB, log *slog.Logger) *committer {
	c := &committer{db: db, in: make(chan *commitReq, 4096), log: log, quit: make(chan struct{})}
	c.wg.Add(1)
	go c.loop()
	return c
}

var errClosed = errors.New("node is shutting down")

// commit stores sets durably and returns when they are on disk.
func (c *committer) commit(sets []kv) error {
	r := &commitReq{sets: sets, done: make(chan error, 1)}
	select {
	case c.in <- r:
	case <-c.quit:
		return errClosed
	}
	return <-r.done
}

const maxBatch = 1024

func (c *committer) loop() {
	defer c.wg.Done()
	batch := make([]*commitReq, 0, maxBatch)
	for {
		var first *commitReq
		select {
		case first = <-c.in:
		case <-c.quit:
			// Drain what was queued before the close, then stop.
			for {
				select {
				case r := <-c.in:
					c.flush([]*commitReq{r})
				default:
					return
				}
			}
		}
		batch = append(batch[:0], first)
	fill:
		for len(batch) < maxBatch {
			select {
			case r := <-c.in:
				batch = append(batch, r)
			default:
				break fill
			}
		}
		c.flush(batch)
	}
}

// flush writes a batch in as few transactions as Badger allows and answers
// every waiter with the outcome of the transaction that held its write.
func (c *committer) flush(batch []*commitReq) {
	for len(batch) > 0 {
		n, err := c.writeSome(batch)
		for _, r := range batch[:n] {
			r.done <- err
		}
		batch = batch[n:]
	}
}

// writeSome commits a prefix of batch in one transaction and returns its
// length. A request is never split across transactions.
func (c *committer) writeSome(batch []*commitReq) (int, error) {
	txn := c.db.NewTransaction(true)
	defer txn.Discard()
	n := 0
	for _, r := range batch {
		var err error
		for _, e := range r.sets {
			if err = txn.Set(e.k, e.v); err != nil {
				break
			}
		}
		if errors.Is(err, badger.ErrTxnTooBig) && n > 0 {
			// Commit what fits; this request goes in the next transaction.
			break
		}
		if err != nil {
			return max(n, 1), err
		}
		n++
	}
	// The request that overflowed may have left partial sets in txn; rebuild
	// the transaction from the requests that fit.
	if n < len(batch) {
		txn.Discard()
		txn = c.db.NewTransaction(true)
		for _, r := range batch[:n] {
			for _, e := range r.sets {
				if err := txn.Set(e.k, e.v); err != nil {
					return n, err
				}
			}
		}
	}
	return n, txn.Commit()
}

func (c *committer) close() {
	c.once.Do(func() { close(c.quit) })
	c.wg.Wait()
}
