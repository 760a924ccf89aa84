package adpmcp

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/adpnode/adpnode/adp/identity"
	"github.com/adpnode/adpnode/adp/receipt"
	"github.com/adpnode/adpnode/adp/record"
	"github.com/adpnode/adpnode/adp/rounds"
	"github.com/adpnode/adpnode/client"
)

// Coordination rounds and deal receipts (the bundled packs
// adpnode:coordination/1.0 and adpnode:deal/1.0, docs/coordination.md):
// the rules are adp/rounds and adp/receipt, as for the CLI.

func (s *Server) addRoundTools() {
	tool(s, "propose_round", "Open a coordination round (the room must import adpnode:coordination/1.0): a goal and options for the others to counter or accept. Returns the round_id.", s.proposeRound)
	tool(s, "respond_round", "Take the next turn in a round: counter (new options), accept (choice), confirm, deliver (deliverables as options with refs), complete or cancel.", s.respondRound)
	tool(s, "list_rounds", "List a room's coordination rounds with their state, options, choice and ignored turns, and its deal receipts with their verdicts.", s.listRounds)
	tool(s, "draft_receipt", "Draft and sign, as partyA, the deal receipt of an agreed round; the other party of the round is partyB. Give partyB the receipt, the terms and the salt (never post the terms or salt).", s.draftReceipt)
	tool(s, "sign_receipt", "Check a receipt against your copy of the terms and salt and the other party's signature, then add your signature.", s.signReceipt)
	tool(s, "post_receipt", "Post a co-signed deal receipt to its room (refused unless both signatures verify; posted once).", s.postReceipt)
	tool(s, "verify_receipt", "Check a deal receipt's shape and both parties' signatures.", s.verifyReceipt)
}

type RoundOption struct {
	ID      string         `json:"id"`
	Title   string         `json:"title"`
	Summary string         `json:"summary,omitempty"`
	Fields  map[string]any `json:"fields,omitempty"`
	Refs    []string       `json:"refs,omitempty"`
}

type ProposeIn struct {
	Room       string        `json:"room"`
	Goal       string        `json:"goal"`
	Text       string        `json:"text,omitempty"`
	Options    []RoundOption `json:"options" jsonschema:"at least one option"`
	DueSeconds int64         `json:"due_seconds,omitempty" jsonschema:"deadline from now, in seconds"`
	OnTimeout  string        `json:"on_timeout,omitempty" jsonschema:"hold (default) or cancel"`
	Recommend  string        `json:"recommend,omitempty" jsonschema:"the option id you recommend"`
}

type RoundOut struct {
	RoomID  string `json:"room_id"`
	RoundID string `json:"round_id"`
	Seq     int64  `json:"seq,omitempty"`
	State   string `json:"state"`
	Note    string `json:"note,omitempty"`
}

func toOptions(in []RoundOption) []rounds.Option {
	out := make([]rounds.Option, 0, len(in))
	for _, o := range in {
		out = append(out, rounds.Option{ID: o.ID, Title: o.Title, Summary: o.Summary, Fields: o.Fields, Refs: o.Refs})
	}
	return out
}

func (s *Server) proposeRound(ctx context.Context, _ *mcp.CallToolRequest, in ProposeIn) (RoundOut, string, error) {
	rr, err := s.resolve(in.Room)
	if err != nil {
		return RoundOut{}, "", err
	}
	if len(in.Options) == 0 || in.Goal == "" {
		return RoundOut{}, "", invalid("a round needs a goal and at least one option")
	}
	p := rounds.Payload{Type: rounds.Propose, Text: in.Text, Goal: in.Goal, Options: toOptions(in.Options), OnTimeout: in.OnTimeout, Recommend: in.Recommend}
	if p.Text == "" {
		p.Text = in.Goal
	}
	if in.DueSeconds > 0 {
		due := s.now().Unix() + in.DueSeconds
		p.Due = &due
	}
	// Resumable: the same open propose by this agent is not sent twice.
	res, _, err := rr.c.Rounds(ctx, rr.id)
	if err != nil {
		return RoundOut{}, "", err
	}
	me := string(s.cfg.Key.ID)
	for _, r := range res.Rounds {
		first := r.Steps[0].Payload
		if r.Proposer == me && first.Goal == p.Goal && first.Text == p.Text && !r.State.Final() {
			return RoundOut{RoomID: rr.id, RoundID: r.ID, State: string(r.State), Note: "already open"}, "this round is already open: " + r.ID, nil
		}
	}
	rec, err := rr.c.Send(ctx, rr.id, 8, nil, func(*client.Room, []*record.Record) (string, any, error) { return rounds.EventType, p, nil })
	if err != nil {
		return RoundOut{}, "", err
	}
	env, err := identity.ParseEnvelope(rec.Envelope)
	if err != nil {
		return RoundOut{}, "", err
	}
	s.stateWritten(s.store.addRoom(rr.url))
	return RoundOut{RoomID: rr.id, RoundID: env.Hash, Seq: rec.Seq, State: string(rounds.Open)}, "round " + env.Hash + " open", nil
}

