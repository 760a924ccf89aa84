package client

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/adpnode/adpnode/adp/identity"
	"github.com/adpnode/adpnode/adp/receipt"
	"github.com/adpnode/adpnode/adp/record"
	"github.com/adpnode/adpnode/adp/rounds"
	"github.com/adpnode/adpnode/adp/seal"
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

// Coordination is what a room's rounds and receipts are, as this agent
// reads them: in a member-only room from the sealed turns and receipts it
// opens, exactly as from plaintext ones in a hub-trusted room.
type Coordination struct {
	Rounds   *rounds.Result
	Receipts []ReceiptCheck
	Records  []*record.Record
	// Unopened counts sealed records this agent cannot open (epochs it was
	// not given); what they hold is not in Rounds or Receipts.
	Unopened int
	// Flagged lists the opened sealed events that fail the room's rules
	// (seal.Event.Flag), whatever their type; flagged turns are also among
	// the rounds' ignored turns, and flagged receipts fail in Receipts.
	Flagged []seal.Event
}

// Coordination reads a room's history once and derives its rounds and
// checks its receipts. A sealed event that fails the room's rules when
// opened (seal.Event.Flag) is flagged: an ignored turn with the reason, a
// receipt with Err; it never moves a round or counts as co-signed.
func (c *Client) Coordination(ctx context.Context, roomID string) (*Coordination, error) {
	evs, recs, unopened, err := c.CustomEvents(ctx, roomID)
	if err != nil {
		return nil, err
	}
	res := rounds.Derive(TurnsOf(evs))
	co := &Coordination{Rounds: res, Receipts: checkReceipts(roomID, res, evs), Records: recs, Unopened: unopened}
	for _, e := range evs {
		if e.Flag != nil {
			co.Flagged = append(co.Flagged, e)
		}
	}
	return co, nil
}

// Rounds reads a room's history and derives its coordination rounds
// (adp/rounds): forward-only states, ignored turns with their reasons.
func (c *Client) Rounds(ctx context.Context, roomID string) (*rounds.Result, []*record.Record, error) {
	co, err := c.Coordination(ctx, roomID)
	if err != nil {
		return nil, nil, err
	}
	return co.Rounds, co.Records, nil
}

// TurnsOf returns the round.turn events of evs as turns for rounds.Derive.
// A flagged sealed turn keeps its flag as the turn's error, so Derive lists
// it as ignored with the reason.
func TurnsOf(evs []seal.Event) []rounds.Turn {
	var out []rounds.Turn
	for _, e := range evs {
		if e.Type == rounds.EventType {
			out = append(out, rounds.NewTurn(e.Seq, e.Hash, string(e.Actor), e.CreatedAt, e.Payload, e.Flag))
		}
	}
	return out
}

// ReceiptCheck is one deal.receipt event and its verdict.
type ReceiptCheck struct {
	Seq     int64
	Event   string // the event hash
	Actor   identity.AgentID
	Raw     json.RawMessage  // the payload
	Sealed  bool             // sent sealed and opened
	Receipt *receipt.Receipt // nil when the payload does not parse
	Err     error            // nil: co-signed by both parties and counts in this room (receipt.CheckIn)
}

// Receipts checks every deal.receipt event in the clear in recs, the
// records of room roomID (ReceiptsOf).
func Receipts(roomID string, recs []*record.Record) []ReceiptCheck {
	evs, _ := seal.Events(recs, nil, nil)
	return ReceiptsOf(roomID, evs)
}

// ReceiptsOf checks every deal.receipt in evs, the events of room roomID
// (in the clear, or opened by this agent) with receipt.CheckIn: both
// signatures, and that the receipt counts in this room, for a round of
// evs agreed before it, signed by that round's two parties. A sealed one
// must first pass the room's rules (a flagged receipt fails).
func ReceiptsOf(roomID string, evs []seal.Event) []ReceiptCheck {
	return checkReceipts(roomID, rounds.Derive(TurnsOf(evs)), evs)
}

func checkReceipts(roomID string, res *rounds.Result, evs []seal.Event) []ReceiptCheck {
	var out []ReceiptCheck
	for _, e := range evs {
		if e.Type != receipt.EventType {
			continue
		}
		rc := ReceiptCheck{Seq: e.Seq, Event: e.Hash, Actor: e.Actor, Raw: e.Payload, Sealed: e.Sealed}
		if e.Flag != nil {
			rc.Err = fmt.Errorf("flagged: %v", e.Flag)
		} else {
			rc.Receipt, rc.Err = receipt.CheckIn(roomID, e.Seq, res, e.Payload)
		}
		out = append(out, rc)
	}
	return out
}
