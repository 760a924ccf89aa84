// Package rounds derives the state of coordination rounds (the bundled
// pack adpnode:coordination/1.0, event type round.turn) from a room's
// records. It is a pure function of the records and a time: the host only
// checks each turn's shape; every reader derives the same state.
//
// A propose opens a round, named by the propose's event hash; every other
// turn names its round in ref. State only moves forward:
//
//	open --accept--> agreed --confirm--> confirmed --deliver--> delivered --complete--> completed
//	(counter keeps a round open; deliver may repeat; cancel ends any round that is not final)
//
// A turn that would move a round backwards, skip a state, or touch a final
// round is kept in the round's history as ignored, with the reason, and
// changes nothing. A passed due is reported with its on_timeout, never acted
// on.
package rounds

import (
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/adpnode/adpnode/adp/identity"
	"github.com/adpnode/adpnode/adp/record"
)

// EventType is the event type of a turn; PackID the pack that defines it.
const (
	EventType = "round.turn"
	PackID    = "adpnode:coordination/1.0"
)

// State is a round's state.
type State string

// The states, in their only order (Cancelled ends any non-final state).
const (
	Open      State = "open"
	Agreed    State = "agreed"
	Confirmed State = "confirmed"
	Delivered State = "delivered"
	Completed State = "completed"
	Cancelled State = "cancelled"
)

// Final reports whether no turn can change s.
func (s State) Final() bool { return s == Completed || s == Cancelled }

var rank = map[State]int{Open: 0, Agreed: 1, Confirmed: 2, Delivered: 3, Completed: 4, Cancelled: 4}

// Turn types.
const (
	Propose  = "propose"
	Counter  = "counter"
	Accept   = "accept"
	Confirm  = "confirm"
	Deliver  = "deliver"
	Complete = "complete"
	Cancel   = "cancel"
)

// Review is a verdict on a deliverable.
type Review struct {
	Verdict string `json:"verdict"`
	Reason  string `json:"reason,omitempty"`
	Score   *int64 `json:"score,omitempty"`
}

// Option is an option of a propose or counter, or a deliverable of a
// deliver (files by URI in Refs).
type Option struct {
	ID      string         `json:"id"`
	Title   string         `json:"title"`
	Summary string         `json:"summary,omitempty"`
	Fields  map[string]any `json:"fields,omitempty"`
	Refs    []string       `json:"refs,omitempty"`
	Review  *Review        `json:"review,omitempty"`
}

// Payload is a round.turn payload.
type Payload struct {
	Type      string   `json:"type"`
	Text      string   `json:"text"`
	Goal      string   `json:"goal,omitempty"`
	Options   []Option `json:"options,omitempty"`
	Choice    string   `json:"choice,omitempty"`
	Ref       string   `json:"ref,omitempty"`
	Due       *int64   `json:"due,omitempty"`
	OnTimeout string   `json:"on_timeout,omitempty"`
	Brief     string   `json:"brief,omitempty"`
	Recommend string   `json:"recommend,omitempty"`
}

// Turn is one round.turn record.
type Turn struct {
	Seq       int64
	Hash      string // the event hash (what ref names)
	Actor     string
	CreatedAt int64 // ms
	Payload   Payload
	Err       error `json:"-"` // the payload did not decode: the turn is ignored (Step.Reason says why)
}

// FromRecords returns the round.turn events of recs, in order. Records whose
// envelope does not parse are skipped (a verified chain has none).
func FromRecords(recs []*record.Record) []Turn {
	var out []Turn
	for _, r := range recs {
		env, err := identity.ParseEnvelope(r.Envelope)
		if err != nil || env.Event.Type != EventType {
			continue
		}
		out = append(out, NewTurn(r.Seq, env.Hash, string(env.Event.Actor), env.Event.CreatedAt, env.Event.Payload, nil))
	}
	return out
}

// NewTurn is the turn of a round.turn event (its seq, event hash, actor,
// created_at and payload), whether read in the clear or opened from a
// sealed record. flag, when not nil, is why a reader refused the event
// (a sealed event failing the room's rules): the turn then carries it as
// its error, and Derive lists it as ignored.
func NewTurn(seq int64, hash, actor string, createdAt int64, payload []byte, flag error) Turn {
	t := Turn{Seq: seq, Hash: hash, Actor: actor, CreatedAt: createdAt}
	if flag != nil {
		t.Err = fmt.Errorf("flagged: %v", flag)
	} else if err := json.Unmarshal(payload, &t.Payload); err != nil {
		t.Err = fmt.Errorf("payload: %v", err)
	}
	return t
}

// Step is a turn as applied to its round.
type Step struct {
	Turn
	From, To State  // To == From when ignored
	Ignored  bool   // the turn changed nothing
	Reason   string // why it was ignored
}

// Round is the derived state of one round.
type Round struct {
	ID        string // the propose's event hash
	Proposer  string
	Goal      string
	State     State
	Options   []Option // of the latest applied propose or counter
	OptionsBy string   // who offered them
	Recommend string
	Choice    string // the accepted option
	AcceptBy  string
	// AgreedSeq is the seq of the accept that agreed the round (AcceptBy
	// is set). The round's two parties are then OptionsBy (whose offer was
	// accepted; no offer applies after agreement) and AcceptBy.
	AgreedSeq int64
	Delivered []Option // deliverables of the latest applied deliver
	DeliverBy string
	Due       int64  // epoch seconds of the latest applied due; 0 when none
	OnTimeout string // "hold" when a due was given without on_timeout
	Steps     []Step
}

