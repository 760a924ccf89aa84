//go:build e2e

package hostapi_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/adpnode/adpnode/adp/room"
	"github.com/adpnode/adpnode/internal/adptest"
	"github.com/adpnode/adpnode/internal/fedtest"
	"github.com/adpnode/adpnode/internal/testwait"
	"github.com/adpnode/adpnode/mirror"
	istack "github.com/adpnode/adpnode/stack"
)

// The outcome page of a room B mirrors from A checks the archive's proof
// of its last record in A's host log against A's log key, not against B's
// own (B's discovery names B's log): a valid mirrored archive is shown
// valid. The same page served with the proof tampered (its key swapped
// for B's own log key, or its record hash changed) is shown red.
// Property: a mirror's outcome page trusts the room's host's log key only.
func TestViewerMirrorOutcomeBrowser(t *testing.T) {
	b := startBrowser(t)
	peers := fedtest.Network(t, 2, nil, fedtest.Options{Rates: highRates(), Mirror: true,
		HostLog: &istack.HostLogConfig{CheckpointInterval: 100 * time.Millisecond}})
	pa, pb := peers[0], peers[1]
	alice := adptest.NewAgent("alice")
	id := fedtest.CreateRoom(t, pa, alice, room.Public, "Mirrored and ended", "design")
	fedtest.MustSubmit(t, pa, alice, "message.create", id, msg("the only point"))
	if _, err := pb.Mir.AddTarget(mirror.TargetRoom, pa.URL+"/v1/rooms/"+id); err != nil {
		t.Fatal(err)
	}
	fedtest.MustSubmit(t, pa, alice, "room.close", id, map[string]any{})
	archivePath := "/v1/mirrors/rooms/" + id + "/archive"
	testwait.Until(t, 30*time.Second, "B's archive carries A's host-log proof of the last record", func() bool {
		r := adptest.Do(t, http.MethodGet, pb.URL+archivePath, "", nil)
		return r.Status == http.StatusOK && strings.Contains(string(r.Body), `"host_log"`) && strings.Contains(string(r.Body), `"room.close"`)
	})
	var disc struct {
		Log struct {
			VerifierKey string `json:"verifier_key"`
		} `json:"log"`
	}
	adptest.Do(t, http.MethodGet, pb.URL+"/.well-known/agent-discourse", "", nil).JSON(&disc)
	if disc.Log.VerifierKey == "" {
		t.Fatal("B's discovery names no log key")
	}

	tb := b.tab(t)
	outcome := func(origin string) (state, text string) {
		t.Helper()
		tb.run(chromedp.Navigate("about:blank"), chromedp.Navigate(origin+"/#/mirrors/"+id+"/outcome"))
		tb.waitJS(20*time.Second, "the archive's host-log proof checked", `(() => { const e = document.querySelector('.archive-log'); return e && e.dataset.state !== 'pending'; })()`)
		var v struct{ State, Text string }
		tb.eval(`(() => { const e = document.querySelector('.archive-log'); return { State: e.dataset.state, Text: e.textContent }; })()`, &v)
		return v.State, v.Text
	}
	if state, text := outcome(pb.URL); state != "ok" || !strings.Contains(text, "host-signed checkpoint") {
		t.Fatalf("valid mirrored archive shown %s: %q", state, text)
	}
	tb.waitJS(20*time.Second, "the archive verified", `document.querySelector('.outcome .badge[data-state="ok"]')`)
	tb.shot("viewer-mirror-outcome")
	tb.assertInert()

	// The same node behind a proxy that tampers with the archive's proof.
	for _, c := range []struct {
		name   string
		tamper func(hl map[string]any)
		want   string
	}{
		{"B's own log key", func(hl map[string]any) { hl["verifier_key"] = disc.Log.VerifierKey }, "✗"},
		{"another record", func(hl map[string]any) { hl["record_hash"] = strings.Repeat("A", 43) }, "not for the archive's last record"},
	} {
		t.Run(c.name, func(t *testing.T) {
			target, _ := url.Parse(pb.URL)
			proxy := httputil.NewSingleHostReverseProxy(target)
			proxy.ModifyResponse = func(r *http.Response) error {
				if r.Request.URL.Path != archivePath || r.StatusCode != http.StatusOK {
					return nil
				}
				body, err := io.ReadAll(r.Body)
				r.Body.Close()
				if err != nil {
					return err
				}
				var arch map[string]any
				if err := json.Unmarshal(body, &arch); err != nil {
					return err
				}
				c.tamper(arch["manifest"].(map[string]any)["extra"].(map[string]any)["host_log"].(map[string]any))
				body, _ = json.Marshal(arch)
				r.Body = io.NopCloser(bytes.NewReader(body))
				r.ContentLength = int64(len(body))
				r.Header.Del("Content-Length")
				r.Header.Del("ETag")
				return nil
			}
			srv := httptest.NewServer(proxy)
			defer srv.Close()
			if state, text := outcome(srv.URL); state != "bad" || !strings.Contains(text, c.want) {
				t.Fatalf("tampered proof (%s) shown %s: %q", c.name, state, text)
			}
		})
	}
}
