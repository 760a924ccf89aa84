//go:build e2e

package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/adpnode/adpnode/adp/receipt"
	"github.com/adpnode/adpnode/adp/record"
	"github.com/adpnode/adpnode/adp/rounds"
	"github.com/adpnode/adpnode/client"
	"github.com/adpnode/adpnode/internal/adptest"
	"github.com/adpnode/adpnode/node"
)

// The client derives a room's rounds and checks its receipts: a round
// through completion, a backward turn ignored, one co-signed receipt and
// one whose sigB does not verify, flagged as such.
func TestClientRoundsAndReceipts(t *testing.T) {
	h := adptest.StartHost(t, node.Config{})
	ctx := context.Background()
	a, b := newClient(t, h, "a"), newClient(t, h, "b")
	now := h.Clock.Ms()
	var decls []any
	for _, id := range []string{rounds.PackID, receipt.PackID} {
		d, err := client.BundledPack(h.URL, id)
		if err != nil {
			t.Fatal(err)
		}
		decls = append(decls, d)
	}
	if _, err := client.BundledPack(h.URL, "adpnode:nope/1.0"); err == nil {
		t.Fatal("unknown bundled pack")
	}
	created, err := a.CreateRoom(ctx, map[string]any{"topic": "deal", "visibility": "public", "start_time": now, "end_time": now + 3_600_000, "types": decls})
	if err != nil {
		t.Fatal(err)
	}
	id := created.ID
	post := func(c *client.Client, typ string, p any) *record.Record {
		t.Helper()
		rec, err := c.Post(ctx, id, 5, func(*client.Room, []*record.Record) (string, any, error) { return typ, p, nil })
		if err != nil {
			t.Fatal(err)
		}
		return rec
	}
	post(b, "room.join", map[string]any{"role": "speaker"})
	rec := post(a, rounds.EventType, rounds.Payload{Type: rounds.Propose, Text: "t", Goal: "g", Options: []rounds.Option{{ID: "x", Title: "X"}}})
	turns := rounds.FromRecords([]*record.Record{rec})
	ref := turns[0].Hash
	post(b, rounds.EventType, rounds.Payload{Type: rounds.Accept, Text: "ok", Ref: ref, Choice: "x"})
	post(b, rounds.EventType, rounds.Payload{Type: rounds.Counter, Text: "no, wait", Ref: ref, Options: []rounds.Option{{ID: "y", Title: "Y"}}})
	post(a, rounds.EventType, rounds.Payload{Type: rounds.Confirm, Text: "c", Ref: ref})
	post(a, rounds.EventType, rounds.Payload{Type: rounds.Deliver, Text: "d", Ref: ref, Options: []rounds.Option{{ID: "box", Title: "Box", Refs: []string{"https://x.example/box"}}}})
	post(b, rounds.EventType, rounds.Payload{Type: rounds.Complete, Text: "done", Ref: ref})

	rc := &receipt.Receipt{Type: receipt.Type, PartyA: a.Key.ID.String(), PartyB: b.Key.ID.String(), TermsHash: strings.Repeat("A", 43), Context: id, Ref: ref, TS: 1}
	if rc.Sign(a.Key.Private()) != nil || rc.Sign(b.Key.Private()) != nil {
		t.Fatal("sign")
	}
	post(b, receipt.EventType, json.RawMessage(rc.Marshal()))
	bad := *rc
	bad.SigB = bad.SigA
	post(b, receipt.EventType, json.RawMessage(bad.Marshal()))

	res, recs, err := a.Rounds(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	r, ok := res.Round(ref)
	if !ok || r.State != rounds.Completed || len(res.Rounds) != 1 {
		t.Fatalf("rounds: %+v", res)
	}
	if s := r.Steps[2]; !s.Ignored || !strings.Contains(s.Reason, "back from agreed to open") {
		t.Fatalf("backward counter: %+v", s)
	}
	checks := client.Receipts(id, recs)
	if len(checks) != 2 || checks[0].Err != nil || checks[1].Err == nil || !errors.Is(checks[1].Receipt.Verify().B, receipt.ErrBad) || checks[1].Receipt.Verify().A != nil {
		t.Fatalf("receipts: %+v", checks)
	}
}

// Property: a receipt counts only in the room it names, for a round that
// exists there and was agreed, signed by that round's two parties. The
// room's co-signed receipt replayed into another room of the same two
// agents, one naming a missing round, one naming an open round, one
// posted before its round's accept, and one signed by a third party are
// each flagged by the client (Coordination and Receipts alike), never
// counted as co-signed.
func TestClientReceiptCountsOnlyInItsRoom(t *testing.T) {
	h := adptest.StartHost(t, node.Config{Rates: highRates()})
	ctx := context.Background()
	a, b, c := newClient(t, h, "ra"), newClient(t, h, "rb"), newClient(t, h, "rc")
	var decls []any
	for _, pid := range []string{rounds.PackID, receipt.PackID} {
		d, err := client.BundledPack(h.URL, pid)
		if err != nil {
			t.Fatal(err)
		}
		decls = append(decls, d)
	}
	now := h.Clock.Ms()
	room := func() string {
		created, err := a.CreateRoom(ctx, map[string]any{"topic": "deal", "visibility": "public", "start_time": now, "end_time": now + 3_600_000, "types": decls})
		if err != nil {
			t.Fatal(err)
		}
		return created.ID
	}
	id, other := room(), room()
	post := func(cl *client.Client, room, typ string, p any) *record.Record {
		t.Helper()
		rec, err := cl.Post(ctx, room, 5, func(*client.Room, []*record.Record) (string, any, error) { return typ, p, nil })
		if err != nil {
			t.Fatal(err)
		}
		return rec
	}
	for _, r := range []string{id, other} {
		post(b, r, "room.join", map[string]any{"role": "speaker"})
		post(c, r, "room.join", map[string]any{"role": "speaker"})
	}
	propose := func(room string) string {
		rec := post(a, room, rounds.EventType, rounds.Payload{Type: rounds.Propose, Text: "t", Goal: "g", Options: []rounds.Option{{ID: "x", Title: "X"}}})
		return rounds.FromRecords([]*record.Record{rec})[0].Hash
	}
	signed := func(room, ref string, p, q *client.Client) json.RawMessage {
		rc := &receipt.Receipt{Type: receipt.Type, PartyA: p.Key.ID.String(), PartyB: q.Key.ID.String(), TermsHash: strings.Repeat("A", 43), Context: room, Ref: ref, TS: 1}
		if rc.Sign(p.Key.Private()) != nil || rc.Sign(q.Key.Private()) != nil {
			t.Fatal("sign")
		}
		return json.RawMessage(rc.Marshal())
	}
	r1 := propose(id)
	post(b, id, rounds.EventType, rounds.Payload{Type: rounds.Accept, Text: "ok", Ref: r1, Choice: "x"})
	good := signed(id, r1, a, b)
	post(b, id, receipt.EventType, good)
	post(b, id, receipt.EventType, signed(id, strings.Repeat("B", 42)+"A", a, b)) // a missing round
	open := propose(id)
	post(b, id, receipt.EventType, signed(id, open, a, b)) // an open round
	late := propose(id)
	post(b, id, receipt.EventType, signed(id, late, a, b)) // before the accept
	post(b, id, rounds.EventType, rounds.Payload{Type: rounds.Accept, Text: "ok", Ref: late, Choice: "x"})
	post(c, id, receipt.EventType, signed(id, r1, a, c)) // a third party
	// The good receipt, replayed into another room of the same agents,
	// which even has an agreed round of its own between them.
	r2 := propose(other)
	post(b, other, rounds.EventType, rounds.Payload{Type: rounds.Accept, Text: "ok", Ref: r2, Choice: "x"})
	post(c, other, receipt.EventType, good)

	want := []error{nil, receipt.ErrNoRound, receipt.ErrNotAgreed, receipt.ErrNotAgreed, receipt.ErrNotParties}
	co, err := b.Coordination(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	for _, checks := range [][]client.ReceiptCheck{co.Receipts, client.Receipts(id, co.Records)} {
		if len(checks) != len(want) {
			t.Fatalf("receipts: %+v", checks)
		}
		for i, w := range want {
			if !errors.Is(checks[i].Err, w) || (w == nil) != (checks[i].Err == nil) || !checks[i].Receipt.Verify().OK() {
				t.Errorf("receipt %d (seq %d): %v, want %v", i, checks[i].Seq, checks[i].Err, w)
			}
		}
	}
	co, err = c.Coordination(ctx, other)
	if err != nil {
		t.Fatal(err)
	}
	if len(co.Receipts) != 1 || !errors.Is(co.Receipts[0].Err, receipt.ErrOtherRoom) {
		t.Fatalf("replayed receipt: %+v", co.Receipts)
	}
}
