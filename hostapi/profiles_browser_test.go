package hostapi_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/adpnode/adpnode/internal/adptest"
	"github.com/adpnode/adpnode/node"
)

// Property: the viewer shows an agent's profile name as inert text beside
// its key's fragment: a name holding HTML, Markdown or bidi controls
// renders as plain text with the controls removed and activates nothing,
// and two agents with the same name (one of them a copy of another
// agent's Agent ID) stay apart by their key fragments.
func TestViewerProfilesBrowser(t *testing.T) {
	b := startBrowser(t)
	h := adptest.StartHost(t, node.Config{Rates: highRates()})
	alice, mallory, bob := adptest.NewAgent("alice"), adptest.NewAgent("mallory"), adptest.NewAgent("bob")
	now := h.Clock.Ms()
	hostile := `<img src=x onerror=__pwned=1>**A**` + "\u202e" + `[x](javascript:x)`
	expectStatus(t, putProfile(t, h, alice.ProfileEnvelope(now, "Alice")), http.StatusCreated)
	expectStatus(t, putProfile(t, h, mallory.ProfileEnvelope(now, "Alice")), http.StatusCreated)
	expectStatus(t, putProfile(t, h, bob.ProfileEnvelope(now, hostile)), http.StatusCreated)
	id := h.CreateRoom(t, alice, h.RoomPayload("public"))
	for _, a := range []*adptest.Agent{mallory, bob} {
		h.MustPost(t, a, id, "room.join", map[string]any{"role": "speaker"})
		h.MustPost(t, a, id, "message.create", md("hello from "+a.Name))
	}

	tb := b.tab(t)
	tb.run(chromedp.Navigate(h.URL + "/#/rooms/" + id))
	tb.waitJS(15*time.Second, "names shown", `document.querySelector('.badge[data-state="ok"]') && document.querySelectorAll('#transcript .agent-label.named').length >= 5`)
	var got struct {
		Labels []struct{ ID, Name, Key, HTML string }
	}
	tb.eval(`(() => ({ Labels: Array.from(document.querySelectorAll('#transcript .agent-label')).map((e) => ({
  ID: e.dataset.agentId, Name: e.querySelector('.agent-name').textContent, Key: e.querySelector('.agent-key').textContent,
  HTML: e.querySelector('.agent-name').innerHTML })) }))()`, &got)
	seen := map[string]string{}
	for _, l := range got.Labels {
		switch l.ID {
		case string(bob.ID):
			want := strings.ReplaceAll(hostile, "\u202e", "")
			if l.Name != want || strings.Contains(l.HTML, "<img") || strings.ContainsRune(l.Name, '\u202e') {
				t.Fatalf("hostile name not inert: %+v", l)
			}
		case string(alice.ID), string(mallory.ID):
			if l.Name != "Alice" {
				t.Fatalf("name of %s: %+v", l.ID, l)
			}
		}
		if l.Key != "" && l.Key != l.ID[10:18] {
			t.Fatalf("key fragment of %s: %q", l.ID, l.Key)
		}
		if prev, ok := seen[l.Name+"|"+l.Key]; ok && prev != l.ID {
			t.Fatalf("two agents render the same label %q · %q", l.Name, l.Key)
		}
		seen[l.Name+"|"+l.Key] = l.ID
	}
	if len(seen) < 3 {
		t.Fatalf("labels: %+v", got.Labels)
	}
	tb.shot("profiles")
	tb.assertInert()
}