type RespondIn struct {
	Room    string        `json:"room"`
	Round   string        `json:"round" jsonschema:"the round_id"`
	Type    string        `json:"type" jsonschema:"counter, accept, confirm, deliver, complete or cancel"`
	Text    string        `json:"text,omitempty"`
	Options []RoundOption `json:"options,omitempty" jsonschema:"new options (counter) or deliverables (deliver)"`
	Choice  string        `json:"choice,omitempty" jsonschema:"the option id (accept)"`
}

var errAlreadyDone = errors.New("already done")

func (s *Server) respondRound(ctx context.Context, _ *mcp.CallToolRequest, in RespondIn) (RoundOut, string, error) {
	rr, err := s.resolve(in.Room)
	if err != nil {
		return RoundOut{}, "", err
	}
	switch in.Type {
	case rounds.Counter, rounds.Accept, rounds.Confirm, rounds.Deliver, rounds.Complete, rounds.Cancel:
	default:
		return RoundOut{}, "", invalid("type is counter, accept, confirm, deliver, complete or cancel")
	}
	p := rounds.Payload{Type: in.Type, Text: in.Text, Ref: in.Round, Choice: in.Choice, Options: toOptions(in.Options)}
	if p.Text == "" {
		p.Text = in.Type
	}
	if len(p.Options) == 0 {
		p.Options = nil
	}
	me := string(s.cfg.Key.ID)
	rec, err := rr.c.Send(ctx, rr.id, 8, nil, func(*client.Room, []*record.Record) (string, any, error) {
		res, _, err := rr.c.Rounds(ctx, rr.id)
		if err != nil {
			return "", nil, err
		}
		r, ok := res.Round(in.Round)
		if !ok {
			return "", nil, invalid("no round " + in.Round + " in this room")
		}
		for _, st := range r.Steps { // this agent's same turn already took effect
			if !st.Ignored && st.Actor == me && st.Payload.Type == in.Type && in.Type != rounds.Counter && in.Type != rounds.Deliver {
				return "", nil, errAlreadyDone
			}
		}
		if _, why := r.Next(rounds.Turn{Actor: me, Payload: p}); why != "" {
			return "", nil, &toolError{Code: "round_conflict", Message: fmt.Sprintf("not sent: %s (round is %s)", why, r.State), Hint: "list_rounds shows the round's state and who may act"}
		}
		return rounds.EventType, p, nil
	})
	out := RoundOut{RoomID: rr.id, RoundID: in.Round}
	if errors.Is(err, errAlreadyDone) {
		err, out.Note = nil, "already done"
	}
	if err != nil {
		return RoundOut{}, "", err
	}
	if rec != nil {
		out.Seq = rec.Seq
	}
	if res, _, err := rr.c.Rounds(ctx, rr.id); err == nil {
		if r, ok := res.Round(in.Round); ok {
			out.State = string(r.State)
		}
	}
	return out, fmt.Sprintf("%s sent; round %s is %s", in.Type, in.Round, out.State), nil
}

type RoundsIn struct {
	Room string `json:"room"`
}

type RoundView struct {
	RoundID   string        `json:"round_id"`
	Proposer  string        `json:"proposer"`
	Goal      string        `json:"goal"`
	State     string        `json:"state"`
	Options   []RoundOption `json:"options"`
	OptionsBy string        `json:"options_by,omitempty"`
	Choice    string        `json:"choice,omitempty"`
	AcceptBy  string        `json:"accept_by,omitempty"`
	Delivered []RoundOption `json:"delivered,omitempty"`
	Due       int64         `json:"due,omitempty"`
	Notice    string        `json:"notice,omitempty"`
	Ignored   []string      `json:"ignored,omitempty"`
}

type ReceiptView struct {
	Seq    int64  `json:"seq"`
	PartyA string `json:"party_a,omitempty"`
	PartyB string `json:"party_b,omitempty"`
	Ref    string `json:"ref,omitempty"`
	Sealed bool   `json:"sealed,omitempty"`
	OK     bool   `json:"ok"`
	Error  string `json:"error,omitempty"`
}

type RoundsOut struct {
	RoomID    string        `json:"room_id"`
	Rounds    []RoundView   `json:"rounds"`
	Receipts  []ReceiptView `json:"receipts"`
	Unopened  int           `json:"unopened,omitempty"`
	Truncated bool          `json:"truncated"`
}