// Overdue reports whether the round's due has passed at now (epoch seconds)
// while it is not final.
func (r *Round) Overdue(now int64) bool { return r.Due > 0 && now > r.Due && !r.State.Final() }

// Notice reports a passed deadline ("deadline passed, on_timeout: cancel"),
// or "" — a report, never an action.
func (r *Round) Notice(now int64) string {
	if !r.Overdue(now) {
		return ""
	}
	return "deadline passed, on_timeout: " + r.OnTimeout
}

// Result is the outcome of Derive.
type Result struct {
	Rounds  []*Round // in order of their propose
	Orphans []Step   // turns naming no known round, or undecodable
}

// Round returns the round with the given id.
func (res *Result) Round(id string) (*Round, bool) {
	for _, r := range res.Rounds {
		if r.ID == id {
			return r, true
		}
	}
	return nil, false
}

// Derive applies turns in order. It is linear in the number of turns.
func Derive(turns []Turn) *Result {
	res := &Result{}
	byID := map[string]*Round{}
	for _, t := range turns {
		if t.Err != nil {
			res.Orphans = append(res.Orphans, Step{Turn: t, Ignored: true, Reason: t.Err.Error()})
			continue
		}
		p := t.Payload
		if p.Type == Propose {
			if _, dup := byID[t.Hash]; dup || p.Ref != "" {
				res.Orphans = append(res.Orphans, Step{Turn: t, Ignored: true, Reason: "a propose opens a new round and names none"})
				continue
			}
			r := &Round{ID: t.Hash, Proposer: t.Actor, Goal: p.Goal, State: Open}
			r.offer(t)
			r.Steps = append(r.Steps, Step{Turn: t, From: Open, To: Open})
			byID[t.Hash] = r
			res.Rounds = append(res.Rounds, r)
			continue
		}
		r, ok := byID[p.Ref]
		if !ok {
			res.Orphans = append(res.Orphans, Step{Turn: t, Ignored: true, Reason: "ref names no earlier propose"})
			continue
		}
		from := r.State
		to, why := r.Next(t)
		st := Step{Turn: t, From: from, To: from}
		if why != "" {
			st.Ignored, st.Reason = true, why
		} else {
			r.apply(t, to)
			st.To = to
		}
		r.Steps = append(r.Steps, st)
	}
	return res
}

// Next returns the state t would move r to, or why t would be ignored
// (Derive applies exactly this; clients use it to refuse a turn before
// sending it).
func (r *Round) Next(t Turn) (State, string) {
	p := t.Payload
	if r.State.Final() {
		return r.State, "the round is " + string(r.State) + " (final)"
	}
	var to State
	switch p.Type {
	case Counter:
		to = Open
	case Accept:
		to = Agreed
	case Confirm:
		to = Confirmed
	case Deliver:
		to = Delivered
	case Complete:
		to = Completed
	case Cancel:
		return Cancelled, ""
	default:
		return r.State, "unknown turn type " + strconv.Quote(p.Type)
	}
	if rank[to] < rank[r.State] {
		return r.State, fmt.Sprintf("%s would move the round back from %s to %s", p.Type, r.State, to)
	}
	need := map[State]State{Open: Open, Agreed: Open, Confirmed: Agreed, Delivered: Confirmed, Completed: Delivered}[to]
	if to == Delivered && r.State == Delivered {
		need = Delivered // a further delivery
	}
	if r.State != need {
		return r.State, fmt.Sprintf("%s needs the round %s, it is %s", p.Type, need, r.State)
	}
	switch p.Type {
	case Counter:
		if len(p.Options) == 0 {
			return r.State, "a counter carries options"
		}
	case Accept:
		if !hasOption(r.Options, p.Choice) {
			return r.State, "choice " + strconv.Quote(p.Choice) + " is not an option on the table"
		}
		if t.Actor == r.OptionsBy {
			return r.State, "an agent cannot accept its own offer"
		}
	case Confirm:
		if t.Actor == r.AcceptBy {
			return r.State, "the accepting agent cannot confirm its own acceptance"
		}
	case Deliver:
		if len(p.Options) == 0 {
			return r.State, "a deliver carries deliverables (options)"
		}
	case Complete:
		if t.Actor == r.DeliverBy {
			return r.State, "the delivering agent cannot complete its own delivery"
		}
	}
	return to, ""
}

func (r *Round) apply(t Turn, to State) {
	p := t.Payload
	switch p.Type {
	case Counter:
		r.offer(t)
	case Accept:
		r.Choice, r.AcceptBy, r.AgreedSeq = p.Choice, t.Actor, t.Seq
	case Deliver:
		r.Delivered, r.DeliverBy = p.Options, t.Actor
	}
	if p.Due != nil {
		r.setDue(p)
	}
	r.State = to
}

func (r *Round) offer(t Turn) {
	r.Options, r.OptionsBy, r.Recommend = t.Payload.Options, t.Actor, t.Payload.Recommend
	if t.Payload.Due != nil {
		r.setDue(t.Payload)
	}
}

func (r *Round) setDue(p Payload) {
	r.Due, r.OnTimeout = *p.Due, p.OnTimeout
	if r.OnTimeout == "" {
		r.OnTimeout = "hold"
	}
}

// Parties returns the round's two parties, the author of the accepted offer
// and the acceptor, and whether the round was ever agreed.
func (r *Round) Parties() (offerer, acceptor string, agreed bool) {
	if r.AcceptBy == "" {
		return "", "", false
	}
	return r.OptionsBy, r.AcceptBy, true
}

func hasOption(opts []Option, id string) bool {
	for _, o := range opts {
		if o.ID == id {
			return true
		}
	}
	return false
}
