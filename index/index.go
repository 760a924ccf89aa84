// Package index is the federated public-room index: signed announcements
// of other hosts' public and restricted rooms (never private ones), learned
// over gossip, kept in Badger across restarts, expiring unless refreshed,
// with tombstones for ended and cancelled rooms. The local host's own rooms
// come from the node directly; the index holds only remote entries.
package index

import (
	"encoding/json"
	"fmt"
	"net/url"
	"sort"
	"strings"
	"sync"

	"github.com/dgraph-io/badger/v4"

	"github.com/adpnode/adpnode/adp"
	"github.com/adpnode/adpnode/adp/identity"
	"github.com/adpnode/adpnode/adp/record"
	"github.com/adpnode/adpnode/adp/room"
	"github.com/adpnode/adpnode/assertion"
	"github.com/adpnode/adpnode/node"
)

// Binding ties a host key to its libp2p peer ID and HTTP origin.
type Binding struct {
	Key    identity.AgentID `json:"key"`
	PeerID string           `json:"peer_id"`
	Origin string           `json:"origin"`
	Addrs  []string         `json:"addrs,omitempty"`
}

// Announcement is the payload of an index.announce assertion.
type Announcement struct {
	Room      node.RoomSummary `json:"room"`
	Host      Binding          `json:"host"`
	ExpiresAt int64            `json:"expires_at"`
}

// Entry is a verified announcement.
type Entry struct {
	Announcement
	IssuedAt int64
	Nonce    int64
	Raw      []byte // the signed envelope, as gossiped
}

// MaxAnnouncementBytes bounds one announcement.
const MaxAnnouncementBytes = 16 << 10

// Parse verifies a signed announcement. Checks: size, strict envelope,
// signature by its actor, type, actor = host.key, a well-formed room ID,
// Room URL = origin + /v1/rooms/{id}, visibility public or restricted,
// expiry after issue. Does not check: who relayed it, freshness against
// what is stored, or that origin really belongs to the key (see the
// binding cross-check).
func Parse(raw []byte) (*Entry, error) {
	if len(raw) > MaxAnnouncementBytes {
		return nil, adp.Reason(adp.CodePayloadTooLarge, "oversize", fmt.Sprintf("announcement of %d bytes exceeds %d", len(raw), MaxAnnouncementBytes))
	}
	env, err := assertion.Open(raw, assertion.TypeAnnounce)
	if err != nil {
		return nil, err
	}
	var a Announcement
	if err := json.Unmarshal(env.Event.Payload, &a); err != nil {
		return nil, adp.Reason(adp.CodeInvalidEvent, "payload", "announcement payload: "+err.Error())
	}
	bad := func(reason, msg string) error { return adp.Reason(adp.CodeInvalidEvent, reason, msg) }
	switch {
	case a.Host.Key != env.Event.Actor:
		return nil, bad("wrong_key", "announcement signed by a key other than its host's")
	case !record.ValidRoomID(a.Room.ID):
		return nil, bad("room_id", "not a room ID")
	case a.Room.Visibility == room.Private:
		return nil, bad("private", "private rooms are never announced")
	case a.Room.Visibility != room.Public && a.Room.Visibility != room.Restricted:
		return nil, bad("visibility", "unknown visibility")
	case a.ExpiresAt <= env.Event.CreatedAt:
		return nil, bad("expiry", "expires before it was issued")
	}
	u, err := url.Parse(a.Host.Origin)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Path != "" {
		return nil, bad("origin", "host.origin is not an origin")
	}
	if a.Room.URL != a.Host.Origin+"/v1/rooms/"+a.Room.ID || a.Room.Host != u.Host {
		return nil, bad("room_url", "room URL does not belong to the announcing host's origin")
	}
	return &Entry{Announcement: a, IssuedAt: env.Event.CreatedAt, Nonce: env.Event.Nonce, Raw: raw}, nil
}

// newer reports whether e supersedes old.
func (e *Entry) newer(old *Entry) bool {
	return e.Nonce > old.Nonce
}

