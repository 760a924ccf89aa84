package node

import (
	"container/list"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/dgraph-io/badger/v4"

	"github.com/adpnode/adpnode/adp"
	"github.com/adpnode/adpnode/adp/identity"
	"github.com/adpnode/adpnode/adp/room"
)

// Ended rooms cost no RAM. Once a terminal room's end-of-room
// work ran (archivedAt) its state is stored (s/<room>) with a compact
// summary (t/<room>) and an index of its members (a/<agent>/<room>), in one
// transaction, and the in-memory state is dropped: the room is cold. The
// directory, /v1/me/rooms and the read rules answer from the summary and the
// index; every other read loads the state from its snapshot into a small
// LRU (coldCache) and answers from it, read-only. A write that the kernel
// would admit (only possible when the clock moved back) makes the room hot
// again from a private copy.

// coldCacheRooms is how many cold rooms' states are kept decoded.
const coldCacheRooms = 64

// coldLoaders bounds how many cold states are decoded at once, so a crowd
// of readers of different cold rooms costs at most the cache plus this many
// states.
const coldLoaders = 4

// coldRoom is what memory keeps of a cold room: what the listings need.
type coldRoom struct {
	Life       room.Lifecycle   `json:"life"`
	Topic      string           `json:"topic"`
	Agenda     string           `json:"agenda,omitempty"`
	Visibility string           `json:"visibility"`
	Creator    identity.AgentID `json:"creator"`
	Tags       []string         `json:"tags,omitempty"`
	Language   string           `json:"language,omitempty"`
	Seq        int64            `json:"seq"`
	LastHash   string           `json:"last_hash"`
	Head       room.Head        `json:"head"`
	Members    int              `json:"members"` // active members
	LastActive int64            `json:"last_active"`
}

func coldOf(st *room.State) *coldRoom {
	return &coldRoom{Life: st.Lifecycle(), Topic: st.Topic, Agenda: st.Agenda, Visibility: st.Visibility, Creator: st.Creator,
		Tags: st.Tags, Language: st.Language, Seq: st.Seq, LastHash: st.LastHash, Head: st.Head,
		Members: len(st.Members()), LastActive: st.LastReceivedAt}
}

// Membership index values: flags, then the role.
const (
	memberFlag  = 1 // ever a member
	activeFlag  = 2 // an active member
	creatorFlag = 4 // the room's creator
)

func memberKey(agent identity.AgentID, roomID string) []byte {
	return []byte(pfxMember + string(agent) + "/" + roomID)
}

// standing is one agent's place in a room.
type standing struct {
	member  bool
	m       room.Member // Agent, Role, Active (cold rooms: only these)
	creator bool
}

func parseStanding(agent identity.AgentID, v []byte) (standing, bool) {
	if len(v) < 1 {
		return standing{}, false
	}
	s := standing{member: v[0]&memberFlag != 0, creator: v[0]&creatorFlag != 0}
	if s.member {
		s.m = room.Member{Agent: agent, Role: adp.Role(v[1:]), Active: v[0]&activeFlag != 0}
	}
	return s, true
}

// coldCache holds the decoded states of recently read cold rooms. States in
// it are never mutated. An entry is tied to the coldRoom value it was
// loaded for, so a room evicted again (a new value) never answers from an
// older load.
type coldCache struct {
	mu      sync.Mutex
	max     int
	ll      *list.List // of *coldEntry, most recent first
	items   map[string]*list.Element
	loading map[string]*coldLoad
	sem     chan struct{}
}

type coldEntry struct {
	id   string
	cold *coldRoom
	st   *room.State
}

type coldLoad struct {
	cold *coldRoom
	done chan struct{}
	st   *room.State
	err  error
}

func newColdCache(max int) *coldCache {
	return &coldCache{max: max, ll: list.New(), items: map[string]*list.Element{}, loading: map[string]*coldLoad{},
		sem: make(chan struct{}, coldLoaders)}
}

