package hostapi

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"time"

	"github.com/adpnode/adpnode/adp/archive"
	"github.com/adpnode/adpnode/adp/identity"
	"github.com/adpnode/adpnode/adp/tlogproof"
	"github.com/adpnode/adpnode/directory"
	"github.com/adpnode/adpnode/fedport"
	"github.com/adpnode/adpnode/hostport"
	"github.com/adpnode/adpnode/httpwire"
	"github.com/adpnode/adpnode/index"
	"github.com/adpnode/adpnode/live"
)

// The layers beside the host, as the HTTP API sees them. Each is an
// interface of what the handlers call; the composition root
// (stack) hands in the federation peer, the mirror, the host log
// and its witness submitter, so this package links none of them (nor
// libp2p).

// Federation is what the HTTP API needs from the federation peer.
type Federation interface {
	// Directory returns local and remote directory entries.
	Directory() []directory.Entry
	// Relay forwards a write for a remote room; ok is false when the room
	// is unknown.
	Relay(ctx context.Context, roomID string, body []byte) (httpwire.Answer, bool)
	// Locate returns the directory entry of a room another host holds,
	// when a host with a verified binding announces it.
	Locate(roomID string) (directory.Entry, bool)
	// Binding is this node's host key, peer ID and addresses.
	Binding() index.Binding
	Addrs() []string
	Peers() []fedport.PeerInfo
	// KnownHosts lists the remote hosts learned from announcements.
	KnownHosts() []fedport.HostInfo
	// Conflicts returns the signed announcements refused for claiming a
	// room ID another host holds.
	Conflicts() []json.RawMessage
}

// Mirror is what the HTTP API needs from the mirror: its rooms, its
// rules and its evidence, served under /v1/mirrors.
type Mirror interface {
	// Room finds a mirrored room (host "" when the room ID is unambiguous).
	Room(roomID string, host identity.AgentID) (MirroredRoom, bool)
	Rooms() []MirroredRoom
	Targets() []fedport.MirrorTarget
	// AddTarget adds a mirroring rule; errors are *adp.Error.
	AddTarget(kind, value string) (fedport.MirrorTarget, error)
	RemoveTarget(id string, purge bool) error
	Stats() *fedport.MirrorStats
	EvidenceList() []json.RawMessage
	// Witness is the mirror's tlog-witness for the logs of the hosts it
	// mirrors; nil when it runs none.
	Witness() TlogWitness
}

// MirroredRoom is one room a mirror holds, read-only.
type MirroredRoom interface {
	ID() string
	Info() fedport.MirrorInfo
	Resource(now int64) *fedport.MirroredResource
	Events(after int64, limit int) ([]json.RawMessage, bool, error)
	Subscribe() *live.Subscription[struct{}]
	Archive(now int64) (*archive.Archive, error)
	WriteJSONL(w io.Writer, now int64) error
	WriteMarkdown(w io.Writer, now int64) error
}

// TlogWitness is a C2SP tlog-witness: its add-checkpoint endpoint, and
// the name and key of its cosignatures.
type TlogWitness interface {
	http.Handler
	Name() string
	VerifierKey() string
}

// HostLog is what the HTTP API needs from the host log: its tiles,
// checkpoint and proofs.
type HostLog interface {
	Origin() string
	VerifierKey() string
	// Read serves one file of the tlog-tiles layout.
	Read(ctx context.Context, path string) (hostport.LogResource, error)
	Checkpoint(ctx context.Context) ([]byte, tlogproof.Checkpoint, error)
	// CheckpointTime is when the latest checkpoint was published.
	CheckpointTime() (time.Time, error)
	Inclusion(ctx context.Context, recordHash [32]byte, size uint64) (tlogproof.RecordProof, error)
	ProofFile(ctx context.Context, recordHash [32]byte) (tlogproof.File, error)
	Consistency(ctx context.Context, size1, size2 uint64) (tlogproof.ConsistencyProof, error)
}

// Cosigned is the host's submitter of log checkpoints to witnesses
// (--witness): the cosignature lines it holds for a checkpoint, and the
// witnesses' keys.
type Cosigned interface {
	CosignedFor(raw []byte) []byte
	VerifierKeys() []string
}
