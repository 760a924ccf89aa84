//go:build e2e

package hostapi_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/adpnode/adpnode/adp"
	"github.com/adpnode/adpnode/adp/identity"
	"github.com/adpnode/adpnode/adp/profile"
	"github.com/adpnode/adpnode/internal/adptest"
	"github.com/adpnode/adpnode/node"
)

type profileView struct {
	AgentID      string          `json:"agent_id"`
	Name         string          `json:"name"`
	Capabilities []string        `json:"capabilities"`
	Envelope     json.RawMessage `json:"envelope"`
	ReceivedAt   int64           `json:"received_at"`
	SelfAsserted bool            `json:"self_asserted"`
}

func putProfile(t testing.TB, h *adptest.Host, env []byte) *adptest.Response {
	t.Helper()
	return adptest.Do(t, http.MethodPost, h.URL+"/v1/profiles", "", env)
}

// checkProfile reads a's profile from h and checks it is name, served with
// an envelope that verifies on its own as a's.
func checkProfile(t testing.TB, h *adptest.Host, a *adptest.Agent, name string) profileView {
	t.Helper()
	r := get(t, h, nil, "/v1/profiles/"+string(a.ID))
	expectStatus(t, r, http.StatusOK)
	p := decode[profileView](t, r)
	if p.AgentID != string(a.ID) || p.Name != name || !p.SelfAsserted {
		t.Fatalf("profile of %s: %s", a.Name, short(r))
	}
	again, err := profile.Open(p.Envelope)
	if err != nil || again.ID != a.ID || again.Name != name {
		t.Fatalf("served envelope does not verify as %s's: %v", a.Name, err)
	}
	return p
}

// Property: an agent's signed profile.update is stored and served with
// its original envelope; a forged, replayed, older, other-agent or
// oversized update is refused with the spec's error shape and changes
// nothing; the nonce is the agent's one sequence, shared with its room
// writes; discovery says profile.mode local.
func TestProfileLocal(t *testing.T) {
	h := adptest.StartHost(t, node.Config{})
	alice, bob := adptest.NewAgent("alice"), adptest.NewAgent("bob")
	now := h.Clock.Ms()

	r := get(t, h, nil, "/v1/profiles/"+string(alice.ID))
	expectCode(t, r, adp.CodeNotFound)

	first := alice.ProfileEnvelope(now, "Alice", "research")
	r = putProfile(t, h, first)
	expectStatus(t, r, http.StatusCreated)
	if r.Header.Get("Max-Seen-Nonce") == "" {
		t.Fatal("no Max-Seen-Nonce on an accepted profile")
	}
	checkProfile(t, h, alice, "Alice")

	// The same envelope again is a lookup (Identity §9).
	r = putProfile(t, h, first)
	expectStatus(t, r, http.StatusOK)

	// A newer one replaces it; the older one replayed does not come back.
	second := alice.ProfileEnvelope(now, "Alice II")
	expectStatus(t, putProfile(t, h, second), http.StatusCreated)
	older := alice.Sign(identity.Event{Protocol: profile.Protocol, Type: profile.Type, Actor: alice.ID, CreatedAt: now,
		Nonce: 1, Payload: json.RawMessage(`{"id":"` + string(alice.ID) + `","name":"Old"}`)})
	r = putProfile(t, h, older)
	expectCode(t, r, adp.CodeNonceNotGreater)
	if r.Header.Get("Max-Seen-Nonce") == "" {
		t.Fatal("nonce refusal without Max-Seen-Nonce")
	}
	expectCode(t, putProfile(t, h, first), adp.CodeNonceNotGreater)
	checkProfile(t, h, alice, "Alice II")

	// Hostile updates.
	forged := bytes.Replace(alice.ProfileEnvelope(now, "Alice III"), []byte("Alice III"), []byte("Mallory!!"), 1)
	expectCode(t, putProfile(t, h, forged), adp.CodeInvalidEventHash)
	// Bob signs a profile naming Alice's key.
	other := bob.Sign(identity.Event{Protocol: profile.Protocol, Type: profile.Type, Actor: bob.ID, CreatedAt: now,
		Nonce: bob.Nonce(now), Payload: json.RawMessage(`{"id":"` + string(alice.ID) + `","name":"Alice is Bob"}`)})
	expectCode(t, putProfile(t, h, other), adp.CodePermissionDenied)
	expectCode(t, putProfile(t, h, alice.ProfileEnvelope(now, strings.Repeat("n", 65))), adp.CodePayloadTooLarge)
	stale := alice.ProfileEnvelope(now-int64(10*time.Minute/time.Millisecond), "Stale")
	expectCode(t, putProfile(t, h, stale), adp.CodeTimestampOutOfWindow)
	expectCode(t, putProfile(t, h, []byte(`{"event":{}}`)), adp.CodeInvalidEvent)
	checkProfile(t, h, alice, "Alice II")

	// One nonce sequence per agent: a room write may not reuse a nonce
	// the profile spent.
	var spent struct {
		Event struct {
			Nonce int64 `json:"nonce"`
		} `json:"event"`
	}
	if err := json.Unmarshal(second, &spent); err != nil {
		t.Fatal(err)
	}
	ev := alice.Event(now, "room.create", "", 0, "", h.RoomPayload("public"))
	ev.Nonce = spent.Event.Nonce
	expectCode(t, submit(t, h, "", alice.Sign(ev)), adp.CodeNonceNotGreater)

	// Batch lookup: found ones in order, unknown left out, malformed refused.
	expectStatus(t, putProfile(t, h, bob.ProfileEnvelope(now, "Bob")), http.StatusCreated)
	carol := adptest.NewAgent("carol")
	r = get(t, h, nil, "/v1/profiles?ids="+string(bob.ID)+","+string(carol.ID)+","+string(alice.ID))
	expectStatus(t, r, http.StatusOK)
	list := decode[struct{ Result []profileView }](t, r)
	if len(list.Result) != 2 || list.Result[0].Name != "Bob" || list.Result[1].Name != "Alice II" {
		t.Fatalf("batch: %s", short(r))
	}
	expectCode(t, get(t, h, nil, "/v1/profiles?ids=did:agent:nope"), adp.CodeInvalidRequest)
	expectCode(t, get(t, h, nil, "/v1/profiles/not-an-id"), adp.CodeInvalidRequest)

	var d struct {
		Features []string `json:"features"`
		Profile  struct {
			Mode, Service, Protocol string
		} `json:"profile"`
	}
	if err := get(t, h, nil, "/.well-known/agent-discourse").JSON(&d); err != nil {
		t.Fatal(err)
	}
	if d.Profile.Mode != "local" || d.Profile.Service != h.URL || d.Profile.Protocol != "agent-profile/1.0" || !strings.Contains(strings.Join(d.Features, ","), "profiles") {
		t.Fatalf("discovery profile: %+v %v", d.Profile, d.Features)
	}
}