func fromOptions(in []rounds.Option) []RoundOption {
	out := make([]RoundOption, 0, len(in))
	for _, o := range in {
		t, _ := clip(o.Title, 300)
		sm, _ := clip(o.Summary, 1000)
		out = append(out, RoundOption{ID: o.ID, Title: t, Summary: sm, Fields: o.Fields, Refs: o.Refs})
	}
	return out
}

func (s *Server) listRounds(ctx context.Context, _ *mcp.CallToolRequest, in RoundsIn) (RoundsOut, string, error) {
	rr, err := s.resolve(in.Room)
	if err != nil {
		return RoundsOut{}, "", err
	}
	co, err := rr.c.Coordination(ctx, rr.id)
	if err != nil {
		return RoundsOut{}, "", err
	}
	out := RoundsOut{RoomID: rr.id, Rounds: []RoundView{}, Receipts: []ReceiptView{}, Unopened: co.Unopened}
	now := s.now().Unix()
	for i, r := range co.Rounds.Rounds {
		if i >= 50 {
			out.Truncated = true
			break
		}
		goal, _ := clip(r.Goal, 500)
		v := RoundView{RoundID: r.ID, Proposer: r.Proposer, Goal: goal, State: string(r.State), Options: fromOptions(r.Options), OptionsBy: r.OptionsBy,
			Choice: r.Choice, AcceptBy: r.AcceptBy, Delivered: fromOptions(r.Delivered), Due: r.Due, Notice: r.Notice(now)}
		for _, st := range r.Steps {
			if st.Ignored && len(v.Ignored) < 10 {
				why, _ := clip(st.Reason, 300)
				v.Ignored = append(v.Ignored, fmt.Sprintf("seq %d %s: %s", st.Seq, st.Payload.Type, why))
			}
		}
		out.Rounds = append(out.Rounds, v)
	}
	for i, rc := range co.Receipts {
		if i >= 50 {
			out.Truncated = true
			break
		}
		v := ReceiptView{Seq: rc.Seq, Sealed: rc.Sealed, OK: rc.Err == nil}
		if rc.Receipt != nil {
			v.PartyA, v.PartyB, v.Ref = rc.Receipt.PartyA, rc.Receipt.PartyB, rc.Receipt.Ref
		}
		if rc.Err != nil {
			v.Error = rc.Err.Error()
		}
		out.Receipts = append(out.Receipts, v)
	}
	return out, fmt.Sprintf("%d round(s), %d receipt(s)", len(out.Rounds), len(out.Receipts)), nil
}

type DraftIn struct {
	Room  string `json:"room"`
	Round string `json:"round"`
	Terms string `json:"terms" jsonschema:"the agreed terms (stay with the parties; only their salted hash is in the receipt)"`
	Salt  string `json:"salt,omitempty" jsonschema:"base64url 32-byte salt (default: a fresh one)"`
}

type ReceiptOut struct {
	Receipt  map[string]any `json:"receipt"`
	Salt     string         `json:"salt,omitempty"`
	CoSigned bool           `json:"co_signed"`
}

func (s *Server) draftReceipt(ctx context.Context, _ *mcp.CallToolRequest, in DraftIn) (ReceiptOut, string, error) {
	rr, err := s.resolve(in.Room)
	if err != nil {
		return ReceiptOut{}, "", err
	}
	salt := make([]byte, receipt.SaltBytes)
	if in.Salt != "" {
		if salt, err = identity.DecodeB64Len(in.Salt, receipt.SaltBytes); err != nil {
			return ReceiptOut{}, "", invalid("salt must be base64url of 32 bytes")
		}
	} else {
		rand.Read(salt)
	}
	res, _, err := rr.c.Rounds(ctx, rr.id)
	if err != nil {
		return ReceiptOut{}, "", err
	}
	r, ok := res.Round(in.Round)
	if !ok {
		return ReceiptOut{}, "", invalid("no round " + in.Round + " in this room")
	}
	if r.State == rounds.Open || r.State == rounds.Cancelled {
		return ReceiptOut{}, "", &toolError{Code: "round_conflict", Message: "round is " + string(r.State) + ": a receipt needs an agreed round"}
	}
	me := string(s.cfg.Key.ID)
	other := r.AcceptBy
	if other == me {
		other = r.OptionsBy
	}
	if me != r.AcceptBy && me != r.OptionsBy {
		return ReceiptOut{}, "", &toolError{Code: "permission_denied", Message: "you are not a party of this round"}
	}
	th, err := receipt.TermsHash([]byte(in.Terms), salt)
	if err != nil {
		return ReceiptOut{}, "", err
	}
	rc := &receipt.Receipt{Type: receipt.Type, PartyA: me, PartyB: other, TermsHash: th, Context: rr.id, Ref: r.ID, TS: s.now().Unix()}
	if err := rc.Sign(s.cfg.Key.Private()); err != nil {
		return ReceiptOut{}, "", err
	}
	return ReceiptOut{Receipt: asObject(rc.Marshal()), Salt: identity.EncodeB64(salt)}, "drafted and signed as partyA; partyB " + other + " signs next (give them the receipt, the terms and the salt)", nil
}

