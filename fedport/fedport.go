// Package fedport holds the values the federation peer and the mirror
// share with the layers above them (the HTTP API, metrics, attention):
// peers, known hosts, counters, mirroring rules and a mirrored room's
// status. The interfaces those layers need are declared where they are
// used (hostapi.Federation, hostapi.Mirror, metrics.Federation,
// metrics.Mirror); this package keeps them free of libp2p, which only
// federation and mirror link.
package fedport

import (
	"encoding/json"
	"sync/atomic"

	"github.com/adpnode/adpnode/adp/identity"
	"github.com/adpnode/adpnode/adp/room"
	"github.com/adpnode/adpnode/index"
)

// PeerInfo describes one connected or configured peer.
type PeerInfo struct {
	PeerID    string           `json:"peer_id"`
	HostKey   identity.AgentID `json:"host_key,omitempty"`
	Addrs     []string         `json:"addrs"`
	Connected bool             `json:"connected"`
	Static    bool             `json:"static"`
	// NotListed says why this peer's rooms are not in the node's
	// directory: its host binding could not be confirmed, and why.
	NotListed string `json:"not_listed,omitempty"`
	// Source is how a connected peer came: static, bootstrap, dht,
	// announcement, mdns, cache (the peer cache), inbound, or other
	// (dialled outside discovery: the mirror, a relay, peer exchange).
	Source string `json:"source,omitempty"`
}

// DiscoveryStatus is the effective state of peer discovery.
type DiscoveryStatus struct {
	// DHT is the mode the DHT runs in now (server, client or off);
	// DHTConfigured the mode asked for (auto, server, client or off).
	DHT           string `json:"dht"`
	DHTConfigured string `json:"dht_configured"`
	// RoutingTable is how many peers the DHT routing table holds.
	RoutingTable int `json:"routing_table"`
	// Bootstrap and Static count the peers the operator named.
	Bootstrap int `json:"bootstrap"`
	Static    int `json:"static"`
	// Connected counts connected peers; BySource splits them by
	// PeerInfo.Source.
	Connected int            `json:"connected"`
	BySource  map[string]int `json:"by_source"`
	// Degraded is set while the operator named peers and none is
	// connected; Reason says so in words.
	Degraded bool   `json:"degraded"`
	Reason   string `json:"reason,omitempty"`
}

// HostInfo is a remote host as this node knows it: the binding learned from
// its signed announcements and the outcome of cross-checking that binding
// against the host's own discovery document.
type HostInfo struct {
	index.Binding
	Rooms     int    `json:"rooms"`
	Verified  bool   `json:"verified"`
	CheckedAt int64  `json:"checked_at,omitempty"`
	CheckErr  string `json:"check_error,omitempty"`
	// NotListed says why the host's rooms are not in the directory.
	NotListed string `json:"not_listed,omitempty"`
}

// GossipStats counts gossip validation outcomes (for metrics and tests),
// and why announcements were refused.
type GossipStats struct {
	Accepted, Rejected, Ignored atomic.Int64
	Published                   atomic.Int64
	// Announcements: issued in the future, claiming a room ID another
	// host holds, over a host's rate, over a host's share of the index.
	Future, Conflicts, RateLimited, OverCap atomic.Int64
	// SyncRefused counts index-sync and reconciliation streams refused
	// (per-peer limit on concurrent streams).
	SyncRefused atomic.Int64
	// What reconciliation and index sync served peers: bytes read and
	// written (frames), announcements answered, and requests refused
	// beyond a peer's pull budget (Limits.Pull).
	PullRead, PullServed, PullIDs, PullRefused atomic.Int64
	// Penalised counts announcements relayed by reconciliation or index
	// sync that gossip would reject (the relaying peer's score drops).
	Penalised atomic.Int64
	// RecordDropped counts records the record publisher skipped because
	// the host's change feed no longer held them (the publisher fell
	// more than the feed keeps behind): mirrors backfill them.
	RecordDropped atomic.Int64
	Discovery     DiscoveryStats
}

// DiscoveryStats counts what discovery did: rounds run, provider records
// read, dials, dials that connected, advertisements that went through.
type DiscoveryStats struct {
	Rounds, Found, Dialled, Connected, Advertised atomic.Int64
	// AdvertiseFailed counts advertisements that did not go through (no
	// DHT server reachable); Announced counts peers dialled at the
	// addresses of their signed announcements; BootstrapFailed counts
	// rounds in which no bootstrap peer could be reached.
	AdvertiseFailed, Announced, BootstrapFailed atomic.Int64
}

// MirrorTarget is one mirroring rule.
type MirrorTarget struct {
	ID      string `json:"id"`
	Kind    string `json:"kind"`
	Value   string `json:"value,omitempty"`
	AddedAt int64  `json:"added_at"`
}

// MirrorStats are the mirror's counters.
type MirrorStats struct {
	Verified, Refused, Backfilled, Evidence atomic.Int64
	// Stalls counts catch-ups that found records past the tip that no
	// peer could serve (see MirrorInfo.Stalled).
	Stalls atomic.Int64
	// ProofsFetched counts requests for host log proofs of ended rooms,
	// ProofsRefused the answers refused (not 200, too large, not a proof,
	// or failing the kernel's check), ProofsStored the proofs stored.
	ProofsFetched, ProofsRefused, ProofsStored atomic.Int64
}

// MirrorInfo describes a mirrored room: whose it is and how far it is
// verified.
type MirrorInfo struct {
	Host         identity.AgentID `json:"host"`
	HostPeer     string           `json:"host_peer"`
	RoomURL      string           `json:"room_url"`
	VerifiedSeq  int64            `json:"verified_seq"`
	VerifiedHash string           `json:"verified_hash,omitempty"`
	// KnownSeq is the highest seq known to exist (announced by the host
	// or seen on its stream); the mirror has caught up when VerifiedSeq
	// reaches it.
	KnownSeq int64 `json:"known_seq"`
	// Checkpoint is the latest host-signed checkpoint the mirror holds for
	// its verified chain (a record.checkpoint assertion, as signed).
	Checkpoint json.RawMessage `json:"checkpoint,omitempty"`
	Faulty     bool            `json:"faulty"`
	FrozenAt   int64           `json:"frozen_at,omitempty"`
	Bytes      int64           `json:"bytes"`
	Pending    int             `json:"pending"`
	// Stalled is set while records are known to exist past the verified
	// tip and no peer could serve them; Error says why.
	Stalled bool   `json:"stalled"`
	Error   string `json:"error,omitempty"`
}

// MirroredResource is the room resource as a mirror serves it.
type MirroredResource struct {
	*room.Resource
	Mirror MirrorInfo `json:"mirror"`
}
