//go:build e2e

package hostapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/adpnode/adpnode/adp/identity"
	"github.com/adpnode/adpnode/adp/receipt"
	"github.com/adpnode/adpnode/adp/record"
	"github.com/adpnode/adpnode/adp/rounds"
	"github.com/adpnode/adpnode/adp/seal"
	"github.com/adpnode/adpnode/client"
	"github.com/adpnode/adpnode/internal/adptest"
	"github.com/adpnode/adpnode/node"
)

// The viewer on a member-only room with sealed rounds and receipts: it
// shows no plaintext and never decrypts; a member's opened export, loaded
// into the "Sealed events" card through the file input, is matched to the
// verified records by seq and hash (a tampered entry is not), its turns
// fold into the same round states as Go derives, and its receipts' two
// signatures are checked again in the browser (a bad sigB in red), and so
// is where each counts: a co-signed receipt of a round never agreed is red
// with the reason, as Go flags it. Hostile turn text stays inert.
func TestViewerSealedDealsBrowser(t *testing.T) {
	b := startBrowser(t)
	h := adptest.StartHost(t, node.Config{Rates: highRates()})
	ctx := context.Background()
	mk := func(name string) *client.Client {
		return adptest.SeededClient(t, h.URL, h.Clock, "viewer sealed deals "+name)
	}
	alice, bob := mk("alice"), mk("bob")
	p := h.RoomPayload("public")
	p["types"] = h.BundledPacks(t, rounds.PackID, receipt.PackID)
	cr, err := alice.CreateSealedRoom(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	id := cr.ID
	if _, err := bob.Join(ctx, id, "speaker", "", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := bob.PublishSealKey(ctx, id); err != nil {
		t.Fatal(err)
	}
	send := func(c *client.Client, typ string, pl any) *record.Record {
		t.Helper()
		rec, err := c.Send(ctx, id, 10, nil, func(*client.Room, []*record.Record) (string, any, error) { return typ, pl, nil })
		if err != nil {
			t.Fatal(err)
		}
		return rec
	}
	hashOf := func(rec *record.Record) string {
		env, err := identity.ParseEnvelope(rec.Envelope)
		if err != nil {
			t.Fatal(err)
		}
		return env.Hash
	}
	const goal = "sealed-goal-5521"
	hostile := `<img src=x onerror="window.__pwned='sealed'">`
	opts := []rounds.Option{{ID: "std", Title: "Standard"}, {ID: "fast", Title: "Express"}}
	r1 := hashOf(send(alice, rounds.EventType, rounds.Payload{Type: rounds.Propose, Text: "Widgets? " + hostile, Goal: goal, Options: opts}))
	send(bob, rounds.EventType, rounds.Payload{Type: rounds.Accept, Text: "fast", Ref: r1, Choice: "fast"})
	send(alice, rounds.EventType, rounds.Payload{Type: rounds.Confirm, Text: "ok", Ref: r1})
	send(alice, rounds.EventType, rounds.Payload{Type: rounds.Deliver, Text: "here", Ref: r1, Options: []rounds.Option{{ID: "box", Title: "Box"}}})
	send(bob, rounds.EventType, rounds.Payload{Type: rounds.Complete, Text: "thanks", Ref: r1})
	r2 := hashOf(send(alice, rounds.EventType, rounds.Payload{Type: rounds.Propose, Text: "Lunch?", Goal: "lunch", Options: opts}))
	send(bob, rounds.EventType, rounds.Payload{Type: rounds.Cancel, Text: "no", Ref: r2})
	rc := &receipt.Receipt{Type: receipt.Type, PartyA: alice.Key.ID.String(), PartyB: bob.Key.ID.String(), TermsHash: strings.Repeat("A", 43), Context: id, Ref: r1, TS: 1}
	if rc.Sign(alice.Key.Private()) != nil || rc.Sign(bob.Key.Private()) != nil {
		t.Fatal("sign")
	}
	good := send(bob, receipt.EventType, json.RawMessage(rc.Marshal()))
	other := *rc
	other.TS++
	if other.Sign(bob.Key.Private()) != nil {
		t.Fatal("sign")
	}
	bad := *rc
	bad.SigB = other.SigB
	badRec := send(bob, receipt.EventType, json.RawMessage(bad.Marshal()))
	// Co-signed by the two agents, for a round never agreed (r2, cancelled
	// while open): its signatures verify, and it does not count.
	never := *rc
	never.Ref, never.SigA, never.SigB = r2, "", ""
	if never.Sign(alice.Key.Private()) != nil || never.Sign(bob.Key.Private()) != nil {
		t.Fatal("sign")
	}
	neverRec := send(alice, receipt.EventType, json.RawMessage(never.Marshal()))

	// Go's view, as bob.
	co, err := bob.Coordination(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	var goStates []string
	for _, r := range co.Rounds.Rounds {
		goStates = append(goStates, string(r.State))
	}
	if strings.Join(goStates, ",") != "completed,cancelled" {
		t.Fatalf("Go states %v", goStates)
	}
	if n := len(co.Receipts); n != 3 || co.Receipts[0].Err != nil || co.Receipts[1].Err == nil || !errors.Is(co.Receipts[2].Err, receipt.ErrNotAgreed) {
		t.Fatalf("Go receipts %+v", co.Receipts)
	}

	// Bob's opened export, as `adpnode seal open` writes it, plus one
	// tampered entry: the good receipt claimed at another record's seq.
	type entry struct {
		Seq         int64           `json:"seq"`
		Hash        string          `json:"hash"`
		EventHash   string          `json:"event_hash"`
		Actor       string          `json:"actor"`
		Epoch       int64           `json:"epoch"`
		ContentType string          `json:"content_type"`
		EventType   string          `json:"event_type,omitempty"`
		Payload     json.RawMessage `json:"payload,omitempty"`
	}
	var entries []entry
	for _, rec := range co.Records {
		o, ok, err := bob.Open(ctx, id, rec)
		if err != nil {
			t.Fatal(err)
		}
		if ok && o.Sealed && o.Err == nil && o.ContentType == seal.EventContentType {
			entries = append(entries, entry{rec.Seq, rec.Hash, o.Hash, string(o.Actor), o.Epoch, o.ContentType, o.Type, o.Payload})
		}
	}
	var tampered entry
	for _, e := range entries {
		if e.Seq == good.Seq {
			tampered = e
		}
	}
	tampered.Seq = badRec.Seq - 2 // a verified turn's seq, with the receipt's hash
	entries = append(entries, tampered)
	exp, _ := json.Marshal(map[string]any{"type": "adpnode.sealed-open/1", "room_id": id, "member": bob.Key.ID, "entries": entries})
	path := filepath.Join(t.TempDir(), "opened.json")
	if err := os.WriteFile(path, exp, 0o600); err != nil {
		t.Fatal(err)
	}

	tb := b.tab(t)
	tb.run(chromedp.Navigate(h.URL + "/#/rooms/" + id))
	tb.waitJS(15*time.Second, "verified sealed room", `document.querySelector('.badge[data-state="ok"]') && document.querySelector('.sealed-card .sealed-file') && document.querySelector('#transcript > li[data-seq="`+fmt.Sprint(badRec.Seq)+`"]')`)
	var page string
	tb.eval(`document.body.innerText`, &page)
	if strings.Contains(page, goal) || strings.Contains(page, "Widgets?") {
		t.Fatal("the viewer shows sealed plaintext before any export is loaded")
	}
	tb.run(chromedp.SetUploadFiles(`.sealed-card .sealed-file`, []string{path}))
	tb.waitJS(15*time.Second, "export loaded", `(document.querySelector('.sealed-out') || {dataset: {}}).dataset.state === 'loaded'`)
	var v struct {
		States                 []string
		Good, BadText, BadSt   string
		Never, NeverSt         string
		Matched, Unmatched     int
		TamperedWhy, TamperedT string
	}
	tb.eval(fmt.Sprintf(`(() => {
  const row = (seq, type) => document.querySelector('.sealed-entry[data-seq="' + seq + '"][data-type="' + type + '"]');
  const t = row(%d, 'deal.receipt');
  return {
    States: Array.from(document.querySelectorAll('.sealed-rounds li.round')).map((e) => e.dataset.state),
    Good: row(%d, 'deal.receipt').querySelector('.receipt-status').dataset.state,
    BadText: row(%d, 'deal.receipt').querySelector('.receipt-status').textContent,
    BadSt: row(%d, 'deal.receipt').querySelector('.receipt-status').dataset.state,
    Never: row(%d, 'deal.receipt').querySelector('.receipt-status').textContent,
    NeverSt: row(%d, 'deal.receipt').querySelector('.receipt-status').dataset.state,
    Matched: document.querySelectorAll('.sealed-entry[data-state="matched"]').length,
    Unmatched: document.querySelectorAll('.sealed-entry[data-state="unmatched"]').length,
    TamperedWhy: t ? t.querySelector('.sealed-why').textContent : '',
    TamperedT: t ? t.querySelector('.receipt-status').dataset.state : '',
  };
})()`, tampered.Seq, good.Seq, badRec.Seq, badRec.Seq, neverRec.Seq, neverRec.Seq), &v)
	if strings.Join(v.States, ",") != strings.Join(goStates, ",") {
		t.Errorf("page states %v, Go %v", v.States, goStates)
	}
	if v.Good != "ok" || v.BadSt != "bad" || !strings.Contains(v.BadText, "sigB: signature does not verify") || strings.Contains(v.BadText, "sigA") {
		t.Errorf("receipts: %+v", v)
	}
	if v.NeverSt != "bad" || !strings.Contains(v.Never, "receipt does not count here — names a round that was not agreed before it") {
		t.Errorf("receipt of a round never agreed: %+v", v)
	}
	if v.Matched != len(entries)-1 || v.Unmatched != 1 || !strings.Contains(v.TamperedWhy, "hash is not the verified record") || v.TamperedT != "bad" {
		t.Errorf("matching: %+v (entries %d)", v, len(entries))
	}
	tb.shot("viewer-sealed-deals")
	tb.assertInert()
}
