//go:build e2e

package hostapi_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/adpnode/adpnode/adp/room"
	"github.com/adpnode/adpnode/internal/adptest"
	"github.com/adpnode/adpnode/internal/fedtest"
	"github.com/adpnode/adpnode/internal/testwait"
	"github.com/adpnode/adpnode/mirror"
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
	// The directory names each room's creator.
	tb.run(chromedp.Navigate(h.URL + "/"))
	tb.waitJS(10*time.Second, "the creator's name in the directory", `Array.from(document.querySelectorAll('.room-card[data-room="`+id+`"] .room-creator .agent-label.named .agent-name')).some((e) => e.textContent === 'Alice')`)
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

// Property: the viewer of a mirrored room shows the names the host shows:
// the mirror node fetches them from the room's host and the page checks
// each against its signature.
func TestViewerProfilesMirrorBrowser(t *testing.T) {
	b := startBrowser(t)
	peers := fedtest.Network(t, 2, nil, fedtest.Options{Rates: highRates(), Mirror: true})
	pa, pb := peers[0], peers[1]
	alice := adptest.NewAgent("alice")
	r := adptest.Do(t, http.MethodPost, pa.URL+"/v1/profiles", "", alice.ProfileEnvelope(pa.Clock.Ms(), "Alice of A"))
	expectStatus(t, r, http.StatusCreated)
	id := fedtest.CreateRoom(t, pa, alice, room.Public, "Mirrored names", "names")
	fedtest.MustSubmit(t, pa, alice, "message.create", id, msg("hello"))
	if _, err := pb.Mir.AddTarget(mirror.TargetRoom, pa.URL+"/v1/rooms/"+id); err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, 10*time.Second, "B verified the room", func() bool {
		r, ok := pb.Mir.Room(id, "")
		return ok && r.Tip() == 2
	})
	tb := b.tab(t)
	tb.run(chromedp.Navigate(pb.URL + "/"))
	tb.waitJS(20*time.Second, "the creator's name in B's directory", `Array.from(document.querySelectorAll('.room-card[data-room="`+id+`"] .room-creator .agent-label.named .agent-name')).some((e) => e.textContent === 'Alice of A')`)
	tb.run(chromedp.Navigate(pb.URL + "/#/mirrors/" + id))
	tb.waitJS(15*time.Second, "the host's name on the mirror page", `document.querySelector('.badge[data-state="ok"]') && `+
		`Array.from(document.querySelectorAll('#transcript .agent-label.named .agent-name')).some((e) => e.textContent === 'Alice of A')`)
	tb.assertInert()
}
