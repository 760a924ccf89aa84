package adpmcp

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/adpnode/adpnode/client"
)

// store is the server's durable state in its directory: cursors.json
// (what wait and inbox delivered, the directory subscriptions and their
// feed cursors, the rooms the agent works in) and posts/ (one file per
// idempotency key, written before the envelope is submitted).
type store struct {
	dir string
	mu  sync.Mutex
	st  stateFile
}

type stateFile struct {
	// Seen is, per room URL, the last seq wait or read_room handed out.
	Seen map[string]int64 `json:"seen"`
	// Mentions is the inbox cursor.
	Mentions client.Cursor `json:"mentions"`
	// Rooms are the room URLs the agent created, joined or posted in:
	// what wait watches when it is given no rooms.
	Rooms []string `json:"rooms"`
	// Subs are the directory subscriptions made here, with feed cursors.
	Subs map[string]client.Cursor `json:"subscriptions"`
}

func openStore(dir string) (*store, error) {
	if err := os.MkdirAll(filepath.Join(dir, "posts"), 0o700); err != nil {
		return nil, err
	}
	s := &store{dir: dir}
	b, err := os.ReadFile(filepath.Join(dir, "cursors.json"))
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return nil, err
	default:
		if err := json.Unmarshal(b, &s.st); err != nil {
			return nil, fmt.Errorf("%s: %w", filepath.Join(dir, "cursors.json"), err)
		}
	}
	if s.st.Seen == nil {
		s.st.Seen = map[string]int64{}
	}
	if s.st.Subs == nil {
		s.st.Subs = map[string]client.Cursor{}
	}
	return s, nil
}

// saveLocked writes cursors.json atomically; s.mu is held.
func (s *store) saveLocked() error {
	b, err := json.MarshalIndent(s.st, "", "  ")
	if err != nil {
		return err
	}
	return client.SaveCursorBytes(filepath.Join(s.dir, "cursors.json"), b)
}

func (s *store) seen(room string) (int64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.st.Seen[room]
	return v, ok
}

// advance raises the seen cursor of room to seq (never lowers it).
func (s *store) advance(room string, seq int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if cur, ok := s.st.Seen[room]; ok && cur >= seq {
		return nil
	}
	s.st.Seen[room] = seq
	return s.saveLocked()
}

func (s *store) addRoom(room string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range s.st.Rooms {
		if r == room {
			return nil
		}
	}
	if len(s.st.Rooms) >= maxWatchedRooms {
		s.st.Rooms = s.st.Rooms[1:]
	}
	s.st.Rooms = append(s.st.Rooms, room)
	return s.saveLocked()
}

func (s *store) rooms() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.st.Rooms...)
}

func (s *store) mentions() client.Cursor {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.st.Mentions
}

func (s *store) setMentions(c client.Cursor) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.st.Mentions = c
	return s.saveLocked()
}

func (s *store) subs() map[string]client.Cursor {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]client.Cursor, len(s.st.Subs))
	for k, v := range s.st.Subs {
		out[k] = v
	}
	return out
}

func (s *store) setSub(id string, c client.Cursor) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.st.Subs[id] = c
	return s.saveLocked()
}

func (s *store) dropSub(id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.st.Subs, id)
	return s.saveLocked()
}

// postEntry is one idempotency key's post: written with State "pending"
// and the signed envelope before it is submitted, then "done" with the
// answer. A pending entry is settled by resubmitting its envelope (the
// host answers an exact resubmission with the record it already holds).
type postEntry struct {
	Key      string          `json:"key"`
	Room     string          `json:"room"`
	State    string          `json:"state"` // pending, done
	Envelope json.RawMessage `json:"envelope,omitempty"`
	// Sealed posts (member-only rooms) are signed inside the client: the
	// entry records the head before the attempt and the content, to find
	// the record after a crash.
	Sealed     bool     `json:"sealed,omitempty"`
	HeadBefore int64    `json:"head_before,omitempty"`
	Content    string   `json:"content,omitempty"`
	Result     *PostOut `json:"result,omitempty"`
}

func (s *store) postPath(key string) string {
	h := sha256.Sum256([]byte(key))
	return filepath.Join(s.dir, "posts", hex.EncodeToString(h[:16])+".json")
}

func (s *store) loadPost(key string) (*postEntry, error) {
	b, err := os.ReadFile(s.postPath(key))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var e postEntry
	if err := json.Unmarshal(b, &e); err != nil {
		return nil, err
	}
	return &e, nil
}

func (s *store) savePost(e *postEntry) error {
	b, err := json.Marshal(e)
	if err != nil {
		return err
	}
	return client.SaveCursorBytes(s.postPath(e.Key), b)
}

func (s *store) dropPost(key string) error {
	err := os.Remove(s.postPath(key))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return err
}

// stateWritten logs a failed write of the local state (cursors, watched
// rooms, the post journal) after an action the node already took: the
// action's answer stands, and the next write of the state carries what
// this one lost.
func (s *Server) stateWritten(err error) {
	if err != nil {
		s.log.Warn("adpmcp: local state not written", "err", err)
	}
}