// Property: profile updates are rate limited per agent like other writes,
// and the host's cap on stored profiles holds while updates of stored ones
// still fit.
func TestProfileBounds(t *testing.T) {
	h := adptest.StartHost(t, node.Config{MaxProfiles: 2, Rates: node.Rates{Message: 5, Profile: 3}})
	now := h.Clock.Ms()
	a, b, c := adptest.NewAgent("a"), adptest.NewAgent("b"), adptest.NewAgent("c")
	for i := range 3 {
		expectStatus(t, putProfile(t, h, a.ProfileEnvelope(now, "A"+strconv.Itoa(i))), http.StatusCreated)
	}
	r := putProfile(t, h, a.ProfileEnvelope(now, "A3"))
	expectCode(t, r, adp.CodeRateLimited)
	if r.Header.Get("Retry-After") == "" {
		t.Fatal("rate limit without Retry-After")
	}
	expectStatus(t, putProfile(t, h, b.ProfileEnvelope(now, "B")), http.StatusCreated)
	expectCode(t, putProfile(t, h, c.ProfileEnvelope(now, "C")), adp.CodeRateLimited)
	expectStatus(t, putProfile(t, h, b.ProfileEnvelope(now, "B2")), http.StatusCreated)
	expectCode(t, get(t, h, nil, "/v1/profiles/"+string(c.ID)), adp.CodeNotFound)
}

// Property: a profile survives a restart on the same data dir, and a
// backup restored into a new data dir, byte for byte.
func TestProfileRestartAndRestore(t *testing.T) {
	dir := t.TempDir()
	h := adptest.StartHost(t, node.Config{DataDir: filepath.Join(dir, "data")})
	a := adptest.NewAgent("durable")
	expectStatus(t, putProfile(t, h, a.ProfileEnvelope(h.Clock.Ms(), "Durable", "x")), http.StatusCreated)
	before := checkProfile(t, h, a, "Durable")

	h = h.Restart(t)
	after := checkProfile(t, h, a, "Durable")
	if !bytes.Equal(before.Envelope, after.Envelope) || before.ReceivedAt != after.ReceivedAt {
		t.Fatal("profile changed across a restart")
	}
	var buf bytes.Buffer
	if err := h.Node.Backup(&buf); err != nil {
		t.Fatal(err)
	}
	h.Close()
	restored := filepath.Join(dir, "restored")
	if err := node.RestoreDir(restored, bytes.NewReader(buf.Bytes())); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(restored); err != nil {
		t.Fatal(err)
	}
	h2 := adptest.StartHost(t, node.Config{DataDir: restored})
	got := checkProfile(t, h2, a, "Durable")
	if !bytes.Equal(before.Envelope, got.Envelope) {
		t.Fatal("restored profile differs")
	}
	// The same envelope again is still a lookup of the stored one.
	r := putProfile(t, h2, before.Envelope)
	expectStatus(t, r, http.StatusOK)
	if decode[profileView](t, r).ReceivedAt != before.ReceivedAt {
		t.Fatal("a resubmission after restore changed received_at")
	}
}

