//go:build e2e

package client_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/dgraph-io/badger/v4"

	"github.com/adpnode/adpnode/adp"
	"github.com/adpnode/adpnode/adp/identity"
	"github.com/adpnode/adpnode/adp/record"
	"github.com/adpnode/adpnode/adp/seal"
	"github.com/adpnode/adpnode/client"
	"github.com/adpnode/adpnode/internal/adptest"
	"github.com/adpnode/adpnode/node"
)

// lockedBuffer collects slog output from the node's goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) Bytes() []byte {
	l.mu.Lock()
	defer l.mu.Unlock()
	return bytes.Clone(l.b.Bytes())
}

func marker(t *testing.T, what string) string {
	b := make([]byte, 12)
	rand.Read(b)
	return "MARK-" + what + "-" + hex.EncodeToString(b)
}

// filesContaining lists the files under dir whose bytes contain s.
func filesContaining(t *testing.T, dir, s string) []string {
	t.Helper()
	var hits []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if bytes.Contains(b, []byte(s)) {
			hits = append(hits, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return hits
}

func post(t *testing.T, c *client.Client, roomID, typ string, payload any) error {
	t.Helper()
	_, err := c.Post(context.Background(), roomID, 3, func(*client.Room, []*record.Record) (string, any, error) { return typ, payload, nil })
	return err
}

func wantRefusal(t *testing.T, what string, err error, code adp.Code, reason string) {
	t.Helper()
	var e *client.Error
	if !errors.As(err, &e) || e.Code != code || e.Data["reason"] != reason {
		t.Fatalf("%s: want %s/%s, got %v (data %v)", what, code, reason, err, e)
	}
}

func opened(t *testing.T, c *client.Client, roomID string) map[string]client.Opened {
	t.Helper()
	ms, err := c.Messages(context.Background(), roomID, 0)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]client.Opened{}
	for _, m := range ms {
		var s string
		if m.Err == nil && json.Unmarshal(m.Content, &s) == nil {
			out[s] = m
		} else {
			out[fmt.Sprintf("seq %d", m.Seq)] = m
		}
	}
	return out
}

// A member-only room end to end: members seal and open transparently, a
// removed member opens the epochs it had and not the next one, the host
// refuses hostile writes with clear errors, keeps working across a
// restart, and neither its data dir (after a close and a compaction) nor
// its logs hold any plaintext.
func TestSealedRoomHostHoldsNoPlaintext(t *testing.T) {
	logs := &lockedBuffer{}
	dir := t.TempDir()
	h := adptest.StartHostAt(t, node.Config{DataDir: dir, Log: slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))},
		adptest.NewClock())
	ctx := context.Background()
	owner, a, b, obs := newClient(t, h, "seal-owner"), newClient(t, h, "seal-a"), newClient(t, h, "seal-b"), newClient(t, h, "seal-obs")

	if d := adptest.Do(t, "GET", h.URL+"/.well-known/agent-discourse", "", nil); !bytes.Contains(d.Body, []byte(`"x-sealed-rooms"`)) {
		t.Fatalf("discovery does not list x-sealed-rooms: %s", d)
	}
	// A member-only room must declare the seal types, and the setting must be known.
	bare := h.RoomPayload("public")
	bare["policy"] = map[string]any{"extra": map[string]any{"confidentiality": "member-only"}}
	if _, err := owner.CreateRoom(ctx, bare); client.CodeOf(err) != adp.CodeInvalidEvent {
		t.Fatalf("member-only room without the seal types: %v", err)
	}
	bare["policy"] = map[string]any{"extra": map[string]any{"confidentiality": "secret"}}
	if _, err := owner.CreateRoom(ctx, bare); client.CodeOf(err) != adp.CodeInvalidEvent {
		t.Fatalf("unknown confidentiality: %v", err)
	}
	cr, err := owner.CreateSealedRoom(ctx, h.RoomPayload("public"))
	if err != nil {
		t.Fatal(err)
	}
	id := cr.ID
	// a keeps its sealing keys in a file beside its agent key.
	aKeys := client.SealKeyPath(filepath.Join(t.TempDir(), "a.key"))
	if a.Seal, err = client.LoadOrCreateSealKeys(aKeys, a.Key.ID); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(aKeys); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("sealing key file: %v %v", fi.Mode(), err)
	}
	for _, m := range []*client.Client{a, b} {
		if _, err := m.Join(ctx, id, "speaker", "", ""); err != nil {
			t.Fatal(err)
		}
		if _, err := m.PublishSealKey(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	// An observer without a published key does not hold the room up.
	if _, err := obs.Join(ctx, id, "observer", "", ""); err != nil {
		t.Fatal(err)
	}

	m1, m2, m3, m4 := marker(t, "one"), marker(t, "two"), marker(t, "three"), marker(t, "four")
	if _, err := owner.Message(ctx, id, "text/plain", m1); err != nil { // rotates to epoch 1
		t.Fatal(err)
	}
	for _, m := range []*client.Client{owner, a, b} {
		got := opened(t, m, id)[m1]
		if !got.Sealed || got.Epoch != 1 || got.Err != nil || got.ContentType != "text/plain" {
			t.Fatalf("%s opens message 1: %+v", m.Key.ID, got)
		}
	}
	// The observer published no key: it sees that the message is sealed
	// and cannot open it.
	for _, m := range opened(t, obs, id) {
		if !m.Sealed || !errors.Is(m.Err, seal.ErrOpen) {
			t.Fatalf("observer without a key: %+v", m)
		}
	}

	// b is removed; the next message starts epoch 2 without b.
	if err := post(t, owner, id, "room.member.remove", map[string]any{"member": b.Key.ID}); err != nil {
		t.Fatal(err)
	}
	// The host refuses the stale epoch with a clear error...
	stale, _ := json.Marshal(mustSealed(t, owner, id, 1))
	wantRefusal(t, "message in the epoch of a removed member", post(t, a, id, "message.create", json.RawMessage(stale)),
		adp.CodePermissionDenied, "seal_rotation_required")
	// ... and an epoch that still wraps for b.
	wantRefusal(t, "wrap for a non-member", post(t, owner, id, seal.TypeEpoch, epochFor(t, id, 2, a, owner, b)),
		adp.CodePermissionDenied, "seal_wraps_mismatch")
	if _, err := a.Message(ctx, id, "text/plain", m2); err != nil { // a rotates to epoch 2
		t.Fatal(err)
	}
	if got := opened(t, owner, id)[m2]; got.Epoch != 2 || got.Err != nil {
		t.Fatalf("owner opens message 2: %+v", got)
	}
	bv := opened(t, b, id)
	if got := bv[m1]; got.Err != nil {
		t.Fatalf("removed member opens its epoch: %+v", got)
	}
	var bFailed bool
	for k, m := range bv {
		if m.Epoch == 2 {
			if !errors.Is(m.Err, seal.ErrOpen) || strings.HasPrefix(k, "MARK") {
				t.Fatalf("removed member opened epoch 2: %q %+v", k, m)
			}
			bFailed = true
		}
	}
	if !bFailed {
		t.Fatal("b saw no epoch 2 message")
	}

	// Hostile writes, each with a clear error.
	wantRefusal(t, "plaintext in a member-only room", post(t, a, id, "message.create", map[string]any{"content_type": "text/plain", "content": m4}),
		adp.CodePayloadSchemaViolation, "seal_required")
	old, _ := json.Marshal(mustSealed(t, owner, id, 1))
	wantRefusal(t, "sealed message for a stale epoch", post(t, owner, id, "message.create", json.RawMessage(old)),
		adp.CodePermissionDenied, "seal_epoch_stale")
	wantRefusal(t, "malformed ciphertext", post(t, owner, id, "message.create", map[string]any{"content_type": seal.ContentType,
		"content": map[string]any{"epoch": 2, "nonce": "short", "ciphertext": "AAAA"}}), adp.CodePayloadSchemaViolation, "seal_shape")
	wantRefusal(t, "bad public key", post(t, obs, id, seal.TypeKey, map[string]any{"public_key": identity.EncodeB64(make([]byte, 32))}),
		adp.CodePayloadSchemaViolation, "seal_shape")
	wantRefusal(t, "turning the room hub-trusted", post(t, owner, id, "room.update", map[string]any{"policy": map[string]any{}}),
		adp.CodePermissionDenied, "seal_mode_fixed")
	big := strings.Repeat("A", 70_000)
	if err := post(t, owner, id, "message.create", map[string]any{"content_type": seal.ContentType,
		"content": map[string]any{"epoch": 2, "nonce": strings.Repeat("A", 32), "ciphertext": big}}); client.CodeOf(err) != adp.CodePayloadTooLarge {
		t.Fatalf("oversized ciphertext: %v", err)
	}

	// Restart mid-room: the host folds the room's keys and epoch again
	// and accepts the current epoch without a rotation.
	h = h.Restart(t)
	if _, err := owner.Message(ctx, id, "text/plain", m3); err != nil {
		t.Fatal(err)
	}
	if got := opened(t, a, id)[m3]; got.Epoch != 2 || got.Err != nil {
		t.Fatalf("a opens message 3 after the restart: %+v", got)
	}
	// A new process of a, with its sealing keys from disk, reads everything it was given.
	a2 := newClient(t, h, "seal-a")
	if a2.Seal, err = client.LoadOrCreateSealKeys(aKeys, a2.Key.ID); err != nil {
		t.Fatal(err)
	}
	got := opened(t, a2, id)
	for _, m := range []string{m1, m2, m3} {
		if got[m].Err != nil || !got[m].Sealed {
			t.Fatalf("a's next process opens %s: %+v", m, got[m])
		}
	}

	// Positive control: a hub-trusted room's marker is found by the same grep.
	control := marker(t, "control")
	pc := newClient(t, h, "plain-client")
	pr, err := pc.CreateRoom(ctx, h.RoomPayload("public"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pc.Message(ctx, pr.ID, "text/plain", control); err != nil {
		t.Fatal(err)
	}
	h.Close()
	// Compact the closed store: every level flattened, value logs rewritten.
	db, err := badger.Open(badger.DefaultOptions(dir).WithLogger(nil))
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Flatten(2); err != nil {
		t.Fatal(err)
	}
	for db.RunValueLogGC(0.01) == nil {
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	if hits := filesContaining(t, dir, control); len(hits) == 0 {
		t.Fatal("control: the plaintext of a hub-trusted room is not found in the data dir; the grep proves nothing")
	}
	for _, m := range []string{m1, m2, m3, m4} {
		if hits := filesContaining(t, dir, m); len(hits) > 0 {
			t.Errorf("plaintext %s found in %v", m, hits)
		}
		if bytes.Contains(logs.Bytes(), []byte(m)) {
			t.Errorf("plaintext %s found in the logs", m)
		}
	}
	if len(logs.Bytes()) == 0 {
		t.Fatal("no log output captured")
	}
}

// mustSealed builds a sealed payload for an epoch without the key (the
// host cannot tell): a well-formed shape naming that epoch.
func mustSealed(t *testing.T, c *client.Client, roomID string, epoch int64) *seal.SealedPayload {
	t.Helper()
	p, err := seal.SealMessage(rand.Reader, make([]byte, 32), roomID, epoch, c.Key.ID, seal.Inner{ContentType: "text/plain", Content: json.RawMessage(`"x"`)})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// epochFor builds a seal.epoch wrapping fresh keys for the given clients'
// published keys (key_seq read from the room).
func epochFor(t *testing.T, roomID string, epoch int64, cs ...*client.Client) *seal.EpochPayload {
	t.Helper()
	recs, err := cs[0].History(context.Background(), roomID, 0)
	if err != nil {
		t.Fatal(err)
	}
	var st seal.RoomState
	for _, r := range recs {
		var env struct {
			Event struct {
				Type    string           `json:"type"`
				Actor   identity.AgentID `json:"actor"`
				Payload json.RawMessage  `json:"payload"`
			} `json:"event"`
		}
		json.Unmarshal(r.Envelope, &env)
		st.Apply(r.Seq, env.Event.Actor, env.Event.Type, env.Event.Payload)
	}
	var ids []identity.AgentID
	for _, c := range cs {
		ids = append(ids, c.Key.ID)
	}
	p, _, err := seal.NewEpoch(rand.Reader, roomID, epoch, st.Recipients(ids))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// In a restricted member-only room the epoch's members come from the
// client's own kernel replay of the signed records (join requests,
// reviews, joins), and an approved member reads what is sealed after it
// joined, not before.
func TestSealedRestrictedRoom(t *testing.T) {
	h := adptest.StartHost(t, node.Config{})
	ctx := context.Background()
	owner, bob := newClient(t, h, "r-owner"), newClient(t, h, "r-bob")
	cr, err := owner.CreateSealedRoom(ctx, h.RoomPayload("restricted"))
	if err != nil {
		t.Fatal(err)
	}
	before := marker(t, "before")
	if _, err := owner.Message(ctx, cr.ID, "text/plain", before); err != nil {
		t.Fatal(err)
	}
	jr, err := bob.RequestJoin(ctx, cr.ID, "speaker", "", "let me in")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := owner.Review(ctx, cr.ID, jr, true, "speaker", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := bob.Join(ctx, cr.ID, "speaker", "", jr.ID()); err != nil {
		t.Fatal(err)
	}
	if _, err := bob.PublishSealKey(ctx, cr.ID); err != nil {
		t.Fatal(err)
	}
	after := marker(t, "after")
	if _, err := owner.Message(ctx, cr.ID, "text/plain", after); err != nil {
		t.Fatal(err)
	}
	got := opened(t, bob, cr.ID)
	if m := got[after]; m.Err != nil || m.Epoch != 2 {
		t.Fatalf("bob opens the message after joining: %+v", m)
	}
	if _, ok := got[before]; ok {
		t.Fatal("bob opened a message sealed before he joined")
	}
	if len(got) != 2 {
		t.Fatalf("bob sees %d messages", len(got))
	}
}

// Bound on cost: an epoch grows by under 200 bytes per member with a key;
// seal.epoch's max_payload_hint (256 KiB) lets an epoch for a room larger
// than the 64 KiB payload default through (336 members here, about
// 65 KiB), while a message.create stays under the 64 KiB default.
func TestSealedEpochForALargeRoom(t *testing.T) {
	h := adptest.StartHost(t, node.Config{})
	ctx := context.Background()
	owner := newClient(t, h, "big-owner")
	cr, err := owner.CreateSealedRoom(ctx, h.RoomPayload("public"))
	if err != nil {
		t.Fatal(err)
	}
	const members = 335
	for i := 0; i < members; i++ {
		a := adptest.NewAgent(fmt.Sprintf("big-%d", i))
		k, err := seal.GenerateKey(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		// Signals may anchor to any record: both anchor to room.create.
		for _, w := range []struct {
			typ     string
			payload any
		}{{"room.join", map[string]any{"role": "observer"}}, {seal.TypeKey, seal.KeyPayload{PublicKey: identity.EncodeB64(k.Public())}}} {
			if _, err := h.Node.Submit(ctx, a.Envelope(h.Clock.Ms(), w.typ, cr.ID, 1, cr.Hash, w.payload), cr.ID); err != nil {
				t.Fatalf("%s by %s: %v", w.typ, a.Name, err)
			}
		}
	}
	epoch, err := owner.RotateEpoch(ctx, cr.ID, false)
	if err != nil || epoch != 1 {
		t.Fatalf("rotate: %d %v", epoch, err)
	}
	recs, err := owner.History(ctx, cr.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	var size int
	for _, r := range recs {
		var env struct {
			Event struct {
				Type    string          `json:"type"`
				Payload json.RawMessage `json:"payload"`
			} `json:"event"`
		}
		json.Unmarshal(r.Envelope, &env)
		if env.Event.Type == seal.TypeEpoch {
			size = len(env.Event.Payload)
		}
	}
	if size <= 64<<10 || size > 100+200*(members+1) {
		t.Fatalf("epoch for %d members: %d bytes", members+1, size)
	}
	t.Logf("epoch for %d members: %d bytes (%d per member)", members+1, size, size/(members+1))
	if _, err := owner.Message(ctx, cr.ID, "text/plain", "hello, large room"); err != nil {
		t.Fatal(err)
	}
}

// SealedRoomPayload keeps the caller's policy, extra and type declarations
// whatever Go types hold them.
func TestSealedRoomPayloadKeepsFields(t *testing.T) {
	p, err := client.SealedRoomPayload(map[string]any{"topic": "t",
		"policy": map[string]any{"max_speakers": 3, "extra": map[string]string{"app": "x"}},
		"types":  []map[string]any{{"use": "adp:reactions/1.0"}}})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(p)
	for _, want := range []string{`"max_speakers":3`, `"app":"x"`, `"confidentiality":"member-only"`, `"use":"adp:reactions/1.0"`, `"type":"seal.key"`, `"type":"seal.epoch"`, `"topic":"t"`} {
		if !bytes.Contains(b, []byte(want)) {
			t.Errorf("payload lacks %s: %s", want, b)
		}
	}
	if _, err := client.SealedRoomPayload([]int{1}); err == nil {
		t.Error("a non-object payload was accepted")
	}
	if _, err := client.SealedRoomPayload(map[string]any{"policy": "open"}); err == nil {
		t.Error("a non-object policy was accepted")
	}
}
