package node

import "github.com/adpnode/adpnode/internal/groupcommit"

// CommitWith queues ops, keys of another package in the node's database
// (attention's inbox items, say), into the node's group commit: they share
// the transaction, and the fsync, of the records written beside them.
// done runs on the committer goroutine once they are durable (or failed)
// and must not block. After Close it returns groupcommit.ErrClosed.
func (n *Node) CommitWith(ops []groupcommit.KV, done func(error)) error {
	return n.commit.Enqueue(ops, done)
}
