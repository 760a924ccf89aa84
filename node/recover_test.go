//go:build e2e

package node_test

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"net/http"
	"strconv"
	"testing"

	"github.com/dgraph-io/badger/v4"

	"github.com/adpnode/adpnode/adp"
	"github.com/adpnode/adpnode/internal/adptest"
	"github.com/adpnode/adpnode/node"
)

// The storage layout these tests reach into while the node is stopped, as
// an operator's tool or a disk fault would (node/store.go).
func recordKey(room string, seq int64) []byte {
	return binary.BigEndian.AppendUint64([]byte("r/"+room+"/"), uint64(seq))
}

func withDB(t *testing.T, dir string, fn func(db *badger.DB)) {
	t.Helper()
	db, err := badger.Open(badger.DefaultOptions(dir).WithLogger(nil))
	if err != nil {
		t.Fatal(err)
	}
	fn(db)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

var manyWrites = node.Rates{Message: 10000, Signal: 10000, Control: 10000,
	MessageCeiling: 10000, SignalCeiling: 10000, ControlCeiling: 10000, AgentStatus: 10000}

type roomView struct {
	resource, members, events []byte
}

func readRoom(t *testing.T, h *adptest.Host, a *adptest.Agent, id string) roomView {
	t.Helper()
	tok := a.Token(h.URL, h.Clock.Ms())
	get := func(path string) []byte {
		r := adptest.Do(t, http.MethodGet, h.URL+"/v1/rooms/"+id+path, tok, nil)
		if r.Status != http.StatusOK {
			t.Fatalf("GET %s: %s", path, r)
		}
		return r.Body
	}
	return roomView{get(""), get("/members"), get("/events?after_seq=0&limit=1000")}
}

func sameRoom(t *testing.T, what string, a, b roomView) {
	t.Helper()
	if !bytes.Equal(a.resource, b.resource) {
		t.Errorf("%s: room resource differs:\n%s\n%s", what, a.resource, b.resource)
	}
	if !bytes.Equal(a.members, b.members) {
		t.Errorf("%s: members differ:\n%s\n%s", what, a.members, b.members)
	}
	if !bytes.Equal(a.events, b.events) {
		t.Errorf("%s: records differ", what)
	}
}

type recordHashes struct {
	Result []struct {
		Seq      int64           `json:"seq"`
		Hash     string          `json:"hash"`
		Envelope json.RawMessage `json:"envelope"`
	} `json:"result"`
}

// busyRoom makes a room with a custom inline type, some members and many
// records, and returns its ID.
func busyRoom(t *testing.T, h *adptest.Host, c *adptest.Agent, others []*adptest.Agent, messages int) string {
	t.Helper()
	id := h.CreateRoom(t, c, h.RoomPayload("public"))
	h.MustPost(t, c, id, "type.define", map[string]any{"type": "test.score", "kind": "signal", "title": "Score",
		"schema": map[string]any{"type": "object", "required": []any{"value"}, "additionalProperties": false,
			"properties": map[string]any{"value": map[string]any{"type": "integer", "minimum": 0, "maximum": 10}}}})
	for _, a := range others {
		h.MustPost(t, a, id, "room.join", map[string]any{"role": "speaker"})
	}
	for i := 0; i < messages; i++ {
		a := others[i%len(others)]
		h.MustPost(t, a, id, "message.create", map[string]any{"content_type": "text/plain", "content": "m"})
	}
	return id
}

// TestRestartFromSnapshots: a clean stop stores every room's state, and the
// next start restores it without replaying a record; everything the kernel
// answers from history (old anchors, references, exact resubmissions, a
// custom type's schema) still works on the restored state.
func TestRestartFromSnapshots(t *testing.T) {
	h := adptest.StartHostAt(t, node.Config{DataDir: t.TempDir(), Rates: manyWrites}, adptest.NewClock())
	c := adptest.NewAgent("snap-creator")
	others := []*adptest.Agent{adptest.NewAgent("snap-a"), adptest.NewAgent("snap-b")}
	id := busyRoom(t, h, c, others, 60)
	var old recordHashes
	if err := json.Unmarshal(readRoom(t, h, c, id).events, &old); err != nil || len(old.Result) < 60 {
		t.Fatalf("events: %v", err)
	}
	before := readRoom(t, h, c, id)

	h = h.Restart(t)
	st := h.Node.RecoveryStats()
	if st.Rooms != 1 || st.FromSnapshot != 1 || st.Replayed != 0 || st.Broken != 0 {
		t.Fatalf("recovery after a clean stop: %+v", st)
	}
	sameRoom(t, "after restart", before, readRoom(t, h, c, id))

	a := others[0]
	// A signal anchored to an old record is admitted from the stored history.
	r := adptest.Do(t, http.MethodPost, h.URL+"/v1/rooms/"+id, "",
		a.Envelope(h.Clock.Ms(), "reaction.create", id, old.Result[4].Seq, old.Result[4].Hash,
			map[string]any{"event_id": old.Result[4].Hash, "reaction": "agree"}))
	if r.Status != http.StatusCreated {
		t.Fatalf("signal on an old anchor: %s", r)
	}
	wrong := adptest.Do(t, http.MethodPost, h.URL+"/v1/rooms/"+id, "",
		a.Envelope(h.Clock.Ms(), "reaction.create", id, old.Result[4].Seq, old.Result[5].Hash,
			map[string]any{"event_id": old.Result[4].Hash, "reaction": "agree"}))
	if wrong.ErrorCode() != string(adp.CodeBaseRecordMismatch) {
		t.Fatalf("signal on a wrong old anchor: %s", wrong)
	}
	// References to an old record hash and to an old envelope hash.
	var env struct {
		Hash string `json:"hash"`
	}
	json.Unmarshal(old.Result[7].Envelope, &env)
	h.MustPost(t, a, id, "message.create", map[string]any{"content_type": "text/plain", "content": "re",
		"references": []string{old.Result[6].Hash, env.Hash}})
	if r := h.Post(t, a, id, "message.create", map[string]any{"content_type": "text/plain", "content": "re",
		"references": []string{"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"}}); r.ErrorCode() != string(adp.CodeInvalidEvent) {
		t.Fatalf("unknown reference: %s", r)
	}
	// The custom type's schema compiles on first use after the restore.
	h.MustPost(t, a, id, "test.score", map[string]any{"value": 7})
	if r := h.Post(t, a, id, "test.score", map[string]any{"value": 70}); r.ErrorCode() != string(adp.CodePayloadSchemaViolation) {
		t.Fatalf("schema after restore: %s", r)
	}
	// An exact resubmission of an old envelope answers its original record.
	var rec struct {
		Envelope json.RawMessage `json:"envelope"`
	}
	json.Unmarshal(oldRecord(t, h, c, id, 10), &rec)
	r = adptest.Do(t, http.MethodPost, h.URL+"/v1/rooms/"+id, "", rec.Envelope)
	if r.Status != http.StatusOK || !bytes.Contains(r.Body, []byte(`"seq":10`)) {
		t.Fatalf("resubmission of seq 10: %s", r)
	}
}

func oldRecord(t *testing.T, h *adptest.Host, a *adptest.Agent, id string, seq int64) []byte {
	t.Helper()
	r := adptest.Do(t, http.MethodGet, h.URL+"/v1/rooms/"+id+"/events?after_seq="+itoa(seq-1)+"&limit=1", a.Token(h.URL, h.Clock.Ms()), nil)
	var out struct {
		Result []json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal(r.Body, &out); err != nil || len(out.Result) != 1 {
		t.Fatalf("record %d: %s", seq, r)
	}
	return out.Result[0]
}

func itoa(v int64) string { return strconv.FormatInt(v, 10) }

// TestDamagedSnapshotReplays: a snapshot that does not decode, or that names
// a record the room does not have, is discarded and the chain replayed.
func TestDamagedSnapshotReplays(t *testing.T) {
	h := adptest.StartHostAt(t, node.Config{DataDir: t.TempDir(), Rates: manyWrites}, adptest.NewClock())
	c := adptest.NewAgent("dmg-creator")
	others := []*adptest.Agent{adptest.NewAgent("dmg-a")}
	id := busyRoom(t, h, c, others, 20)
	other := busyRoom(t, h, c, others, 5)
	before, beforeOther := readRoom(t, h, c, id), readRoom(t, h, c, other)
	for _, damage := range [][]byte{[]byte("garbage"), nil} {
		h = h.RestartAfter(t, func(dir string) {
			withDB(t, dir, func(db *badger.DB) {
				db.Update(func(txn *badger.Txn) error {
					v := damage
					if v == nil { // a well-formed snapshot claiming a record that is not there
						item, err := txn.Get([]byte("s/" + id))
						if err != nil {
							return err
						}
						v, _ = item.ValueCopy(nil)
						v = bytes.Replace(v, []byte(`"seq":`), []byte(`"seq":9`), 1)
					}
					return txn.Set([]byte("s/"+id), v)
				})
			})
		})
		st := h.Node.RecoveryStats()
		if damage != nil && (st.Rooms != 2 || st.FromSnapshot != 1 || st.Replayed < 20 || st.Broken != 0) {
			t.Fatalf("recovery with a damaged snapshot (%q): %+v", damage, st)
		}
		// A well-formed snapshot is trusted at start without reading the
		// room's last record; the first use of the room checks it against
		// the chain and replays the chain instead.
		if damage == nil && (st.Rooms != 2 || st.FromSnapshot != 2 || st.Broken != 0) {
			t.Fatalf("recovery with a snapshot ahead of the chain: %+v", st)
		}
		sameRoom(t, "replayed room", before, readRoom(t, h, c, id))
		sameRoom(t, "other room", beforeOther, readRoom(t, h, c, other))
		var was struct {
			Seq int64 `json:"seq"`
		}
		json.Unmarshal(before.resource, &was)
		w := h.MustPost(t, c, id, "message.create", map[string]any{"content": "after", "content_type": "text/plain"})
		var got struct {
			Seq int64 `json:"seq"`
		}
		json.Unmarshal(w.Body, &got)
		if was.Seq == 0 || got.Seq != was.Seq+1 {
			t.Fatalf("write after the damaged snapshot got seq %d, head was %d: %s", got.Seq, was.Seq, w)
		}
		before = readRoom(t, h, c, id)
	}
}

// TestBrokenRoomSetAside: a room whose stored chain does not replay (a
// flipped byte in one record) answers unavailable with the room and seq,
// while every other room is served and writable; the node starts.
func TestBrokenRoomSetAside(t *testing.T) {
	h := adptest.StartHostAt(t, node.Config{DataDir: t.TempDir(), Rates: manyWrites}, adptest.NewClock())
	c := adptest.NewAgent("brk-creator")
	others := []*adptest.Agent{adptest.NewAgent("brk-a")}
	bad := busyRoom(t, h, c, others, 10)
	good := busyRoom(t, h, c, others, 10)
	before := readRoom(t, h, c, good)
	h = h.RestartAfter(t, func(dir string) {
		withDB(t, dir, func(db *badger.DB) {
			db.Update(func(txn *badger.Txn) error {
				txn.Delete([]byte("s/" + bad)) // force a replay through the damage
				item, err := txn.Get(recordKey(bad, 6))
				if err != nil {
					return err
				}
				v, _ := item.ValueCopy(nil)
				v = bytes.Replace(v, []byte(`"content":"m"`), []byte(`"content":"M"`), 1)
				return txn.Set(recordKey(bad, 6), v)
			})
		})
	})
	st := h.Node.RecoveryStats()
	if st.Rooms != 1 || st.Broken != 1 {
		t.Fatalf("recovery: %+v", st)
	}
	broken := h.Node.BrokenRooms()
	if len(broken) != 1 || broken[0].RoomID != bad || broken[0].Seq != 6 {
		t.Fatalf("broken rooms: %+v", broken)
	}
	sameRoom(t, "healthy room", before, readRoom(t, h, c, good))
	h.MustPost(t, others[0], good, "message.create", map[string]any{"content_type": "text/plain", "content": "still here"})
	for _, r := range []*adptest.Response{
		adptest.Do(t, http.MethodGet, h.URL+"/v1/rooms/"+bad, "", nil),
		adptest.Do(t, http.MethodGet, h.URL+"/v1/rooms/"+bad+"/events", "", nil),
		adptest.Do(t, http.MethodPost, h.URL+"/v1/rooms/"+bad, "", others[0].Envelope(h.Clock.Ms(), "message.create", bad, 1, "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", map[string]any{"content_type": "text/plain", "content": "x"})),
	} {
		d := r.ErrorData()
		if r.Status != http.StatusServiceUnavailable || r.ErrorCode() != string(adp.CodeUnavailable) || d["reason"] != "room_corrupt" || d["seq"] != float64(6) {
			t.Errorf("broken room answered %s", r)
		}
	}
}

// TestUpgradeFromLayout1: a data dir written before snapshots and the
// record-hash index (no layout key) is replayed once, indexed and
// snapshotted; old record hashes resolve as references afterwards.
func TestUpgradeFromLayout1(t *testing.T) {
	h := adptest.StartHostAt(t, node.Config{DataDir: t.TempDir(), Rates: manyWrites}, adptest.NewClock())
	c := adptest.NewAgent("upg-creator")
	others := []*adptest.Agent{adptest.NewAgent("upg-a")}
	id := busyRoom(t, h, c, others, 15)
	before := readRoom(t, h, c, id)
	var recs recordHashes
	json.Unmarshal(before.events, &recs)
	h = h.RestartAfter(t, func(dir string) {
		withDB(t, dir, func(db *badger.DB) {
			db.Update(func(txn *badger.Txn) error {
				txn.Delete([]byte("v/layout"))
				txn.Delete([]byte("h/" + id))
				txn.Delete([]byte("s/" + id))
				for _, r := range recs.Result {
					raw, _ := b64dec(r.Hash)
					txn.Delete(append([]byte("e/"), raw...))
				}
				return nil
			})
		})
	})
	if st := h.Node.RecoveryStats(); !st.Upgraded || st.Replayed != len(recs.Result) || st.FromSnapshot != 0 {
		t.Fatalf("upgrade recovery: %+v", st)
	}
	sameRoom(t, "upgraded room", before, readRoom(t, h, c, id))
	h.MustPost(t, others[0], id, "message.create", map[string]any{"content_type": "text/plain", "content": "re",
		"references": []string{recs.Result[3].Hash}})
	h = h.Restart(t)
	if st := h.Node.RecoveryStats(); st.Upgraded || st.FromSnapshot != 1 || st.Replayed != 0 {
		t.Fatalf("restart after the upgrade: %+v", st)
	}
}

// TestUpgradeFromLayout2: a data dir written before the room registry finds
// its rooms from their records once, without replaying them, and writes the
// registry; the next start lists rooms from the registry alone.
func TestUpgradeFromLayout2(t *testing.T) {
	h := adptest.StartHostAt(t, node.Config{DataDir: t.TempDir(), Rates: manyWrites}, adptest.NewClock())
	c := adptest.NewAgent("upg2-creator")
	others := []*adptest.Agent{adptest.NewAgent("upg2-a")}
	ids := []string{busyRoom(t, h, c, others, 5), busyRoom(t, h, c, others, 7)}
	before := []roomView{readRoom(t, h, c, ids[0]), readRoom(t, h, c, ids[1])}
	h = h.RestartAfter(t, func(dir string) {
		withDB(t, dir, func(db *badger.DB) {
			db.Update(func(txn *badger.Txn) error {
				for _, id := range ids {
					txn.Delete([]byte("h/" + id))
				}
				return txn.Set([]byte("v/layout"), binary.BigEndian.AppendUint64(nil, 2))
			})
		})
	})
	if st := h.Node.RecoveryStats(); st.Rooms != 2 || st.FromSnapshot != 2 || st.Replayed != 0 || st.Upgraded {
		t.Fatalf("registry upgrade: %+v", st)
	}
	for i, id := range ids {
		sameRoom(t, "room after the registry upgrade", before[i], readRoom(t, h, c, id))
	}
	h = h.Restart(t)
	if st := h.Node.RecoveryStats(); st.Rooms != 2 || st.FromSnapshot != 2 {
		t.Fatalf("restart after the registry upgrade: %+v", st)
	}
	// A registry entry with no records is a room that cannot recover, set
	// aside like any other broken room; the rest serve.
	h = h.RestartAfter(t, func(dir string) {
		withDB(t, dir, func(db *badger.DB) {
			db.Update(func(txn *badger.Txn) error { return txn.Set([]byte("h/ghost"), nil) })
		})
	})
	if st := h.Node.RecoveryStats(); st.Rooms != 2 || st.Broken != 1 {
		t.Fatalf("registry entry without records: %+v", st)
	}
	sameRoom(t, "room beside a ghost entry", before[0], readRoom(t, h, c, ids[0]))
}

func b64dec(s string) ([]byte, error) { return base64.RawURLEncoding.DecodeString(s) }

// TestStateSizeIndependentOfHistory: what a hosted room keeps (its
// snapshot is exactly its state) does not grow with its records: 40 and
// 400 messages give snapshots of the same size but for the digits of the
// counts and seqs.
func TestStateSizeIndependentOfHistory(t *testing.T) {
	h := adptest.StartHostAt(t, node.Config{DataDir: t.TempDir(), Rates: manyWrites}, adptest.NewClock())
	c := adptest.NewAgent("size-creator")
	others := []*adptest.Agent{adptest.NewAgent("size-a")}
	small := busyRoom(t, h, c, others, 40)
	big := busyRoom(t, h, c, others, 400)
	h.Close()
	var sizes []int
	withDB(t, h.Node.Config().DataDir, func(db *badger.DB) {
		db.View(func(txn *badger.Txn) error {
			for _, id := range []string{small, big} {
				item, err := txn.Get([]byte("s/" + id))
				if err != nil {
					t.Fatalf("snapshot of %s: %v", id, err)
				}
				sizes = append(sizes, int(item.ValueSize()))
			}
			return nil
		})
	})
	if sizes[1]-sizes[0] > 16 || sizes[1] < sizes[0] {
		t.Fatalf("room state grows with history: %d bytes at 40 messages, %d at 400", sizes[0], sizes[1])
	}
}
