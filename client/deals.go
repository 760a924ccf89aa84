package client

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/adpnode/adpnode/adp/identity"
	"github.com/adpnode/adpnode/adp/receipt"
	"github.com/adpnode/adpnode/adp/record"
	"github.com/adpnode/adpnode/adp/rounds"
	"github.com/adpnode/adpnode/adp/types"
)

// BundledPack returns the type declaration that imports the bundled pack
// id (adpnode:coordination/1.0, adpnode:deal/1.0) as served by origin:
// {"pack": "<origin>/v1/packs/<name>", "digest": "sha256:..."}.
func BundledPack(origin, id string) (json.RawMessage, error) {
	b, ok := types.BundledPackByID(id)
	if !ok {
		return nil, fmt.Errorf("no bundled pack %q", id)
	}
	return b.Declaration(origin), nil
}

// Rounds reads a room's history and derives its coordination rounds
// (adp/rounds): forward-only states, ignored turns with their reasons.
func (c *Client) Rounds(ctx context.Context, roomID string) (*rounds.Result, []*record.Record, error) {
	recs, err := c.History(ctx, roomID, 0)
	if err != nil {
		return nil, nil, err
	}
	return rounds.Derive(rounds.FromRecords(recs)), recs, nil
}

// ReceiptCheck is one deal.receipt event and its verdict.
type ReceiptCheck struct {
	Seq     int64
	Event   string // the event hash
	Actor   identity.AgentID
	Raw     json.RawMessage // the payload
	Receipt *receipt.Receipt
	Err     error // nil: well formed and co-signed by both parties
}

// Receipts checks every deal.receipt event in recs.
func Receipts(recs []*record.Record) []ReceiptCheck {
	var out []ReceiptCheck
	for _, rec := range recs {
		env, err := identity.ParseEnvelope(rec.Envelope)
		if err != nil || env.Event.Type != receipt.EventType {
			continue
		}
		r, err := receipt.Check(env.Event.Payload)
		out = append(out, ReceiptCheck{Seq: rec.Seq, Event: env.Hash, Actor: env.Event.Actor, Raw: env.Event.Payload, Receipt: r, Err: err})
	}
	return out
}
