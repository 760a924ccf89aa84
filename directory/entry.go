package directory

import (
	"github.com/adpnode/adpnode/adp"
	"github.com/adpnode/adpnode/adp/identity"
	"github.com/adpnode/adpnode/adp/room"
)

// Entry is one room of the public directory and of /v1/me/rooms; it is
// also the room part of a signed index announcement, so its JSON is part of
// the federation's wire format.
type Entry struct {
	ID         string           `json:"id"`
	URL        string           `json:"url"`
	Host       string           `json:"host"`
	Status     room.Status      `json:"status"`
	Topic      string           `json:"topic"`
	Agenda     string           `json:"agenda,omitempty"`
	Visibility string           `json:"visibility"`
	Creator    identity.AgentID `json:"creator"`
	StartTime  int64            `json:"start_time"`
	EndTime    int64            `json:"end_time"`
	Tags       []string         `json:"tags,omitempty"`
	Language   string           `json:"language,omitempty"`
	Seq        int64            `json:"seq"`
	Head       room.Head        `json:"head"`
	Members    int              `json:"members"`
	LastActive int64            `json:"last_active"`
	// Verified is set in the federated directory: whether the binding of
	// the room's host (origin, host key, peer ID) is verified.
	Verified *bool `json:"verified,omitempty"`
	// For /v1/me/rooms.
	Role       adp.Role `json:"role,omitempty"`
	Membership string   `json:"membership,omitempty"`
}

// Listed reports whether the entry may appear in the public directory:
// public and restricted rooms are listed, private rooms never.
func (e *Entry) Listed() bool { return e.Visibility != room.Private }
