package node

import (
	"github.com/adpnode/adpnode/internal/reclaim"
	"github.com/adpnode/adpnode/internal/storelayout"
)

// dropRetired deletes the host's checkpoint.cosign assertions that data
// dirs written before the host log's witnesses still hold (w/): nothing
// reads them any more.
func (n *Node) dropRetired() {
	if dropped, err := reclaim.DropRetired(n.db, []byte(storelayout.HostCosignature)); err != nil {
		n.log.Warn("drop retired cosignatures", "err", err)
	} else if dropped {
		n.log.Info("dropped retired checkpoint.cosign assertions (w/)")
	}
}
