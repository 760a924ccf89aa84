package mirror

import (
	"github.com/dgraph-io/badger/v4"

	"github.com/adpnode/adpnode/adp/types"
)

// Host is what a mirror needs of the host in its process: the clock, the
// database it keeps its own key space in, the host's external packs (to
// replay rooms that import them), whether the disk is below its reserve,
// and its origin (where its witness is announced).
type Host interface {
	NowMs() int64
	// Host is the node's public host[:port]; the mirror's witness is named after it.
	Host() string
	DB() *badger.DB
	ExternalPacks() types.PackSource
	DiskFull() bool
	// Origin is the node's public origin (scheme://host[:port]); the
	// mirror's witness is announced at Origin + WitnessPath.
	Origin() string
}
