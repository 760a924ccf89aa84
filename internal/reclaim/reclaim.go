// Package reclaim gives Badger space back to the file system: value-log GC
// and dropping key prefixes for good (the node's periodic GC, mirror purge).
package reclaim

import (
	"context"
	"errors"
	"log/slog"

	"github.com/dgraph-io/badger/v4"
)

// ValueLogGC runs db.RunValueLogGC(0.5) until it has nothing to rewrite
// or ctx ends, and returns how many files it rewrote.
func ValueLogGC(ctx context.Context, db *badger.DB, log *slog.Logger) int {
	rewrote := 0
	for ctx.Err() == nil {
		err := db.RunValueLogGC(0.5)
		if err != nil {
			if !errors.Is(err, badger.ErrNoRewrite) && !errors.Is(err, badger.ErrRejected) && log != nil {
				log.Warn("value log GC", "err", err)
			}
			break
		}
		rewrote++
	}
	return rewrote
}

// DropPrefixes deletes every key under prefixes and gives the space
// back to the file system: DropPrefix rewrites the tables holding those
// keys, Flatten compacts what is left into one level (so no stale table
// keeps the bytes), and value-log GC rewrites value-log files that are
// now mostly garbage. Used by mirror purge.
func DropPrefixes(db *badger.DB, log *slog.Logger, prefixes ...[]byte) error {
	if err := db.DropPrefix(prefixes...); err != nil {
		return err
	}
	if db.Opts().InMemory {
		return nil
	}
	if err := db.Flatten(2); err != nil {
		return err
	}
	ValueLogGC(context.Background(), db, log)
	return nil
}

// DropRetired deletes the keys under prefix, a key space no code writes
// any more, if any are there (checked first: DropPrefix blocks writes).
// It reports whether it dropped anything.
func DropRetired(db *badger.DB, prefix []byte) (bool, error) {
	found := false
	err := db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix})
		defer it.Close()
		it.Rewind()
		found = it.Valid()
		return nil
	})
	if err != nil || !found {
		return false, err
	}
	return true, db.DropPrefix(prefix)
}
