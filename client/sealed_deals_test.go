//go:build e2e

package client_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dgraph-io/badger/v4"

	"github.com/adpnode/adpnode/adp"
	"github.com/adpnode/adpnode/adp/identity"
	"github.com/adpnode/adpnode/adp/receipt"
	"github.com/adpnode/adpnode/adp/record"
	"github.com/adpnode/adpnode/adp/rounds"
	"github.com/adpnode/adpnode/adp/seal"
	"github.com/adpnode/adpnode/client"
	"github.com/adpnode/adpnode/internal/adptest"
	"github.com/adpnode/adpnode/node"
)

// Rounds and receipts in a member-only room (decision 23): every turn and
// receipt travels sealed, members derive the same rounds and check the
// same receipts as in a hub-trusted room, across a node restart mid-round;
// the host refuses them in the clear; opened events that break the room's
// rules (schema, the 4,000-character text bound, an undeclared type, a
// role) are flagged, and a receipt with one bad signature fails; a removed
// member cannot open the next epoch; and no marker of goal, options, text,
// brief or receipt context is anywhere in the data dir, in Badger's keys
// and values, or in the logs, while a hub-trusted control marker is.
func TestSealedRoundsAndReceipts(t *testing.T) {
	logs := &lockedBuffer{}
	dir := t.TempDir()
	h := adptest.StartHostAt(t, node.Config{DataDir: dir, Log: slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))},
		adptest.NewClock())
	ctx := context.Background()
	a, b, c := newClient(t, h, "sd-alice"), newClient(t, h, "sd-bob"), newClient(t, h, "sd-carol")

	decls := append([]any{map[string]any{"type": "mod.note", "kind": "message", "title": "Moderator note", "roles": []string{"moderator"},
		"schema": map[string]any{"type": "object"}}}, h.BundledPacks(t, rounds.PackID, receipt.PackID)...)
	payload := h.RoomPayload("public")
	payload["types"] = decls
	cr, err := a.CreateSealedRoom(ctx, payload)
	if err != nil {
		t.Fatal(err)
	}
	id := cr.ID
	for _, m := range []*client.Client{b, c} {
		if _, err := m.Join(ctx, id, "speaker", "", ""); err != nil {
			t.Fatal(err)
		}
		if _, err := m.PublishSealKey(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	send := func(cl *client.Client, typ string, p any) *record.Record {
		t.Helper()
		h.Clock.Advance(13_000_000_000) // 13 s: under 5 messages a minute per agent
		rec, err := cl.Send(ctx, id, 10, nil, func(*client.Room, []*record.Record) (string, any, error) { return typ, p, nil })
		if err != nil {
			t.Fatalf("%s: %v", typ, err)
		}
		return rec
	}
	hashOf := func(rec *record.Record) string {
		env, err := identity.ParseEnvelope(rec.Envelope)
		if err != nil {
			t.Fatal(err)
		}
		if env.Event.Type != "message.create" {
			t.Fatalf("a turn went out as %s, not sealed", env.Event.Type)
		}
		return env.Hash
	}
	mGoal, mOpt, mText, mBrief, mCtx := marker(t, "goal"), marker(t, "option"), marker(t, "text"), marker(t, "brief"), marker(t, "context")
	secret := []string{mGoal, mOpt, mText, mBrief, mCtx}

	// Round 1, up to agreed.
	ref := hashOf(send(a, rounds.EventType, rounds.Payload{Type: rounds.Propose, Text: mText, Goal: mGoal, Brief: mBrief,
		Options: []rounds.Option{{ID: "std", Title: mOpt}, {ID: "fast", Title: "Express"}}}))
	send(b, rounds.EventType, rounds.Payload{Type: rounds.Accept, Text: "express", Ref: ref, Choice: "fast"})
	derived := func(cl *client.Client) string {
		t.Helper()
		co, err := cl.Coordination(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		j, _ := json.Marshal(co.Rounds)
		return string(j)
	}
	before := derived(a)
	if r, _ := mustRound(t, a, id, ref); r.State != rounds.Agreed || r.Goal != mGoal || r.Options[0].Title != mOpt {
		t.Fatalf("round 1 before the restart: %+v", r)
	}

	// Restart on the same data dir mid-round: the same state, for the same
	// client and for a new process with the same keys.
	h = h.Restart(t)
	a2 := newClient(t, h, "sd-alice")
	a2.Seal = a.Seal
	if got := derived(a2); got != before {
		t.Fatalf("derived differently after the restart:\n%s\nvs\n%s", got, before)
	}
	if got := derived(a); got != before {
		t.Fatalf("derived differently after the restart (same client):\n%s\nvs\n%s", got, before)
	}
	send(a, rounds.EventType, rounds.Payload{Type: rounds.Confirm, Text: "confirmed", Ref: ref})
	send(a, rounds.EventType, rounds.Payload{Type: rounds.Deliver, Text: "shipped", Ref: ref, Options: []rounds.Option{{ID: "box", Title: "Box", Refs: []string{"https://x.example/box"}}}})
	send(b, rounds.EventType, rounds.Payload{Type: rounds.Complete, Text: "received", Ref: ref})
	if r, _ := mustRound(t, b, id, ref); r.State != rounds.Completed || r.Choice != "fast" {
		t.Fatalf("round 1: %+v", r)
	}

	// Round 2: proposed and cancelled.
	ref2 := hashOf(send(b, rounds.EventType, rounds.Payload{Type: rounds.Propose, Text: "more?", Goal: "more", Options: []rounds.Option{{ID: "x", Title: "X"}}}))
	send(a, rounds.EventType, rounds.Payload{Type: rounds.Cancel, Text: "no", Ref: ref2})
	if r, _ := mustRound(t, c, id, ref2); r.State != rounds.Cancelled {
		t.Fatalf("round 2: %+v", r)
	}

	// A co-signed receipt of this room, and one whose sigB does not verify
	// (its context the marker: sealed, the host never sees it).
	rc := &receipt.Receipt{Type: receipt.Type, PartyA: a.Key.ID.String(), PartyB: b.Key.ID.String(), TermsHash: strings.Repeat("A", 43), Context: id, Ref: ref, TS: 1}
	if rc.Sign(a.Key.Private()) != nil || rc.Sign(b.Key.Private()) != nil {
		t.Fatal("sign")
	}
	good := send(b, receipt.EventType, json.RawMessage(rc.Marshal()))
	bad := *rc
	bad.TS, bad.Context = 2, mCtx
	bad.SigB = rc.SigB // over ts 1
	if bad.Sign(a.Key.Private()) != nil {
		t.Fatal("sign")
	}
	badRec := send(b, receipt.EventType, json.RawMessage(bad.Marshal()))

	// Hostile sealed events, which the host cannot see into: a turn that
	// fails the schema, one over the 4,000-character bound, an undeclared
	// type, and a moderator-only type from a speaker.
	hostile := func(cl *client.Client, typ string, p any) *record.Record {
		raw, _ := json.Marshal(p)
		return send(cl, "message.create", map[string]any{"content_type": seal.EventContentType,
			"content": map[string]any{"type": typ, "payload": json.RawMessage(raw)}})
	}
	schemaBad := hostile(b, rounds.EventType, map[string]any{"type": "accept", "ref": ref2})
	tooLong := hostile(b, rounds.EventType, rounds.Payload{Type: rounds.Propose, Text: strings.Repeat("x", 4001), Goal: "g", Options: []rounds.Option{{ID: "a", Title: "A"}}})
	undeclared := hostile(b, "nope.type", map[string]any{})
	wrongRole := hostile(b, "mod.note", map[string]any{"n": 1})
	okRole := hostile(a, "mod.note", map[string]any{"n": 2}) // the creator may
	signalKind := hostile(b, seal.TypeKey, map[string]any{"public_key": strings.Repeat("A", 43)})
	notObject := send(b, "message.create", map[string]any{"content_type": seal.EventContentType,
		"content": map[string]any{"type": rounds.EventType, "payload": []any{1}}})

	// The host refuses turns and receipts in the clear.
	for _, typ := range []string{rounds.EventType, receipt.EventType} {
		var p any = rounds.Payload{Type: rounds.Propose, Text: "t", Goal: "g", Options: []rounds.Option{{ID: "a", Title: "A"}}}
		if typ == receipt.EventType {
			p = json.RawMessage(rc.Marshal())
		}
		_, err := b.Post(ctx, id, 3, func(*client.Room, []*record.Record) (string, any, error) { return typ, p, nil })
		var e *client.Error
		if !errors.As(err, &e) || e.Code != adp.CodePayloadSchemaViolation || e.Data["reason"] != "seal_required" || e.Data["type"] != typ {
			t.Fatalf("plaintext %s: %v", typ, err)
		}
	}

	co, err := a.Coordination(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if len(co.Rounds.Rounds) != 2 || co.Unopened != 0 {
		t.Fatalf("rounds: %d, unopened %d", len(co.Rounds.Rounds), co.Unopened)
	}
	flagged := map[int64]string{}
	for _, s := range co.Rounds.Orphans {
		flagged[s.Seq] = s.Reason
	}
	for seq, want := range map[int64]string{schemaBad.Seq: "flagged: sealed event: round.turn payload", tooLong.Seq: "flagged: sealed event: round.turn payload"} {
		if !strings.HasPrefix(flagged[seq], want) {
			t.Errorf("turn at seq %d: want %q, got %q", seq, want, flagged[seq])
		}
	}
	if len(co.Receipts) != 2 || co.Receipts[0].Seq != good.Seq || co.Receipts[0].Err != nil || !co.Receipts[0].Sealed ||
		co.Receipts[1].Seq != badRec.Seq || !errors.Is(co.Receipts[1].Receipt.Verify().B, receipt.ErrBad) || co.Receipts[1].Receipt.Verify().A != nil {
		t.Fatalf("receipts: %+v", co.Receipts)
	}
	if len(co.Flagged) != 6 {
		t.Errorf("flagged: %d events, want 6 (schema, bound, undeclared, role, signal kind, not an object)", len(co.Flagged))
	}
	ms, err := a.Messages(ctx, id, 0)
	if err != nil {
		t.Fatal(err)
	}
	bySeq := map[int64]client.Opened{}
	for _, m := range ms {
		bySeq[m.Seq] = m
	}
	for seq, want := range map[int64]string{undeclared.Seq: `type "nope.type" is not defined`, wrongRole.Seq: "role speaker may not send mod.note",
		signalKind.Seq: "is of kind signal, not message", notObject.Seq: "payload must be a JSON object"} {
		if f := bySeq[seq].Flag; f == nil || !strings.Contains(f.Error(), want) {
			t.Errorf("seq %d: want a flag %q, got %v", seq, want, f)
		}
	}
	if o := bySeq[okRole.Seq]; o.Flag != nil || o.Type != "mod.note" {
		t.Errorf("the creator's mod.note: %+v", o)
	}

	// Carol is removed; the next turn starts an epoch she cannot open.
	if _, err := a.Post(ctx, id, 3, func(*client.Room, []*record.Record) (string, any, error) {
		return "room.member.remove", map[string]any{"member": c.Key.ID}, nil
	}); err != nil {
		t.Fatal(err)
	}
	after := send(a, rounds.EventType, rounds.Payload{Type: rounds.Propose, Text: "after carol", Goal: "after", Options: []rounds.Option{{ID: "z", Title: "Z"}}})
	cc, err := c.Coordination(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if cc.Unopened != 1 || len(cc.Rounds.Rounds) != 2 {
		t.Fatalf("removed member: %d rounds, %d unopened", len(cc.Rounds.Rounds), cc.Unopened)
	}
	if o, _, err := c.Open(ctx, id, after); err != nil || !errors.Is(o.Err, seal.ErrOpen) {
		t.Fatalf("removed member opens the next epoch: %+v %v", o, err)
	}
	if co, _ := b.Coordination(ctx, id); co == nil || len(co.Rounds.Rounds) != 3 {
		t.Fatal("bob does not see the round after carol's removal")
	}

	// Positive control: a hub-trusted room with a marked turn.
	control := marker(t, "control")
	pr, err := a.CreateRoom(ctx, map[string]any{"topic": "plain", "visibility": "public", "start_time": h.Clock.Ms(), "end_time": h.Clock.Ms() + 3_600_000, "types": decls[1:]})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Send(ctx, pr.ID, 3, nil, func(*client.Room, []*record.Record) (string, any, error) {
		return rounds.EventType, rounds.Payload{Type: rounds.Propose, Text: control, Goal: control, Options: []rounds.Option{{ID: "a", Title: control}}}, nil
	}); err != nil {
		t.Fatal(err)
	}
	h.Close()

	kv := badgerDump(t, dir)
	if !bytes.Contains(kv, []byte(control)) {
		t.Fatal("control: a hub-trusted turn's marker is not in Badger's keys and values; the grep proves nothing")
	}
	for _, m := range secret {
		if bytes.Contains(kv, []byte(m)) {
			t.Errorf("marker %s in Badger's keys or values", m)
		}
		if hits := filesContaining(t, dir, m); len(hits) > 0 {
			t.Errorf("marker %s in %v", m, hits)
		}
		if bytes.Contains(logs.Bytes(), []byte(m)) {
			t.Errorf("marker %s in the logs", m)
		}
	}
	if len(logs.Bytes()) == 0 {
		t.Fatal("no log output captured")
	}
}

func mustRound(t *testing.T, cl *client.Client, roomID, ref string) (*rounds.Round, *rounds.Result) {
	t.Helper()
	res, _, err := cl.Rounds(context.Background(), roomID)
	if err != nil {
		t.Fatal(err)
	}
	r, ok := res.Round(ref)
	if !ok {
		t.Fatalf("no round %s: %+v", ref, res)
	}
	return r, res
}

// badgerDump returns every key and value (all versions) of every Badger
// store under dir as Badger returns them, decompressed: on disk Snappy can
// split a marker across blocks, so a file grep alone could miss one.
func badgerDump(t *testing.T, dir string) []byte {
	t.Helper()
	var dbs []string
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && d.Name() == badger.ManifestFilename {
			dbs = append(dbs, filepath.Dir(p))
		}
		return nil
	})
	if len(dbs) == 0 {
		t.Fatal("no Badger store in the data dir")
	}
	var out bytes.Buffer
	for _, p := range dbs {
		db, err := badger.Open(node.BadgerOptions(p).WithReadOnly(false))
		if err != nil {
			t.Fatal(err)
		}
		err = db.View(func(txn *badger.Txn) error {
			opt := badger.DefaultIteratorOptions
			opt.AllVersions = true
			it := txn.NewIterator(opt)
			defer it.Close()
			for it.Rewind(); it.Valid(); it.Next() {
				out.Write(it.Item().KeyCopy(nil))
				out.WriteByte(0)
				v, err := it.Item().ValueCopy(nil)
				if err != nil {
					return err
				}
				out.Write(v)
				out.WriteByte(0)
			}
			return nil
		})
		if cerr := db.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return out.Bytes()
}