// Property: an archive's Markdown names agents by their profile name as
// escaped, inert text marked self-asserted, after the Agent ID; an agent
// without a profile is shown by its ID alone.
func TestProfileArchiveMarkdown(t *testing.T) {
	h := adptest.StartHost(t, node.Config{})
	c, s := adptest.NewAgent("md-creator"), adptest.NewAgent("md-speaker")
	hostile := "<img src=x>**A**\u202e# [x](javascript:x)`"
	expectStatus(t, putProfile(t, h, s.ProfileEnvelope(h.Clock.Ms(), hostile)), http.StatusCreated)
	id := createRoom(t, h, c, roomPayload("public", h.Clock.Ms(), time.Hour))
	joinRoom(t, h, s, id, "speaker")
	h.MustPost(t, s, id, "message.create", msg("hi"))
	h.Clock.Advance(time.Second)
	h.MustPost(t, c, id, "room.close", map[string]any{"reason": "done"})
	r := get(t, h, nil, "/v1/rooms/"+id+"/archive.md")
	expectStatus(t, r, http.StatusOK)
	out := string(r.Body)
	escaped := `\<img src=x\>\*\*A\*\*\# \[x\]\(javascript:x\)\` + "`" + ` _(self-asserted name)_`
	if !strings.Contains(out, "- `"+string(s.ID)+"` "+escaped+" (speaker)") ||
		!strings.Contains(out, "message.create — `"+string(s.ID)+"` "+escaped+"\n") {
		t.Fatalf("archive.md does not name the speaker inertly:\n%s", out)
	}
	if strings.Count(out, "<img") != strings.Count(out, `\<img`) || strings.ContainsRune(out, '\u202e') {
		t.Fatalf("archive.md carries the raw name:\n%s", out)
	}
	if !strings.Contains(out, "- `"+string(c.ID)+"` (moderator)") {
		t.Fatalf("an agent without a profile is not shown by its ID alone:\n%s", out)
	}
}

// Property: a name grants nothing. An agent whose profile name is another
// agent's name or Agent ID gets none of that agent's rights: room state
// and every permission use Agent IDs only.
func TestProfileNameGrantsNothing(t *testing.T) {
	h := adptest.StartHost(t, node.Config{})
	alice, mallory := adptest.NewAgent("alice"), adptest.NewAgent("mallory")
	now := h.Clock.Ms()
	expectStatus(t, putProfile(t, h, alice.ProfileEnvelope(now, "Alice")), http.StatusCreated)
	p := roomPayload("restricted", now, time.Hour)
	id := createRoom(t, h, alice, p)
	for _, name := range []string{"Alice", string(alice.ID)} {
		expectStatus(t, putProfile(t, h, mallory.ProfileEnvelope(now, name)), http.StatusCreated)
		// Not a member of a restricted room: a join needs approval.
		r := h.Post(t, mallory, id, "room.join", map[string]any{"role": "speaker"})
		if r.Status < 400 {
			t.Fatalf("mallory named %q joined a restricted room: %s", name, short(r))
		}
		// Creator-only actions stay the creator's.
		r = h.Post(t, mallory, id, "room.close", map[string]any{"reason": "mine"})
		if r.Status < 400 {
			t.Fatalf("mallory named %q closed alice's room: %s", name, short(r))
		}
	}
	if got := getRoom(t, h, nil, id); got.Status != "active" && got.Status != "scheduled" {
		t.Fatalf("room state changed: %+v", got)
	}
	var res struct {
		Creator string `json:"creator"`
	}
	if err := get(t, h, nil, "/v1/rooms/"+id).JSON(&res); err != nil || res.Creator != string(alice.ID) {
		t.Fatalf("creator: %+v %v", res, err)
	}
}

// Property: agents racing for the last places under the host's cap on
// stored profiles do not overshoot it.
func TestProfileCapConcurrent(t *testing.T) {
	h := adptest.StartHost(t, node.Config{MaxProfiles: 5})
	now := h.Clock.Ms()
	var wg sync.WaitGroup
	var accepted atomic.Int64
	for i := range 40 {
		a := adptest.NewAgent("racer" + strconv.Itoa(i))
		env := a.ProfileEnvelope(now, "Racer")
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := http.Post(h.URL+"/v1/profiles", "application/json", bytes.NewReader(env))
			if err != nil {
				return
			}
			r.Body.Close()
			if r.StatusCode == http.StatusCreated {
				accepted.Add(1)
			}
		}()
	}
	wg.Wait()
	if n := accepted.Load(); n != 5 {
		t.Fatalf("%d first profiles accepted under a cap of 5", n)
	}
}
