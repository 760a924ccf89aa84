package rounds

import (
	"strings"
	"testing"
)

const alice, bob = "did:agent:alice", "did:agent:bob"

func h(n int) string { return strings.Repeat(string(rune('A'+n)), 43) }

func turn(n int, actor string, p Payload) Turn {
	return Turn{Seq: int64(n + 1), Hash: h(n), Actor: actor, Payload: p}
}

func i64(v int64) *int64 { return &v }

func TestFullRoundThroughCompletion(t *testing.T) {
	id := h(0)
	turns := []Turn{
		turn(0, alice, Payload{Type: Propose, Text: "Build the parser?", Goal: "a parser", Options: []Option{{ID: "fast", Title: "Fast"}, {ID: "safe", Title: "Safe"}}, Due: i64(1000), OnTimeout: "cancel"}),
		turn(1, bob, Payload{Type: Counter, Text: "Cheaper?", Ref: id, Options: []Option{{ID: "cheap", Title: "Cheap"}}, Due: i64(2000)}),
		turn(2, alice, Payload{Type: Accept, Text: "Deal.", Ref: id, Choice: "cheap"}),
		turn(3, bob, Payload{Type: Confirm, Text: "Confirmed.", Ref: id}),
		turn(4, bob, Payload{Type: Deliver, Text: "Here it is.", Ref: id, Options: []Option{{ID: "d1", Title: "parser.go", Refs: []string{"https://files.example/parser.tgz"}}}}),
		turn(5, alice, Payload{Type: Complete, Text: "Thanks.", Ref: id, Options: []Option{{ID: "d1", Title: "parser.go", Review: &Review{Verdict: "approve"}}}}),
	}
	want := []State{Open, Open, Agreed, Confirmed, Delivered, Completed}
	for n := range turns {
		res := Derive(turns[:n+1])
		r, ok := res.Round(id)
		if !ok || r.State != want[n] || len(res.Orphans) != 0 {
			t.Fatalf("after %d turns: %+v %v", n+1, r, res.Orphans)
		}
	}
	r := Derive(turns).Rounds[0]
	if r.Choice != "cheap" || r.AcceptBy != alice || r.OptionsBy != bob || len(r.Delivered) != 1 || r.Due != 2000 || r.OnTimeout != "hold" {
		t.Fatalf("round %+v", r)
	}
	for _, s := range r.Steps {
		if s.Ignored {
			t.Fatalf("step ignored: %+v", s)
		}
	}
	// The round's two parties: the author of the accepted offer and the acceptor.
	if o, a, ok := r.Parties(); !ok || o != bob || a != alice || r.AgreedSeq != 3 {
		t.Fatalf("parties %s %s %v, agreed at %d", o, a, ok, r.AgreedSeq)
	}
	if _, _, ok := Derive(turns[:2]).Rounds[0].Parties(); ok {
		t.Fatal("an open round has parties")
	}
	// Final: nothing moves it, and a due in the past is not reported.
	if r.Notice(5000) != "" {
		t.Fatal("a completed round reports its deadline")
	}
	more := append(turns, turn(6, bob, Payload{Type: Cancel, Text: "oops", Ref: id}))
	r = Derive(more).Rounds[0]
	if last := r.Steps[len(r.Steps)-1]; r.State != Completed || !last.Ignored || !strings.Contains(last.Reason, "final") {
		t.Fatalf("cancel after completion: %s %+v", r.State, last)
	}
}

func TestCancelledRound(t *testing.T) {
	id := h(0)
	turns := []Turn{
		turn(0, alice, Payload{Type: Propose, Text: "Lunch?", Goal: "lunch", Options: []Option{{ID: "noon", Title: "Noon"}}, Due: i64(100), OnTimeout: "cancel"}),
		turn(1, bob, Payload{Type: Accept, Text: "Yes", Ref: id, Choice: "noon"}),
	}
	r := Derive(turns).Rounds[0]
	if r.State != Agreed || !r.Overdue(101) || r.Notice(101) != "deadline passed, on_timeout: cancel" || r.Notice(100) != "" {
		t.Fatalf("%s %q", r.State, r.Notice(101))
	}
	// The passed deadline is reported, not acted on: the state is unchanged.
	if r.State != Agreed {
		t.Fatal("deadline acted on")
	}
	turns = append(turns, turn(2, alice, Payload{Type: Cancel, Text: "Too late", Ref: id}),
		turn(3, bob, Payload{Type: Confirm, Text: "?", Ref: id}))
	r = Derive(turns).Rounds[0]
	if r.State != Cancelled || !r.Steps[3].Ignored || r.Notice(101) != "" {
		t.Fatalf("%s %+v", r.State, r.Steps[3])
	}
}

