//go:build e2e

package hostapi_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/adpnode/adpnode/adp/receipt"
	"github.com/adpnode/adpnode/adp/record"
	"github.com/adpnode/adpnode/adp/rounds"
	"github.com/adpnode/adpnode/adp/types"
	"github.com/adpnode/adpnode/client"
	"github.com/adpnode/adpnode/internal/adptest"
	"github.com/adpnode/adpnode/node"
)

// The viewer on a room with the bundled packs: a round through completion
// (with a backward turn shown as ignored), a cancelled round, an open round
// whose due has passed (reported with its on_timeout, state unchanged), a
// co-signed receipt shown as such and a receipt with one bad signature
// flagged in red. Property: a receipt counts only in the room it names,
// for a round of it agreed before it, signed by that round's two parties —
// receipts with valid signatures made for another room, naming a missing
// round, naming a round never agreed or agreed only after the receipt, or
// signed by a third party are red with the reason, never "co-signed", and
// every receipt's verdict equals Go's (receipt.CheckIn via
// client.Receipts). The states the page derives equal adp/rounds' over the
// same records, and the page stays inert with hostile turn text.
func TestViewerDealsBrowser(t *testing.T) {
	b := startBrowser(t)
	h := adptest.StartHost(t, node.Config{Rates: highRates()})
	alice, bob := adptest.NewAgent("alice"), adptest.NewAgent("bob")
	p := h.RoomPayload("public")
	var decls []any
	for _, bp := range types.BundledPacks() {
		decls = append(decls, json.RawMessage(bp.Declaration(h.URL)))
	}
	p["types"] = decls
	id := h.CreateRoom(t, alice, p)
	h.MustPost(t, bob, id, "room.join", map[string]any{"role": "speaker"})
	turn := func(a *adptest.Agent, pl map[string]any) string {
		t.Helper()
		return envHash(t, post(t, h, a, id, rounds.EventType, pl))
	}
	opts := []any{map[string]any{"id": "std", "title": "Standard"}, map[string]any{"id": "fast", "title": "Express", "refs": []any{"https://files.example/spec.pdf"}}}
	hostile := `<img src=x onerror="window.__pwned='turn'">`
	r1 := turn(alice, map[string]any{"type": "propose", "text": "Widgets? " + hostile, "goal": "10 widgets", "options": opts})
	turn(bob, map[string]any{"type": "accept", "text": "fast", "ref": r1, "choice": "fast"})
	back := post(t, h, bob, id, rounds.EventType, map[string]any{"type": "counter", "text": "wait", "ref": r1, "options": opts})
	turn(alice, map[string]any{"type": "confirm", "text": "ok", "ref": r1})
	turn(alice, map[string]any{"type": "deliver", "text": "here", "ref": r1, "options": []any{map[string]any{"id": "box", "title": "Box", "refs": []any{"https://carrier.example/t/1"}}}})
	turn(bob, map[string]any{"type": "complete", "text": "thanks", "ref": r1, "options": []any{map[string]any{"id": "box", "title": "Box", "review": map[string]any{"verdict": "approve", "score": 90}}}})
	r2 := turn(alice, map[string]any{"type": "propose", "text": "Lunch?", "goal": "lunch", "options": opts})
	turn(bob, map[string]any{"type": "cancel", "text": "no", "ref": r2})
	late := turn(bob, map[string]any{"type": "propose", "text": "Late?", "goal": "overdue", "options": opts, "due": time.Now().Unix() - 3600, "on_timeout": "cancel"})

	// Receipts: one co-signed, one whose sigB covers other content.
	rc := &receipt.Receipt{Type: receipt.Type, PartyA: string(alice.ID), PartyB: string(bob.ID), TermsHash: strings.Repeat("A", 43), Context: id, Ref: r1, TS: time.Now().Unix()}
	if err := rc.Sign(alice.Key); err != nil {
		t.Fatal(err)
	}
	if err := rc.Sign(bob.Key); err != nil {
		t.Fatal(err)
	}
	good := post(t, h, bob, id, receipt.EventType, json.RawMessage(rc.Marshal()))
	other := *rc
	other.TS++
	if err := other.Sign(bob.Key); err != nil {
		t.Fatal(err)
	}
	bad := *rc
	bad.SigB = other.SigB
	badRec := post(t, h, bob, id, receipt.EventType, json.RawMessage(bad.Marshal()))

	// Receipts whose signatures verify but which do not count here: one
	// made for another room, one naming a missing round, one naming a round
	// never agreed, one signed by a third party.
	carol := adptest.NewAgent("carol")
	h.MustPost(t, carol, id, "room.join", map[string]any{"role": "speaker"})
	cosign := func(ctx, ref string, p, q *adptest.Agent) json.RawMessage {
		r := &receipt.Receipt{Type: receipt.Type, PartyA: string(p.ID), PartyB: string(q.ID), TermsHash: strings.Repeat("A", 43), Context: ctx, Ref: ref, TS: 1}
		if r.Sign(p.Key) != nil || r.Sign(q.Key) != nil {
			t.Fatal("sign")
		}
		return json.RawMessage(r.Marshal())
	}
	notHere := map[int64]string{
		post(t, h, carol, id, receipt.EventType, cosign("dafakeotherroom00000", r1, alice, bob)).Seq:      "names another room",
		post(t, h, carol, id, receipt.EventType, cosign(id, "B"+strings.Repeat("A", 42), alice, bob)).Seq: "names no round of this room",
		post(t, h, carol, id, receipt.EventType, cosign(id, late, bob, alice)).Seq:                        "names a round that was not agreed before it",
		post(t, h, carol, id, receipt.EventType, cosign(id, r1, alice, carol)).Seq:                        "is not signed by its round's two parties",
	}
	// And one posted before its round's accept: agreed later, it still does not count.
	r4 := turn(alice, map[string]any{"type": "propose", "text": "Bolts?", "goal": "bolts", "options": opts})
	notHere[post(t, h, carol, id, receipt.EventType, cosign(id, r4, alice, bob)).Seq] = "names a round that was not agreed before it"
	turn(bob, map[string]any{"type": "accept", "text": "std", "ref": r4, "choice": "std"})

	// What Go derives from the same records.
	r := adptest.Do(t, http.MethodGet, h.URL+"/v1/rooms/"+id+"/events?after_seq=0&limit=1000", "", nil)
	var page struct {
		Result []json.RawMessage `json:"result"`
	}
	r.JSON(&page)
	var recs []*record.Record
	for _, raw := range page.Result {
		rec, _, err := record.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, rec)
	}
	var goStates []string
	for _, rd := range rounds.Derive(rounds.FromRecords(recs)).Rounds {
		goStates = append(goStates, string(rd.State))
	}
	if strings.Join(goStates, ",") != "completed,cancelled,open,agreed" {
		t.Fatalf("Go states %v", goStates)
	}
	// Go's verdict on each receipt (receipt.CheckIn), for the page to match.
	goVerdict := map[int64]string{}
	for _, c := range client.Receipts(id, recs) {
		goVerdict[c.Seq] = "ok"
		if c.Err != nil {
			goVerdict[c.Seq] = "bad"
		}
	}
	if len(goVerdict) != 7 || goVerdict[good.Seq] != "ok" || goVerdict[badRec.Seq] != "bad" {
		t.Fatalf("Go verdicts %v", goVerdict)
	}

	tb := b.tab(t)
	tb.run(chromedp.Navigate(h.URL + "/#/rooms/" + id))
	tb.waitJS(15*time.Second, "verified room with receipts checked",
		`document.querySelector('.badge[data-state="ok"]') && document.querySelectorAll('.receipt-status[data-state="pending"]').length === 0 && document.querySelectorAll('.receipt-status').length === 7`)
	var v struct {
		States                      []string
		Notice, Ignored, Good, Bad  string
		BadRed, CardIgnored, Chosen bool
	}
	tb.eval(fmt.Sprintf(`(() => ({
  States: Array.from(document.querySelectorAll('.rounds-card li.round')).map((e) => e.dataset.state),
  Notice: Array.from(document.querySelectorAll('.rounds-card .round-notice')).map((e) => e.textContent).join('|'),
  Ignored: (document.querySelector('#transcript > li[data-seq="%d"] .turn-ignored') || {}).textContent || '',
  Good: document.querySelector('#transcript > li[data-seq="%d"] .receipt-status').dataset.state,
  Bad: document.querySelector('#transcript > li[data-seq="%d"] .receipt-status').textContent,
  BadRed: document.querySelector('#transcript > li[data-seq="%d"] .receipt-status').classList.contains('bad') && document.querySelector('#transcript > li[data-seq="%d"] .receipt-status').dataset.state === 'bad',
  CardIgnored: document.querySelector('.rounds-card li.round[data-round="%s"]').textContent.includes('1 ignored turn'),
  Chosen: !!document.querySelector('.rounds-card li.round[data-round="%s"] .round-option.chosen[data-option="fast"]'),
}))()`, back.Seq, good.Seq, badRec.Seq, badRec.Seq, badRec.Seq, r1, r1), &v)
	if strings.Join(v.States, ",") != strings.Join(goStates, ",") {
		t.Errorf("page states %v, Go %v", v.States, goStates)
	}
	if v.Notice != "deadline passed, on_timeout: cancel" {
		t.Errorf("deadline notice %q", v.Notice)
	}
	if !strings.Contains(v.Ignored, "ignored: counter would move the round back from agreed to open") || !v.CardIgnored || !v.Chosen {
		t.Errorf("backward turn: %+v", v)
	}
	if v.Good != "ok" || !v.BadRed || !strings.Contains(v.Bad, "receipt signature invalid — sigB: signature does not verify") || strings.Contains(v.Bad, "sigA") {
		t.Errorf("receipts: %+v", v)
	}
	// Each receipt's verdict is Go's; one that does not count here is red
	// with the reason, never "co-signed".
	var verdicts map[string]struct{ State, Text string }
	tb.eval(`Object.fromEntries(Array.from(document.querySelectorAll('#transcript > li[data-seq]')).filter((li) => li.querySelector('.receipt-status')).map((li) => {
  const s = li.querySelector('.receipt-status');
  return [li.dataset.seq, { State: s.dataset.state, Text: s.textContent }];
}))`, &verdicts)
	if len(verdicts) != len(goVerdict) {
		t.Errorf("page verdicts %v, Go %v", verdicts, goVerdict)
	}
	for seq, want := range goVerdict {
		got := verdicts[fmt.Sprint(seq)]
		if got.State != want {
			t.Errorf("receipt seq %d: page %q (%s), Go %q", seq, got.State, got.Text, want)
		}
	}
	for seq, why := range notHere {
		got := verdicts[fmt.Sprint(seq)]
		if !strings.Contains(got.Text, "receipt does not count here — "+why) || strings.Contains(got.Text, "co-signed") {
			t.Errorf("receipt seq %d: %q, want %q", seq, got.Text, why)
		}
	}
	tb.shot("viewer-deals")
	tb.assertInert()
}
