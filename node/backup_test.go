//go:build e2e

package node_test

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/adpnode/adpnode/internal/adptest"
	"github.com/adpnode/adpnode/internal/optoken"
	"github.com/adpnode/adpnode/internal/testwait"
	"github.com/adpnode/adpnode/node"
)

// opsRates lift the per-agent write quotas so a test can write steadily on
// a clock that does not move.
func opsRates() node.Rates {
	const many = 1_000_000
	return node.Rates{Message: many, Signal: many, Control: many, MessageCeiling: many, SignalCeiling: many,
		ControlCeiling: many, AgentStatus: 60}
}

func text(s string) map[string]any { return map[string]any{"content_type": "text/plain", "content": s} }

// serverRecord is the answer to an accepted write.
type serverRecord struct {
	Seq  int64  `json:"seq"`
	Hash string `json:"hash"`
}

// writer posts messages to one room on its own, tracking the head from
// the answers, and remembers every acknowledged record.
type writer struct {
	h     *adptest.Host
	a     *adptest.Agent
	room  string
	mu    sync.Mutex
	acked map[int64]string // seq → hash
	head  serverRecord
	last  atomic.Int64
	fails atomic.Int64
}

func (w *writer) post(i int) (int, error) {
	env := w.a.Envelope(w.h.Clock.Ms(), "message.create", w.room, w.head.Seq, w.head.Hash, text(fmt.Sprintf("steady %d", i)))
	resp, err := http.Post(w.h.URL+"/v1/rooms/"+w.room, "application/json", bytes.NewReader(env))
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusCreated {
		return resp.StatusCode, fmt.Errorf("%d %s", resp.StatusCode, b)
	}
	var rec serverRecord
	if err := json.Unmarshal(b, &rec); err != nil {
		return resp.StatusCode, err
	}
	w.mu.Lock()
	w.acked[rec.Seq] = rec.Hash
	w.mu.Unlock()
	w.head = rec
	w.last.Store(rec.Seq)
	return resp.StatusCode, nil
}

