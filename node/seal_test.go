//go:build e2e

package node_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/adpnode/adpnode/adp/receipt"
	"github.com/adpnode/adpnode/adp/seal"
	"github.com/adpnode/adpnode/adp/types"
	"github.com/adpnode/adpnode/internal/adptest"
	"github.com/adpnode/adpnode/node"
)

// In a member-only room the host refuses the plaintext form of every
// custom type of kind message (decision 23): the bundled packs' round.turn
// and deal.receipt, the registered packs' question.create, proposal.create,
// poll.create and resource.add, and an inline one. Signal types stay
// plaintext, and a hub-trusted room accepts the same events. The rule holds
// after a restart on the same data dir, and a refusal echoes the type, not
// the payload.
func TestSealedHostRefusesPlaintextMessageKinds(t *testing.T) {
	h := adptest.StartHostAt(t, node.Config{DataDir: t.TempDir()}, adptest.NewClock())
	alice := adptest.NewAgent("alice")
	bob := adptest.NewAgent("bob")

	decls := []any{
		map[string]any{"use": "adp:reactions/1.0"},
		map[string]any{"use": "adp:deliberation/1.0"},
		map[string]any{"use": "adp:curation/1.0"},
		map[string]any{"type": "note.post", "kind": "message", "title": "Note", "schema": map[string]any{"type": "object"}},
		map[string]any{"type": "note.ping", "kind": "signal", "title": "Ping", "schema": map[string]any{"type": "object"}},
	}
	for _, b := range types.BundledPacks() {
		decls = append(decls, json.RawMessage(b.Declaration(h.URL)))
	}
	room := func(memberOnly bool) string {
		p := h.RoomPayload("public")
		ds := append([]any(nil), decls...)
		if memberOnly {
			p["policy"] = map[string]any{"extra": map[string]any{seal.ExtraKey: seal.MemberOnly}}
			for _, d := range seal.TypeDeclarations() {
				ds = append(ds, d)
			}
		}
		p["types"] = ds
		return h.CreateRoom(t, alice, p)
	}
	sealed, open := room(true), room(false)
	for _, id := range []string{sealed, open} {
		h.MustPost(t, bob, id, "room.join", map[string]any{"role": "speaker"})
	}

	const marker = "MARKER-node-plaintext-7f3a"
	rc := &receipt.Receipt{Type: receipt.Type, PartyA: string(alice.ID), PartyB: string(bob.ID),
		TermsHash: strings.Repeat("A", 43), Context: marker, Ref: strings.Repeat("B", 43), TS: 1,
		SigA: strings.Repeat("C", 86), SigB: strings.Repeat("D", 86)}
	cases := []struct {
		typ     string
		payload any
	}{
		{"round.turn", map[string]any{"type": "propose", "text": marker, "goal": "g", "options": []any{map[string]any{"id": "a", "title": "A"}}}},
		{"deal.receipt", json.RawMessage(rc.Marshal())},
		{"question.create", map[string]any{"question": marker}},
		{"proposal.create", map[string]any{"proposal_id": "p1", "title": "T", "body": marker}},
		{"poll.create", map[string]any{"poll_id": "q1", "question": marker, "options": []any{map[string]any{"id": "y", "label": "Yes"}}}},
		{"resource.add", map[string]any{"resource_type": "link", "title": marker}},
		{"note.post", map[string]any{"text": marker}},
	}
	check := func(t *testing.T) {
		for _, c := range cases {
			h.Clock.Advance(time.Minute) // under the 5 messages a minute
			r := h.Post(t, bob, sealed, c.typ, c.payload)
			d := r.ErrorData()
			if r.ErrorCode() != "payload_schema_violation" || d["reason"] != "seal_required" || d["type"] != c.typ {
				t.Errorf("plaintext %s in a member-only room: %s", c.typ, r)
			}
			if strings.Contains(r.String(), marker) {
				t.Errorf("the refusal of %s echoes its payload: %s", c.typ, r)
			}
			h.MustPost(t, bob, open, c.typ, c.payload) // hub-trusted: accepted
		}
		// Signal types stay plaintext in a member-only room.
		h.MustPost(t, bob, sealed, "note.ping", map[string]any{"n": 1})
	}
	check(t)
	h = h.Restart(t)
	check(t)
}