// Index holds remote entries, keyed by host key and room ID.
type Index struct {
	db   *badger.DB
	self identity.AgentID
	mu   sync.RWMutex
	m    map[string]*Entry // hostKey/roomID
}

const pfxIndex = "i/"

// Open loads stored entries that have not expired at now. self is this
// node's host key; its own rooms are never stored.
func Open(db *badger.DB, self identity.AgentID, now int64) (*Index, error) {
	x := &Index{db: db, self: self, m: map[string]*Entry{}}
	var expired [][]byte
	err := db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{PrefetchValues: true, Prefix: []byte(pfxIndex)})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			raw, err := it.Item().ValueCopy(nil)
			if err != nil {
				return err
			}
			e, err := Parse(raw)
			if err != nil || e.ExpiresAt <= now {
				expired = append(expired, it.Item().KeyCopy(nil))
				continue
			}
			x.m[key(e)] = e
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(expired) > 0 {
		err = db.Update(func(txn *badger.Txn) error {
			for _, k := range expired {
				if err := txn.Delete(k); err != nil {
					return err
				}
			}
			return nil
		})
	}
	return x, err
}

func key(e *Entry) string { return string(e.Host.Key) + "/" + e.Room.ID }

// Put stores e if it is newer than what the index has for that host and
// room, and reports whether it did. Entries by this node's own key and
// expired entries are ignored.
func (x *Index) Put(e *Entry, now int64) (bool, error) {
	if e.Host.Key == x.self || e.ExpiresAt <= now {
		return false, nil
	}
	k := key(e)
	x.mu.Lock()
	defer x.mu.Unlock()
	if old, ok := x.m[k]; ok && !e.newer(old) {
		return false, nil
	}
	if err := x.db.Update(func(txn *badger.Txn) error { return txn.Set([]byte(pfxIndex+k), e.Raw) }); err != nil {
		return false, err
	}
	x.m[k] = e
	return true, nil
}

// Fresh reports whether an entry with this nonce would be newer than the
// stored one (a cheap duplicate check for gossip validators).
func (x *Index) Fresh(hostKey identity.AgentID, roomID string, nonce int64) bool {
	x.mu.RLock()
	defer x.mu.RUnlock()
	old, ok := x.m[string(hostKey)+"/"+roomID]
	return !ok || nonce > old.Nonce
}

// Summaries returns every unexpired remote room.
func (x *Index) Summaries(now int64) []node.RoomSummary {
	x.mu.RLock()
	defer x.mu.RUnlock()
	out := make([]node.RoomSummary, 0, len(x.m))
	for _, e := range x.m {
		if e.ExpiresAt > now {
			out = append(out, e.Room)
		}
	}
	return out
}

// Room returns the newest unexpired entry for a room ID.
func (x *Index) Room(roomID string, now int64) (*Entry, bool) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	var best *Entry
	for k, e := range x.m {
		if strings.HasSuffix(k, "/"+roomID) && e.ExpiresAt > now && (best == nil || e.IssuedAt > best.IssuedAt) {
			best = e
		}
	}
	return best, best != nil
}

// Hosts returns the bindings learned from unexpired announcements.
func (x *Index) Hosts(now int64) []Binding {
	x.mu.RLock()
	defer x.mu.RUnlock()
	seen := map[identity.AgentID]Binding{}
	for _, e := range x.m {
		if e.ExpiresAt > now {
			seen[e.Host.Key] = e.Host
		}
	}
	out := make([]Binding, 0, len(seen))
	for _, b := range seen {
		out = append(out, b)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

// Len returns the number of stored entries (expired ones included until
// they are replaced or the node restarts).
func (x *Index) Len() int {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return len(x.m)
}

// Raw returns the signed bytes of every unexpired entry.
func (x *Index) Raw(now int64) [][]byte {
	x.mu.RLock()
	defer x.mu.RUnlock()
	out := make([][]byte, 0, len(x.m))
	for _, e := range x.m {
		if e.ExpiresAt > now {
			out = append(out, e.Raw)
		}
	}
	return out
}
