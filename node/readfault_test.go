//go:build e2e

package node_test

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/dgraph-io/badger/v4"

	"github.com/adpnode/adpnode/adp"
	"github.com/adpnode/adpnode/internal/adptest"
	"github.com/adpnode/adpnode/internal/storelayout"
	"github.com/adpnode/adpnode/node"
)

// TestStoreReadFaultAnswersUnavailable: when the node cannot read what a
// judgement needs from its store (a stored record or an envelope index
// entry that no longer reads back), it answers 503 unavailable with
// Retry-After — never a verdict on the client's event such as
// base_record_mismatch or unknown_reference — and what does not need the
// damaged data is still accepted. Property: storage errors are errors.
func TestStoreReadFaultAnswersUnavailable(t *testing.T) {
	h := adptest.StartHostAt(t, node.Config{DataDir: t.TempDir(), Rates: manyWrites}, adptest.NewClock())
	c := adptest.NewAgent("fault-creator")
	a := adptest.NewAgent("fault-a")
	id := busyRoom(t, h, c, []*adptest.Agent{a}, 10)
	var old recordHashes
	if err := json.Unmarshal(readRoom(t, h, c, id).events, &old); err != nil || len(old.Result) < 10 {
		t.Fatalf("events: %v", err)
	}
	rec5, rec7 := old.Result[4], old.Result[6]
	if rec5.Seq != 5 || rec7.Seq != 7 {
		t.Fatalf("records out of order: %d %d", rec5.Seq, rec7.Seq)
	}
	hash7, err := base64.RawURLEncoding.DecodeString(rec7.Hash)
	if err != nil {
		t.Fatal(err)
	}
	// Restarted from its snapshot, the room reads old records only when
	// asked: the damage is found by the requests below, not at start.
	h = h.RestartAfter(t, func(dir string) {
		withDB(t, dir, func(db *badger.DB) {
			if err := db.Update(func(txn *badger.Txn) error {
				if err := txn.Set(recordKey(id, 5), []byte("\x00unreadable")); err != nil {
					return err
				}
				return txn.Set(append([]byte(storelayout.Envelope), hash7...), []byte("?"))
			}); err != nil {
				t.Fatal(err)
			}
		})
	})
	if st := h.Node.RecoveryStats(); st.FromSnapshot != 1 || st.Broken != 0 {
		t.Fatalf("recovery: %+v", st)
	}
	unavailable := func(what string, r *adptest.Response) {
		t.Helper()
		if r.Status != http.StatusServiceUnavailable || r.ErrorCode() != string(adp.CodeUnavailable) ||
			r.ErrorData()["reason"] != "storage_read" || r.Header.Get("Retry-After") == "" {
			t.Errorf("%s on a damaged store: %s (Retry-After %q), want 503 unavailable", what, r, r.Header.Get("Retry-After"))
		}
	}
	// A signal anchored to the unreadable record.
	unavailable("signal anchored to seq 5", adptest.Do(t, http.MethodPost, h.URL+"/v1/rooms/"+id, "",
		a.Envelope(h.Clock.Ms(), "reaction.create", id, rec5.Seq, rec5.Hash,
			map[string]any{"event_id": rec5.Hash, "reaction": "agree"})))
	// A reference through the unreadable index entry.
	unavailable("reference to seq 7", h.Post(t, a, id, "message.create",
		map[string]any{"content_type": "text/plain", "content": "re", "references": []string{rec7.Hash}}))

	// The rest of the room is judged as before.
	r := adptest.Do(t, http.MethodPost, h.URL+"/v1/rooms/"+id, "",
		a.Envelope(h.Clock.Ms(), "reaction.create", id, old.Result[3].Seq, old.Result[3].Hash,
			map[string]any{"event_id": old.Result[3].Hash, "reaction": "agree"}))
	if r.Status != http.StatusCreated {
		t.Fatalf("signal on an intact old anchor: %s", r)
	}
	h.MustPost(t, a, id, "message.create", map[string]any{"content_type": "text/plain", "content": "still here"})
}

// TestReadFaultLeavesRoomsServed: while the store fails reads, a room
// restored from its snapshot (live or ended and cold) answers 503
// unavailable, and so does a write whose judgement needs a read; once
// reads work again every room is served and writable — a failed read sets
// no room aside as corrupt. Property: storage errors are errors, and
// transient.
func TestReadFaultLeavesRoomsServed(t *testing.T) {
	f := newColdFixture(t)
	f.h.Node.HoldCold(false)
	f.h.Node.EvictEnded()
	waitCold(t, f.h.Node, 3)
	f.h = f.h.Restart(t)
	h := f.h
	unavailable := func(what string, r *adptest.Response) {
		t.Helper()
		if r.Status != http.StatusServiceUnavailable || r.ErrorCode() != string(adp.CodeUnavailable) ||
			r.ErrorData()["reason"] != "storage_read" || r.Header.Get("Retry-After") == "" {
			t.Errorf("%s while reads fail: %s, want 503 unavailable (storage_read)", what, r)
		}
	}
	msg := map[string]any{"content_type": "text/plain", "content": "m"}

	h.Node.FailStoreReads(true)
	for _, id := range []string{f.closed, f.live} {
		unavailable("GET "+id, adptest.Do(t, http.MethodGet, h.URL+"/v1/rooms/"+id, f.creator.Token(h.URL, h.Clock.Ms()), nil))
	}
	post := func(head adptest.Head) *adptest.Response {
		return adptest.Do(t, http.MethodPost, h.URL+"/v1/rooms/"+f.live, "",
			f.member.Envelope(h.Clock.Ms(), "message.create", f.live, head.Seq, head.Hash, msg))
	}
	unavailable("message", post(adptest.Head{Seq: 1, Hash: "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"}))
	h.Node.FailStoreReads(false)

	if b := h.Node.BrokenRooms(); len(b) != 0 {
		t.Fatalf("a failed read set rooms aside: %+v", b)
	}
	for _, id := range []string{f.closed, f.live} {
		if r := adptest.Do(t, http.MethodGet, h.URL+"/v1/rooms/"+id, f.creator.Token(h.URL, h.Clock.Ms()), nil); r.Status != http.StatusOK {
			t.Errorf("GET %s after reads recovered: %s", id, r)
		}
	}
	h.MustPost(t, f.member, f.live, "message.create", msg)

	// A room in use: the exact-duplicate check reads the store.
	head := h.Head(t, f.member, f.live)
	h.Node.FailStoreReads(true)
	unavailable("message in a room in use", post(head))
	h.Node.FailStoreReads(false)
	h.MustPost(t, f.member, f.live, "message.create", msg)
}
