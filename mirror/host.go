package mirror

import (
	"github.com/dgraph-io/badger/v4"

	"github.com/adpnode/adpnode/adp/assertion"
	"github.com/adpnode/adpnode/adp/identity"
	"github.com/adpnode/adpnode/adp/types"
)

// Host is what a mirror needs of the host in its process: the clock, the
// database it keeps its own key space in, the host's external packs (to
// replay rooms that import them), whether the disk is below its reserve,
// and the host side of witnessing — keeping cosignatures other mirrors
// send of the host's own rooms.
type Host interface {
	NowMs() int64
	// Host is the node's public host[:port]; the mirror's witness is named after it.
	Host() string
	DB() *badger.DB
	ExternalPacks() types.PackSource
	DiskFull() bool
	// KeepCosign stores a verified cosignature of one of the host's own
	// rooms if its checkpoint names a record the host holds.
	KeepCosign(c *assertion.Cosignature) error
	// AcceptCosignatures makes the host's archive manifests carry hostKey
	// and the cosignatures kept.
	AcceptCosignatures(hostKey identity.AgentID)
}
