package node

import (
	"encoding/binary"
	"sync"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/adpnode/adpnode/adp/identity"
)

// nonceCache keeps, per actor, the highest accepted nonce and when it was
// accepted (Identity §8). An entry is valid for the time window after the
// actor's latest acceptance; it is persisted with every record so that a
// restart inside the window still enforces it.
type nonceCache struct {
	window int64 // ms
	mu     sync.Mutex
	m      map[identity.AgentID]nonceEntry
}

type nonceEntry struct{ nonce, at int64 }

func newNonceCache(window time.Duration) *nonceCache {
	return &nonceCache{window: window.Milliseconds(), m: map[identity.AgentID]nonceEntry{}}
}

// max returns the effective maximum nonce for actor at now (0 if none).
func (c *nonceCache) max(actor identity.AgentID, now int64) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[actor]
	if !ok || now-e.at > c.window {
		return 0
	}
	return e.nonce
}

func (c *nonceCache) accept(actor identity.AgentID, nonce, now int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.m[actor]; ok && e.nonce > nonce && now-e.at <= c.window {
		nonce = e.nonce
	}
	c.m[actor] = nonceEntry{nonce: nonce, at: now}
}

// sweep drops expired entries.
func (c *nonceCache) sweep(now int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for a, e := range c.m {
		if now-e.at > c.window {
			delete(c.m, a)
		}
	}
}

func nonceKey(actor identity.AgentID) []byte { return append([]byte(pfxNonce), actor...) }

func nonceValue(nonce, at int64) []byte {
	v := binary.BigEndian.AppendUint64(nil, uint64(nonce))
	return binary.BigEndian.AppendUint64(v, uint64(at))
}

func (c *nonceCache) load(db *badger.DB, now int64) error {
	return db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{PrefetchValues: true, Prefix: []byte(pfxNonce)})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			actor := identity.AgentID(it.Item().Key()[len(pfxNonce):])
			err := it.Item().Value(func(v []byte) error {
				if len(v) == 16 {
					e := nonceEntry{int64(binary.BigEndian.Uint64(v)), int64(binary.BigEndian.Uint64(v[8:]))}
					if now-e.at <= c.window {
						c.m[actor] = e
					}
				}
				return nil
			})
			if err != nil {
				return err
			}
		}
		return nil
	})
}

// observe raises actor's entry to a nonce seen in a replayed record, so the
// cache is never behind the chain.
func (c *nonceCache) observe(actor identity.AgentID, nonce, at int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.m[actor]
	c.m[actor] = nonceEntry{nonce: max(e.nonce, nonce), at: max(e.at, at)}
}
