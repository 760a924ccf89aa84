package node_test

import (
	"errors"
	"log/slog"
	"testing"

	"github.com/dgraph-io/badger/v4"

	"github.com/adpnode/adpnode/node"
)

// A data dir written before the host log's witnesses holds checkpoint.cosign
// assertions under w/: a restart drops them, and leaves other keys alone.
func TestRetiredCosignaturesDropped(t *testing.T) {
	dir := t.TempDir()
	open := func() *node.Node {
		n, err := node.Open(node.Config{DataDir: dir, PublicURL: "http://127.0.0.1:1", Log: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	n := open()
	if err := n.DB().Update(func(txn *badger.Txn) error {
		if err := txn.Set([]byte("w/d8ftedhpqhsusbg001tg/did:agent:x"), []byte("{}")); err != nil {
			return err
		}
		return txn.Set([]byte("wx"), []byte("kept"))
	}); err != nil {
		t.Fatal(err)
	}
	n.Close()
	n = open()
	defer n.Close()
	n.DB().View(func(txn *badger.Txn) error {
		if _, err := txn.Get([]byte("w/d8ftedhpqhsusbg001tg/did:agent:x")); !errors.Is(err, badger.ErrKeyNotFound) {
			t.Errorf("retired cosignature still there: %v", err)
		}
		if _, err := txn.Get([]byte("wx")); err != nil {
			t.Errorf("a key outside w/ was dropped: %v", err)
		}
		return nil
	})
}
