package hostlog

import "github.com/dgraph-io/badger/v4"

// SetChunkForTest sets the leaves per journal transaction and tessera
// round, for logs opened after it; the returned func restores it.
func SetChunkForTest(n int) func() {
	old := chunk
	chunk = n
	return func() { chunk = old }
}

// PutLeavesForTest writes journal parts and runs for leaves first,
// first+1, … in txn, as a chunk's journal transaction does (without the
// watermarks and the length).
func PutLeavesForTest(txn *badger.Txn, first uint64, leaves []Leaf) error {
	return putLeaves(txn, first, leaves)
}

// CrashForTest stops the writer as a killed process would after its
// last journalled round: what it gathered since is not journalled, and
// the feed is not drained.
func (l *Log) CrashForTest() error {
	l.noDrain.Store(true)
	return l.Close()
}
