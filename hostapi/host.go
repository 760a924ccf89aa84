package hostapi

import (
	"context"
	"encoding/json"
	"io"

	"github.com/dgraph-io/badger/v4"

	"github.com/adpnode/adpnode/adp/archive"
	"github.com/adpnode/adpnode/adp/identity"
	"github.com/adpnode/adpnode/adp/room"
	"github.com/adpnode/adpnode/directory"
	"github.com/adpnode/adpnode/hostport"
	"github.com/adpnode/adpnode/live"
)

// Host is what the HTTP API needs of the host whose rooms it serves. The
// host (package node) implements it; the composition root
// (stack) hands it to New. Every read takes the authenticated
// viewer ("" for anonymous) and applies the host's read rules; errors are
// *adp.Error.
type Host interface {
	// Origin is the service origin (JWT audience, Room URLs); Host its
	// host[:port]; RoomURL a room's canonical URL (§7.2).
	Origin() string
	Host() string
	RoomURL(roomID string) string
	// NowMs reads the host clock in Unix milliseconds.
	NowMs() int64
	// Policy is the host's published limits; it does not change.
	Policy() hostport.Policy
	// Ready reports whether the host takes traffic; DB is the process's
	// Badger database (the readiness probe reads it; backups copy it).
	Ready() bool
	DB() *badger.DB
	Backup(w io.Writer) error

	// HostsRoom reports whether the host is authoritative for roomID.
	HostsRoom(roomID string) bool
	// Submit runs the write path on one envelope body; pathRoom is "" for
	// POST /v1/rooms.
	Submit(ctx context.Context, body []byte, pathRoom string) (*hostport.Result, error)

	Room(roomID string, viewer identity.AgentID) (*room.Resource, error)
	Events(roomID string, viewer identity.AgentID, after int64, limit int) ([]json.RawMessage, bool, error)
	Members(roomID string, viewer identity.AgentID) ([]hostport.MemberView, error)
	// Summary is a room's directory entry (any visibility: the caller
	// decides what to show); PublicRooms pages the host's own directory.
	Summary(roomID string) (directory.Entry, bool)
	PublicRooms(q directory.Query) ([]directory.Entry, string, error)
	MyRooms(agent identity.AgentID, f hostport.MyRoomsFilter) ([]hostport.MyRoom, string, error)

	// Subscribe opens an agent's live stream of a room (§17), and
	// SubscribeViewer an anonymous viewer's; the Unsubscribe calls end
	// them.
	Subscribe(roomID string, agent identity.AgentID) (*live.Subscription[hostport.StreamMember], error)
	Unsubscribe(s *live.Subscription[hostport.StreamMember])
	SubscribeViewer(roomID string) (*live.Subscription[struct{}], error)
	UnsubscribeViewer(s *live.Subscription[struct{}])

	CreateJoinRequest(roomID string, applicant identity.AgentID, body []byte) (*hostport.JoinRequest, error)
	JoinRequest(roomID, id string, viewer identity.AgentID) (*hostport.JoinRequest, error)
	JoinRequests(roomID string, viewer identity.AgentID, status string) ([]*hostport.JoinRequest, error)

	AgentStatuses(roomID string, viewer identity.AgentID) ([]*hostport.AgentStatus, error)
	AgentStatusOf(roomID string, viewer, agent identity.AgentID) (*hostport.AgentStatus, error)
	SetAgentStatus(roomID string, agent identity.AgentID, body []byte) (*hostport.AgentStatus, error)

	// PutProfile stores an agent's signed profile.update (POST
	// /v1/profiles); Profile reads the stored one (not_found if none).
	PutProfile(body []byte) (*hostport.Profile, error)
	Profile(id identity.AgentID) (*hostport.Profile, error)

	// Archive builds a room's archive (§19); the Write calls render it.
	Archive(roomID string, viewer identity.AgentID) (*archive.Archive, error)
	WriteArchiveJSONL(w io.Writer, roomID string, viewer identity.AgentID) error
	WriteArchiveMarkdown(w io.Writer, roomID string, viewer identity.AgentID) error
}
