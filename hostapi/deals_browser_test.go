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
	"github.com/adpnode/adpnode/internal/adptest"
	"github.com/adpnode/adpnode/node"
)

// The viewer on a room with the bundled packs: a round through completion
// (with a backward turn shown as ignored), a cancelled round, an open round
// whose due has passed (reported with its on_timeout, state unchanged), a
// co-signed receipt shown as such and a receipt with one bad signature
// flagged in red. The states the page derives equal adp/rounds' over the
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
	turn(bob, map[string]any{"type": "propose", "text": "Late?", "goal": "overdue", "options": opts, "due": time.Now().Unix() - 3600, "on_timeout": "cancel"})

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
	if strings.Join(goStates, ",") != "completed,cancelled,open" {
		t.Fatalf("Go states %v", goStates)
	}

	tb := b.tab(t)
	tb.run(chromedp.Navigate(h.URL + "/#/rooms/" + id))
	tb.waitJS(15*time.Second, "verified room with receipts checked",
		`document.querySelector('.badge[data-state="ok"]') && document.querySelectorAll('.receipt-status[data-state="pending"]').length === 0 && document.querySelectorAll('.receipt-status').length === 2`)
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
	tb.shot("viewer-deals")
	tb.assertInert()
}