func TestBackwardAndInvalidTurnsIgnored(t *testing.T) {
	id := h(0)
	base := []Turn{
		turn(0, alice, Payload{Type: Propose, Text: "p", Goal: "g", Options: []Option{{ID: "a", Title: "A"}}}),
		turn(1, bob, Payload{Type: Accept, Text: "ok", Ref: id, Choice: "a"}),
		turn(2, alice, Payload{Type: Confirm, Text: "c", Ref: id}),
	}
	cases := []struct {
		t      Turn
		reason string
	}{
		{turn(3, bob, Payload{Type: Counter, Text: "wait", Ref: id, Options: []Option{{ID: "b", Title: "B"}}}), "back from confirmed to open"},
		{turn(3, bob, Payload{Type: Accept, Text: "again", Ref: id, Choice: "a"}), "back from confirmed to agreed"},
		{turn(3, bob, Payload{Type: Complete, Text: "skip", Ref: id}), "needs the round delivered"},
		{turn(3, bob, Payload{Type: "rewind", Text: "?", Ref: id}), "unknown turn type"},
		{turn(3, bob, Payload{Type: Deliver, Text: "empty", Ref: id}), "deliverables"},
	}
	for _, c := range cases {
		res := Derive(append(append([]Turn{}, base...), c.t))
		r := res.Rounds[0]
		last := r.Steps[len(r.Steps)-1]
		if r.State != Confirmed || !last.Ignored || last.To != Confirmed || !strings.Contains(last.Reason, c.reason) {
			t.Errorf("%s: state %s, step %+v", c.t.Payload.Type, r.State, last)
		}
	}
	// Accepting one's own offer, an unknown choice, confirming one's own
	// acceptance and completing one's own delivery are ignored.
	open := base[:1]
	for _, c := range []struct {
		t      Turn
		reason string
	}{
		{turn(1, alice, Payload{Type: Accept, Text: "mine", Ref: id, Choice: "a"}), "own offer"},
		{turn(1, bob, Payload{Type: Accept, Text: "zz", Ref: id, Choice: "zz"}), "not an option"},
	} {
		r := Derive(append(append([]Turn{}, open...), c.t)).Rounds[0]
		if last := r.Steps[1]; r.State != Open || !last.Ignored || !strings.Contains(last.Reason, c.reason) {
			t.Errorf("%+v", last)
		}
	}
	r := Derive(append(append([]Turn{}, base[:2]...), turn(2, bob, Payload{Type: Confirm, Text: "c", Ref: id}))).Rounds[0]
	if r.State != Agreed {
		t.Error("the acceptor confirmed its own acceptance")
	}
	// A turn naming no round, and a second propose reusing a ref, are orphans.
	res := Derive([]Turn{turn(0, bob, Payload{Type: Accept, Text: "?", Ref: h(9), Choice: "a"})})
	if len(res.Rounds) != 0 || len(res.Orphans) != 1 {
		t.Fatalf("%+v", res)
	}
}

// Cost: Derive is linear; a room full of ignored turns does not grow the
// state beyond the steps it reports.
func BenchmarkDerive(b *testing.B) {
	id := h(0)
	turns := []Turn{turn(0, alice, Payload{Type: Propose, Text: "p", Goal: "g", Options: []Option{{ID: "a", Title: "A"}}})}
	for i := 1; i < 10000; i++ {
		turns = append(turns, Turn{Seq: int64(i), Hash: h(1), Actor: bob, Payload: Payload{Type: Counter, Text: "c", Ref: id, Options: []Option{{ID: "a", Title: "A"}}}})
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		Derive(turns)
	}
}