// get returns the state of cold room id as of cold, loading it at most once
// at a time per room.
func (c *coldCache) get(id string, cold *coldRoom, load func() (*room.State, error)) (*room.State, error) {
	c.mu.Lock()
	if el, ok := c.items[id]; ok && el.Value.(*coldEntry).cold == cold {
		c.ll.MoveToFront(el)
		st := el.Value.(*coldEntry).st
		c.mu.Unlock()
		return st, nil
	}
	if l, ok := c.loading[id]; ok && l.cold == cold {
		c.mu.Unlock()
		<-l.done
		return l.st, l.err
	}
	l := &coldLoad{cold: cold, done: make(chan struct{})}
	c.loading[id] = l
	c.mu.Unlock()

	c.sem <- struct{}{}
	l.st, l.err = load()
	<-c.sem

	c.mu.Lock()
	if c.loading[id] == l {
		delete(c.loading, id)
	}
	if l.err == nil {
		if el, ok := c.items[id]; ok {
			c.ll.Remove(el)
		}
		c.items[id] = c.ll.PushFront(&coldEntry{id: id, cold: cold, st: l.st})
		for c.ll.Len() > c.max {
			old := c.ll.Remove(c.ll.Back()).(*coldEntry)
			delete(c.items, old.id)
		}
	}
	c.mu.Unlock()
	close(l.done)
	return l.st, l.err
}

// drop forgets room id.
func (c *coldCache) drop(id string) {
	c.mu.Lock()
	if el, ok := c.items[id]; ok {
		c.ll.Remove(el)
		delete(c.items, id)
	}
	c.mu.Unlock()
}

func (c *coldCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ll.Len()
}

// ColdRooms reports how many hosted rooms are cold and how many cold
// states are decoded in the cache.
func (n *Node) ColdRooms() (cold, cached int) {
	for _, hr := range n.roomList() {
		hr.mu.RLock()
		if hr.st == nil {
			cold++
		}
		hr.mu.RUnlock()
	}
	return cold, n.cold.len()
}

// view runs fn with hr's state: the live one under hr.mu, or a cold room's
// from the cache (read-only, fn must not keep it). It is the only way to
// read a room's state outside the sequencer. A cold room whose snapshot
// does not load becomes broken (room_corrupt), and the error says so.
func (n *Node) view(hr *hostedRoom, fn func(st *room.State)) error {
	hr.mu.RLock()
	if hr.st != nil {
		defer hr.mu.RUnlock()
		fn(hr.st)
		return nil
	}
	cold := hr.cold
	hr.mu.RUnlock()
	st, err := n.cold.get(hr.id, cold, func() (*room.State, error) { return n.loadCold(hr.id, cold) })
	if err != nil {
		return n.coldFailed(hr, err)
	}
	fn(st)
	return nil
}

// seqView is view for a caller holding hr.seqMu: the live state (stable
// under the sequencer) or a cold room's cached one.
func (n *Node) seqView(hr *hostedRoom) (*room.State, error) {
	if st := hr.st; st != nil {
		return st, nil
	}
	var out *room.State
	err := n.view(hr, func(st *room.State) { out = st })
	return out, err
}

// lifecycle returns the facts hr's status depends on.
func (n *Node) lifecycle(hr *hostedRoom) room.Lifecycle {
	hr.mu.RLock()
	defer hr.mu.RUnlock()
	if hr.st != nil {
		return hr.st.Lifecycle()
	}
	return hr.cold.Life
}

// lastSeq returns the room's latest seq.
func (n *Node) lastSeq(hr *hostedRoom) int64 {
	hr.mu.RLock()
	defer hr.mu.RUnlock()
	if hr.st != nil {
		return hr.st.Seq
	}
	return hr.cold.Seq
}