func TestBackupRestore(t *testing.T) {
	dir := t.TempDir()
	clock := adptest.NewClock()
	h := adptest.StartHostAt(t, node.Config{DataDir: filepath.Join(dir, "live"), Rates: opsRates()}, clock)
	alice, bob, carol := adptest.NewAgent("alice"), adptest.NewAgent("bob"), adptest.NewAgent("carol")

	pub := h.CreateRoom(t, alice, h.RoomPayload("public"))
	h.MustPost(t, alice, pub, "message.create", text("public hello"))
	restricted := h.CreateRoom(t, alice, h.RoomPayload("restricted"))
	r := adptest.Do(t, http.MethodPost, h.URL+"/v1/rooms/"+restricted+"/join-requests", bob.Token(h.URL, clock.Ms()),
		[]byte(`{"role":"speaker","reason":"backup test"}`))
	if r.Status != http.StatusCreated {
		t.Fatalf("join request: %s", r)
	}
	var jr struct {
		Request json.RawMessage `json:"request"`
	}
	r.JSON(&jr)
	var fact struct {
		ID string `json:"id"`
	}
	json.Unmarshal(jr.Request, &fact)
	h.MustPost(t, alice, restricted, "room.join.review", map[string]any{"request": jr.Request, "decision": "approve", "role": "speaker"})
	h.MustPost(t, bob, restricted, "room.join", map[string]any{"role": "speaker", "request_id": fact.ID})
	h.MustPost(t, bob, restricted, "message.create", text("restricted hello"))
	private := h.CreateRoom(t, alice, h.RoomPayload("private"))
	h.MustPost(t, alice, private, "message.create", text("private hello"))
	// A mirrored room, as the mirror store keeps it (m/r/<host>/<room>/<seq>):
	// here a copy of the public room's chain under another host key.
	const hostKey = "did:agent:z6MkBackupTestHost"
	if err := h.Node.DB().Update(func(txn *badger.Txn) error {
		for seq := int64(1); seq <= 2; seq++ {
			item, err := txn.Get(hostedKey(pub, seq))
			if err != nil {
				return err
			}
			v, _ := item.ValueCopy(nil)
			if err := txn.Set(binary.BigEndian.AppendUint64([]byte("m/r/"+hostKey+"/"+pub+"/"), uint64(seq)), v); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	heads := map[string]adptest.Head{}
	for _, id := range []string{pub, restricted, private} {
		heads[id] = h.Head(t, alice, id)
	}

	// Writes continue during the backup.
	steady := h.CreateRoom(t, carol, h.RoomPayload("public"))
	w := &writer{h: h, a: carol, room: steady, acked: map[int64]string{}, head: serverRecord{Seq: 1}}
	w.head.Hash = h.Head(t, carol, steady).Hash
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := w.post(i); err != nil {
				w.fails.Add(1)
				return
			}
		}
	}()
	testwait.Until(t, 60*time.Second, "the writer under way", func() bool {
		select {
		case <-done:
			t.Fatalf("writer stopped after %d records", w.last.Load())
		default:
		}
		return w.last.Load() >= 20
	})
	if err := node.BackupDir(filepath.Join(dir, "live"), io.Discard); !errors.Is(err, node.ErrLocked) {
		t.Fatalf("offline backup of a running node's dir: %v", err)
	}
	ackedBefore := w.last.Load()
	tok, err := optoken.Read(filepath.Join(dir, "live", optoken.FileName))
	if err != nil {
		t.Fatal(err)
	}
	if r := adptest.Do(t, http.MethodGet, h.URL+"/v1/admin/backup", "", nil); r.Status != http.StatusForbidden {
		t.Fatalf("backup without the operator token: %s", r)
	}
	req, _ := http.NewRequest(http.MethodGet, h.URL+"/v1/admin/backup", nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	backup := filepath.Join(dir, "adpnode.backup")
	f, _ := os.Create(backup)
	io.Copy(f, resp.Body)
	resp.Body.Close()
	f.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /v1/admin/backup: %d", resp.StatusCode)
	}
	testwait.Until(t, 60*time.Second, "writes kept going meanwhile", func() bool {
		select {
		case <-done:
			t.Fatalf("writer stopped at %d", w.last.Load())
		default:
		}
		return w.last.Load() >= ackedBefore+20
	})
	close(stop)
	<-done
	if w.fails.Load() != 0 {
		t.Fatal("a write failed during the backup")
	}
	h.Close()

	// Hostile inputs: a non-empty target, a truncated file, a flipped byte,
	// a huge frame length, garbage.
	raw, _ := os.ReadFile(backup)
	restoreBytes := func(b []byte) error {
		return node.RestoreDir(t.TempDir()+"/x", bytes.NewReader(b))
	}
	if err := node.RestoreDir(filepath.Join(dir, "live"), bytes.NewReader(raw)); !errors.Is(err, node.ErrNotEmpty) {
		t.Fatalf("restore into a non-empty dir: %v", err)
	}
	flipped := append([]byte(nil), raw...)
	flipped[len(flipped)/2] ^= 1
	huge := binary.LittleEndian.AppendUint64(append([]byte(nil), raw[:16]...), 1<<40)
	for name, b := range map[string][]byte{"truncated": raw[:len(raw)-40], "cut mid-stream": raw[:len(raw)/2], "flipped": flipped,
		"huge frame": huge, "garbage": bytes.Repeat([]byte("x"), 4096), "empty": nil} {
		if err := restoreBytes(b); err == nil {
			t.Errorf("%s backup restored", name)
		}
	}

	restored := filepath.Join(dir, "restored")
	if err := node.RestoreDir(restored, bytes.NewReader(raw)); err != nil {
		t.Fatal(err)
	}
	rep, err := node.Check(restored)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() || len(rep.Rooms) != 4 || len(rep.Mirrors) != 1 || rep.Mirrors[0].Seq != 2 {
		t.Fatalf("restored dir check: %+v", rep)
	}
	h2 := adptest.StartHostAt(t, node.Config{DataDir: restored, Rates: opsRates()}, clock)
	for id, want := range heads {
		if got := h2.Head(t, alice, id); got != want {
			t.Fatalf("room %s: head %+v after restore, %+v at backup", id, got, want)
		}
	}
	got := h2.Head(t, carol, steady)
	if got.Seq < ackedBefore {
		t.Fatalf("steady room restored at seq %d, %d were acknowledged before the backup began", got.Seq, ackedBefore)
	}
	if w.acked[got.Seq] != got.Hash {
		t.Fatalf("steady room head %+v is not the acknowledged record %q", got, w.acked[got.Seq])
	}
	// It serves reads and takes new writes, in every kind of room.
	ev := adptest.Do(t, http.MethodGet, h2.URL+"/v1/rooms/"+private+"/events?after_seq=0", alice.Token(h2.URL, clock.Ms()), nil)
	if ev.Status != http.StatusOK || !bytes.Contains(ev.Body, []byte("private hello")) {
		t.Fatalf("read private room after restore: %s", ev)
	}
	h2.MustPost(t, alice, pub, "message.create", text("after restore"))
	h2.MustPost(t, bob, restricted, "message.create", text("bob after restore"))
	h2.MustPost(t, alice, private, "message.create", text("private after restore"))
	// And it restarts on the restored dir.
	h3 := h2.Restart(t)
	if got := h3.Head(t, alice, restricted); got.Seq != heads[restricted].Seq+1 {
		t.Fatalf("restricted room after restart: %+v", got)
	}
}