type SignIn struct {
	Receipt map[string]any `json:"receipt"`
	Terms   string         `json:"terms"`
	Salt    string         `json:"salt"`
}

func (s *Server) signReceipt(_ context.Context, _ *mcp.CallToolRequest, in SignIn) (ReceiptOut, string, error) {
	rc, err := receipt.ParseUnsigned(asJSON(in.Receipt))
	if err != nil {
		return ReceiptOut{}, "", invalid("receipt: " + err.Error())
	}
	salt, err := identity.DecodeB64Len(in.Salt, receipt.SaltBytes)
	if err != nil {
		return ReceiptOut{}, "", invalid("salt must be base64url of 32 bytes")
	}
	if th, _ := receipt.TermsHash([]byte(in.Terms), salt); th != rc.TermsHash {
		return ReceiptOut{}, "", &toolError{Code: "receipt_mismatch", Message: "not signed: the terms and salt do not hash to the receipt's termsHash"}
	}
	me := string(s.cfg.Key.ID)
	v := rc.Verify()
	mine, theirs := v.A, v.B
	if me == rc.PartyB {
		mine, theirs = v.B, v.A
	} else if me != rc.PartyA {
		return ReceiptOut{}, "", &toolError{Code: "permission_denied", Message: "you are neither partyA nor partyB"}
	}
	if theirs != nil {
		return ReceiptOut{}, "", &toolError{Code: "receipt_mismatch", Message: "not signed: the other party's signature: " + theirs.Error()}
	}
	if mine != nil {
		if err := rc.Sign(s.cfg.Key.Private()); err != nil {
			return ReceiptOut{}, "", err
		}
	}
	return ReceiptOut{Receipt: asObject(rc.Marshal()), CoSigned: rc.Verify().OK()}, "co-signed by " + rc.PartyA + " and " + rc.PartyB, nil
}

type PostReceiptIn struct {
	Room    string         `json:"room"`
	Receipt map[string]any `json:"receipt"`
}

func (s *Server) postReceipt(ctx context.Context, _ *mcp.CallToolRequest, in PostReceiptIn) (PostOut, string, error) {
	rr, err := s.resolve(in.Room)
	if err != nil {
		return PostOut{}, "", err
	}
	rc, err := receipt.Check(asJSON(in.Receipt))
	if err != nil {
		return PostOut{}, "", &toolError{Code: "receipt_mismatch", Message: "not posted: " + err.Error()}
	}
	co, err := rr.c.Coordination(ctx, rr.id)
	if err != nil {
		return PostOut{}, "", err
	}
	for _, have := range co.Receipts {
		if have.Receipt != nil && *have.Receipt == *rc {
			return PostOut{RoomID: rr.id, Seq: have.Seq, Verified: true, Replayed: true}, fmt.Sprintf("already posted as seq %d", have.Seq), nil
		}
	}
	rec, err := rr.c.Send(ctx, rr.id, 8, nil, func(*client.Room, []*record.Record) (string, any, error) {
		return receipt.EventType, json.RawMessage(rc.Marshal()), nil
	})
	if err != nil {
		return PostOut{}, "", err
	}
	return PostOut{RoomID: rr.id, Seq: rec.Seq, Hash: rec.Hash, Verified: true}, fmt.Sprintf("deal receipt posted as seq %d", rec.Seq), nil
}

type VerifyReceiptIn struct {
	Receipt map[string]any `json:"receipt"`
}

type VerifyReceiptOut struct {
	OK     bool   `json:"ok"`
	PartyA string `json:"party_a,omitempty"`
	PartyB string `json:"party_b,omitempty"`
	Ref    string `json:"ref,omitempty"`
	Room   string `json:"room,omitempty"`
	Error  string `json:"error,omitempty"`
}

func (s *Server) verifyReceipt(_ context.Context, _ *mcp.CallToolRequest, in VerifyReceiptIn) (VerifyReceiptOut, string, error) {
	rc, err := receipt.Check(asJSON(in.Receipt))
	if err != nil {
		return VerifyReceiptOut{Error: err.Error()}, "the receipt does NOT verify: " + err.Error(), nil
	}
	return VerifyReceiptOut{OK: true, PartyA: rc.PartyA, PartyB: rc.PartyB, Ref: rc.Ref, Room: rc.Context}, "co-signed by both parties", nil
}

func asObject(b []byte) map[string]any {
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	return m
}

func asJSON(m map[string]any) []byte {
	b, _ := json.Marshal(m)
	return b
}