// standingOf returns the room's visibility and creator and agent's place in
// it (agent "" has none), from the state or, for a cold room, its summary
// and the membership index.
func (n *Node) standingOf(hr *hostedRoom, agent identity.AgentID) (vis string, creator identity.AgentID, s standing, err error) {
	hr.mu.RLock()
	if st := hr.st; st != nil {
		vis, creator = st.Visibility, st.Creator
		if agent != "" {
			s.m, s.member = st.Member(agent)
			s.creator = agent == creator
		}
		hr.mu.RUnlock()
		return vis, creator, s, nil
	}
	cold := hr.cold
	hr.mu.RUnlock()
	vis, creator = cold.Visibility, cold.Creator
	if agent == "" {
		return vis, creator, s, nil
	}
	err = n.db.View(func(txn *badger.Txn) error {
		item, err := txn.Get(memberKey(agent, hr.id))
		if errors.Is(err, badger.ErrKeyNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		return item.Value(func(v []byte) error {
			s, _ = parseStanding(agent, v)
			return nil
		})
	})
	return vis, creator, s, err
}

// coldStandings returns agent's place in every cold room it was a member
// or the creator of, from the membership index.
func (n *Node) coldStandings(agent identity.AgentID) (map[string]standing, error) {
	out := map[string]standing{}
	prefix := []byte(pfxMember + string(agent) + "/")
	err := n.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{PrefetchValues: true, PrefetchSize: 64, Prefix: prefix})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			id := string(it.Item().Key()[len(prefix):])
			err := it.Item().Value(func(v []byte) error {
				if s, ok := parseStanding(agent, v); ok {
					out[id] = s
				}
				return nil
			})
			if err != nil {
				return err
			}
		}
		return nil
	})
	return out, err
}

// loadCold decodes a cold room's stored state and checks it: it must be
// of this room, at the summary's seq, and name the stored record there
// (same hash). A state that is not is a *RoomBroken.
func (n *Node) loadCold(id string, cold *coldRoom) (*room.State, error) {
	var raw []byte
	err := n.db.View(func(txn *badger.Txn) error {
		item, err := txn.Get(snapshotKey(id))
		if err != nil {
			return err
		}
		raw, err = item.ValueCopy(nil)
		return err
	})
	if errors.Is(err, badger.ErrKeyNotFound) {
		return nil, &RoomBroken{RoomID: id, Err: errors.New("the stored state of the ended room is missing")}
	}
	if err != nil {
		return nil, err
	}
	st, err := room.Decode(n.stateConfig(id, n.packs.storedSource()), raw)
	switch {
	case err != nil:
	case st.ID != id:
		err = fmt.Errorf("snapshot is of room %s", st.ID)
	case st.Seq != cold.Seq || st.LastHash != cold.LastHash:
		err = fmt.Errorf("snapshot at seq %d, the room's summary at seq %d", st.Seq, cold.Seq)
	default:
		h, ok, rerr := n.history(id).RecordHash(st.Seq)
		if rerr != nil && !errors.Is(rerr, errDamaged) {
			return nil, rerr // not read: not a verdict on the stored state
		}
		if rerr != nil || !ok || identity.EncodeB64(h[:]) != st.LastHash {
			err = fmt.Errorf("snapshot at seq %d does not match the stored record", st.Seq)
		}
	}
	if err != nil {
		return nil, &RoomBroken{RoomID: id, Seq: 0, Err: fmt.Errorf("stored state of the ended room: %w", err)}
	}
	return st, nil
}

// coldFailed turns a failed cold load into the error to answer: a broken
// room is set aside (every request for it then answers room_corrupt, as
// for a room that did not recover); a storage error is internal.
func (n *Node) coldFailed(hr *hostedRoom, err error) error {
	var rb *RoomBroken
	if !errors.As(err, &rb) {
		// The stored state could not be read: the next use reads again.
		n.log.Error("ended room's stored state could not be read", "room", hr.id, "err", err)
		return storageUnavailable()
	}
	n.mu.Lock()
	if n.rooms[hr.id] == hr {
		delete(n.rooms, hr.id)
		n.broken[hr.id] = rb
		n.log.Error("ended room's stored state does not load; serving every other room", "room", rb.RoomID, "err", rb.Err)
	}
	n.mu.Unlock()
	return rb.adpError()
}

