//go:build e2e

package hostapi_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/adpnode/adpnode/adp"
	"github.com/adpnode/adpnode/attention"
	"github.com/adpnode/adpnode/internal/adptest"
	"github.com/adpnode/adpnode/internal/testwait"
	"github.com/adpnode/adpnode/node"
)

// mention posts a message in roomID by a that mentions who.
func mention(t testing.TB, h *adptest.Host, a *adptest.Agent, roomID string, who ...*adptest.Agent) {
	t.Helper()
	head := h.Head(t, a, roomID)
	ev := a.Event(h.Clock.Ms(), "message.create", roomID, head.Seq, head.Hash, msg("hello"))
	for _, w := range who {
		ev.Mentions = append(ev.Mentions, string(w.ID))
	}
	if r := submit(t, h, roomID, a.Sign(ev)); r.Status != http.StatusOK && r.Status != http.StatusCreated {
		t.Fatalf("mention: %s", r)
	}
}

type feedPage struct {
	StreamID        string                  `json:"stream_id"`
	VisibilityEpoch string                  `json:"visibility_epoch"`
	Items           []json.RawMessage       `json:"items"`
	NextAfter       int64                   `json:"next_after"`
	HasMore         bool                    `json:"has_more"`
	ResetRequired   bool                    `json:"reset_required"`
	Decoded         []attention.MentionItem `json:"-"`
}

func readPage(t testing.TB, h *adptest.Host, a *adptest.Agent, path string) feedPage {
	t.Helper()
	r := get(t, h, a, path)
	expectStatus(t, r, http.StatusOK)
	return decode[feedPage](t, r)
}

func TestAttentionHTTP(t *testing.T) {
	h := adptest.StartHost(t, node.Config{DataDir: filepath.Join(t.TempDir(), "db"), Rates: highRates()})
	alice, bob, carol := adptest.NewAgent("alice"), adptest.NewAgent("bob"), adptest.NewAgent("carol")
	pub := roomPayload("public", h.Clock.Ms(), time.Hour)
	pub["tags"] = []string{"research"}
	pubID := createRoom(t, h, bob, pub)
	priv := roomPayload("private", h.Clock.Ms(), time.Hour)
	priv["tags"] = []string{"research"}
	privID := createRoom(t, h, carol, priv)

	// Every endpoint needs the agent's request JWT.
	for _, p := range []string{"/v1/me/subscriptions", "/v1/me/mentions", "/v1/me/stream", "/v1/me/subscriptions/x/feed"} {
		expectCode(t, get(t, h, nil, p), adp.CodeInvalidToken)
	}
	r := sendJSON(t, h, alice, http.MethodPost, "/v1/me/subscriptions", map[string]any{"filter": map[string]any{"tags": []string{"research"}}})
	expectStatus(t, r, http.StatusCreated)
	sub := decode[attention.Subscription](t, r)
	// Hostile bodies get the spec's error shape.
	expectCode(t, sendJSON(t, h, alice, http.MethodPost, "/v1/me/subscriptions", map[string]any{"filter": map[string]any{"keyword": strings.Repeat("k", 3000)}}), adp.CodeInvalidRequest)
	expectCode(t, sendJSON(t, h, alice, http.MethodPost, "/v1/me/subscriptions", map[string]any{"filter": map[string]any{}, "extra": 1}), adp.CodeInvalidRequest)
	expectCode(t, sendJSON(t, h, alice, http.MethodPost, "/v1/me/subscriptions", map[string]any{"filter": map[string]any{}, "ttl_seconds": 40 * 86400}), adp.CodeInvalidRequest)
	stream := readPage(t, h, alice, "/v1/me/subscriptions/"+sub.ID+"/feed?after=0").StreamID
	for _, q := range []string{"?after=abc", "?after=-1", "?after=99&stream_id=" + stream, "?after=1.5", "?limit=100000", "?stream_id=a%00b"} {
		expectCode(t, get(t, h, alice, "/v1/me/subscriptions/"+sub.ID+"/feed"+q), adp.CodeInvalidRequest)
	}
	expectCode(t, get(t, h, bob, "/v1/me/subscriptions/"+sub.ID+"/feed"), adp.CodeNotFound)

	p := readPage(t, h, alice, "/v1/me/subscriptions/"+sub.ID+"/feed?after=0")
	if len(p.Items) != 1 || !strings.Contains(string(p.Items[0]), pubID) || p.NextAfter != 1 {
		t.Fatalf("snapshot %+v", p)
	}
	// The live stream: subscribe, then read after the cursor.
	st, resp := dialStream(t, h.URL+"/v1/me/stream", tok(h, alice), 64)
	if st == nil {
		t.Fatalf("stream: %s", resp)
	}
	defer st.Close()
	if c, ok := st.nextAny(20 * time.Second); !ok || !strings.HasPrefix(c.Comment, "subscribed") {
		t.Fatalf("stream opened with %+v", c)
	}
	mention(t, h, bob, pubID, alice)
	it := st.mustNext("mention")
	if !strings.Contains(string(it.Data), pubID) {
		t.Fatalf("live mention %s", it.Data)
	}
	// A private room: carol mentions alice, who may not read it.
	mention(t, h, carol, privID, alice, carol)
	var cp feedPage
	testwait.Until(t, 10*time.Second, "carol's mention stored", func() bool {
		cp = readPage(t, h, carol, "/v1/me/mentions")
		return len(cp.Items) > 0
	})
	if len(cp.Items) != 1 || !strings.Contains(string(cp.Items[0]), privID) {
		t.Fatalf("carol's inbox %+v", cp)
	}
	mp := readPage(t, h, alice, "/v1/me/mentions?after=0")
	if len(mp.Items) != 1 || !strings.Contains(string(mp.Items[0]), pubID) || strings.Contains(string(mp.Items[0]), privID) {
		t.Fatalf("alice's inbox %+v", mp)
	}
	// Ending the public room makes it unavailable in the feed.
	h.MustPost(t, bob, pubID, "room.update", map[string]any{"topic": "renamed"})
	testwait.Until(t, 10*time.Second, "changed item", func() bool {
		return len(readPage(t, h, alice, fmt.Sprintf("/v1/me/subscriptions/%s/feed?after=1", sub.ID)).Items) == 1
	})

	// Restart: cursor, stream and subscriptions survive.
	st.Close()
	h = h.Restart(t)
	mp2 := readPage(t, h, alice, fmt.Sprintf("/v1/me/mentions?after=%d&stream_id=%s&visibility_epoch=%s", mp.NextAfter, mp.StreamID, mp.VisibilityEpoch))
	if mp2.ResetRequired || len(mp2.Items) != 0 || mp2.StreamID != mp.StreamID {
		t.Fatalf("after restart %+v", mp2)
	}
	l := decode[struct{ Subscriptions []attention.Subscription }](t, get(t, h, alice, "/v1/me/subscriptions"))
	if len(l.Subscriptions) != 1 {
		t.Fatalf("list %+v", l)
	}
	r = adptest.Do(t, http.MethodDelete, h.URL+"/v1/me/subscriptions/"+sub.ID, tok(h, alice), nil)
	expectStatus(t, r, http.StatusNoContent)
	expectCode(t, adptest.Do(t, http.MethodDelete, h.URL+"/v1/me/subscriptions/"+sub.ID, tok(h, alice), nil), adp.CodeNotFound)
	// Discovery names the extension.
	d := get(t, h, nil, "/.well-known/agent-discourse")
	if !strings.Contains(string(d.Body), `"x-attention"`) {
		t.Fatal("discovery lacks x-attention")
	}
}
