package mirror

import (
	"github.com/adpnode/adpnode/adp/assertion"
	"github.com/adpnode/adpnode/adp/evidence"
)

// Evidence is built, stored and gossiped here; its type and offline
// verification are the kernel's (adp/evidence).
type Evidence = evidence.Evidence

// Evidence kinds and type (see adp/evidence).
const (
	KindEquivocation  = evidence.KindEquivocation
	KindInvalidRecord = evidence.KindInvalidRecord
	EvidenceType      = evidence.Type
)

// Checkpoint is a host's signed commitment to a record.
type Checkpoint = assertion.Checkpoint