// evict drops the state of a terminal room whose end-of-room work ran,
// after storing it, its summary and its members' index in one transaction.
func (n *Node) evict(hr *hostedRoom) {
	hr.seqMu.Lock()
	defer hr.seqMu.Unlock()
	st := hr.st // stable: every change holds the sequencer
	if st == nil || n.holdCold.Load() || hr.archivedAt.Load() == 0 || !st.StatusAt(n.NowMs()).Terminal() {
		return
	}
	// The chain no longer changes: agree the join-request store with it
	// now, as recovery would (which skips cold rooms).
	n.reconcileRoom(hr.id, st)
	cold := coldOf(st)
	summary, _ := json.Marshal(cold)
	n.snapMu.Lock()
	defer n.snapMu.Unlock()
	err := n.db.Update(func(txn *badger.Txn) error {
		if err := txn.Set(snapshotKey(hr.id), st.Encode()); err != nil {
			return err
		}
		if err := txn.Set(terminalKey(hr.id), summary); err != nil {
			return err
		}
		creatorListed := false
		for _, m := range st.AllMembers() {
			f := byte(memberFlag)
			if m.Active {
				f |= activeFlag
			}
			if m.Agent == st.Creator {
				f |= creatorFlag
				creatorListed = true
			}
			if err := txn.Set(memberKey(m.Agent, hr.id), append([]byte{f}, m.Role...)); err != nil {
				return err
			}
		}
		if !creatorListed {
			return txn.Set(memberKey(st.Creator, hr.id), []byte{creatorFlag})
		}
		return nil
	})
	if err != nil {
		n.log.Warn("store the ended room's state; keeping it in memory", "room", hr.id, "err", err)
		return
	}
	hr.snapSeq.Store(st.Seq)
	hr.mu.Lock()
	hr.st, hr.cold = nil, cold
	hr.mu.Unlock()
}

// evictFinished evicts every hot room whose end-of-room work ran (a retry
// after a failed store, or a room finished while eviction was held).
func (n *Node) evictFinished() {
	now := n.NowMs()
	for _, hr := range n.roomList() {
		hr.mu.RLock()
		due := hr.st != nil && hr.archivedAt.Load() != 0 && hr.st.StatusAt(now).Terminal()
		hr.mu.RUnlock()
		if due {
			n.evict(hr)
		}
	}
}

// warm makes a cold room hot again from a private copy of its stored state
// (the caller holds hr.seqMu and is about to write).
func (n *Node) warm(hr *hostedRoom) error {
	hr.mu.RLock()
	cold := hr.cold
	hr.mu.RUnlock()
	if cold == nil {
		return nil
	}
	st, err := n.loadCold(hr.id, cold)
	if err != nil {
		return n.coldFailed(hr, err)
	}
	hr.mu.Lock()
	hr.st, hr.cold = st, nil
	hr.mu.Unlock()
	n.cold.drop(hr.id)
	n.log.Info("ended room is live again (the clock moved back)", "room", hr.id)
	return nil
}

// recoverCold restores a room as cold from its summary, without decoding
// its state, when its end-of-room work ran (archive marker), the summary
// names the room's last stored record and no record follows it. ok is false
// when the room must be recovered from its state.
func (n *Node) recoverCold(id string) (hr *hostedRoom, ok bool) {
	var cold coldRoom
	var at int64
	err := n.db.View(func(txn *badger.Txn) error {
		item, err := txn.Get(terminalKey(id))
		if err != nil {
			return err
		}
		if err := item.Value(func(v []byte) error { return json.Unmarshal(v, &cold) }); err != nil {
			return err
		}
		item, err = txn.Get([]byte(pfxArchive + id))
		if err != nil {
			return err
		}
		if err := item.Value(func(v []byte) error {
			if len(v) == 8 {
				at = int64(binary.BigEndian.Uint64(v))
			}
			return nil
		}); err != nil {
			return err
		}
		if _, err := txn.Get(recordKey(id, cold.Seq+1)); !errors.Is(err, badger.ErrKeyNotFound) {
			return errors.New("records follow the summary")
		}
		return nil
	})
	if err != nil || at == 0 || cold.Seq < 1 {
		if err != nil && !errors.Is(err, badger.ErrKeyNotFound) {
			n.log.Warn("ended room's summary not usable; recovering its state", "room", id, "err", err)
		}
		return nil, false
	}
	// That the summary's head is the stored record is checked on the
	// room's first use (checkSnapshotHead), not here: reading every ended
	// room's last record would map a block of record data per room.
	hr = &hostedRoom{id: id, cold: &cold}
	hr.unchecked.Store(true)
	hr.archivedAt.Store(at)
	hr.snapSeq.Store(cold.Seq)
	return hr, true
}
