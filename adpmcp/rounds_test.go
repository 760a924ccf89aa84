//go:build e2e

package adpmcp_test

import (
	"testing"

	"github.com/adpnode/adpnode/internal/adptest"
	"github.com/adpnode/adpnode/stack"
)

// Property: two agents run a coordination round to agreement through the
// tools, co-sign its deal receipt (terms and salt stay with them) and
// post it once; a tampered receipt does not verify.
func TestRoundAndReceiptThroughTools(t *testing.T) {
	h := adptest.StartHost(t, stack.NodeConfig{})
	alice := startAgent(t, h.URL, h.Clock, newKey(t), t.TempDir(), nil, agentOpts{})
	bob := startAgent(t, h.URL, h.Clock, newKey(t), t.TempDir(), nil, agentOpts{})
	var room createOut
	alice.must("create_room", map[string]any{"topic": "widgets", "packs": []string{"adpnode:coordination/1.0", "adpnode:deal/1.0"}}, &room)
	var j joinOut
	bob.must("join_room", map[string]any{"room": room.RoomID}, &j)
	var rd struct {
		RoundID string `json:"round_id"`
		State   string `json:"state"`
		Note    string `json:"note"`
	}
	alice.must("propose_round", map[string]any{"room": room.RoomID, "goal": "10 widgets",
		"options": []map[string]any{{"id": "std", "title": "Standard, 5 EUR"}, {"id": "fast", "title": "Express, 8 EUR"}}}, &rd)
	round := rd.RoundID
	bob.must("respond_round", map[string]any{"room": room.RoomID, "round": round, "type": "accept", "choice": "fast"}, &rd)
	if rd.State != "agreed" {
		t.Fatalf("after accept: %+v", rd)
	}
	bob.must("respond_round", map[string]any{"room": room.RoomID, "round": round, "type": "accept", "choice": "fast"}, &rd)
	if rd.Note != "already done" {
		t.Fatalf("a repeated accept: %+v", rd)
	}
	var draft struct {
		Receipt  map[string]any `json:"receipt"`
		Salt     string         `json:"salt"`
		CoSigned bool           `json:"co_signed"`
	}
	const terms = "10 widgets, express, 80 EUR"
	alice.must("draft_receipt", map[string]any{"room": room.RoomID, "round": round, "terms": terms}, &draft)
	if res := bob.call("sign_receipt", map[string]any{"receipt": draft.Receipt, "terms": "other terms", "salt": draft.Salt}, nil); !res.IsError {
		t.Fatal("signed against other terms")
	}
	bob.must("sign_receipt", map[string]any{"receipt": draft.Receipt, "terms": terms, "salt": draft.Salt}, &draft)
	if !draft.CoSigned {
		t.Fatalf("not co-signed: %+v", draft)
	}
	var v struct {
		OK bool `json:"ok"`
	}
	alice.must("verify_receipt", map[string]any{"receipt": draft.Receipt}, &v)
	if !v.OK {
		t.Fatal("a co-signed receipt does not verify")
	}
	bad := map[string]any{}
	for k, x := range draft.Receipt {
		bad[k] = x
	}
	bad["ref"] = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
	alice.must("verify_receipt", map[string]any{"receipt": bad}, &v)
	if v.OK {
		t.Fatal("a tampered receipt verifies")
	}
	var p1, p2 postOut
	alice.must("post_receipt", map[string]any{"room": room.RoomID, "receipt": draft.Receipt}, &p1)
	bob.must("post_receipt", map[string]any{"room": room.RoomID, "receipt": draft.Receipt}, &p2)
	if !p2.Replayed || p2.Seq != p1.Seq {
		t.Fatalf("posted twice: %+v %+v", p1, p2)
	}
	var rs struct {
		Rounds []struct {
			State  string `json:"state"`
			Choice string `json:"choice"`
		} `json:"rounds"`
		Receipts []struct {
			OK bool `json:"ok"`
		} `json:"receipts"`
	}
	bob.must("list_rounds", map[string]any{"room": room.RoomID}, &rs)
	if len(rs.Rounds) != 1 || rs.Rounds[0].State != "agreed" || rs.Rounds[0].Choice != "fast" || len(rs.Receipts) != 1 || !rs.Receipts[0].OK {
		t.Fatalf("list_rounds: %+v", rs)
	}
}
