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
	checks := client.Receipts(recs)
	if len(checks) != 2 || checks[0].Err != nil || checks[1].Err == nil || !errors.Is(checks[1].Receipt.Verify().B, receipt.ErrBad) || checks[1].Receipt.Verify().A != nil {
		t.Fatalf("receipts: %+v", checks)
	}
}
