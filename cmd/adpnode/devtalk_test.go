//go:build e2e

package main

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/adpnode/adpnode/client"
	"github.com/adpnode/adpnode/internal/adptest"
	"github.com/adpnode/adpnode/node"
)

// count429 counts the host's rate-limit answers seen by a client.
type count429 struct {
	n    *atomic.Int64
	next http.RoundTripper
}

func (c count429) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := c.next.RoundTrip(r)
	if err == nil && resp.StatusCode == http.StatusTooManyRequests {
		c.n.Add(1)
	}
	return resp, err
}

// talkFixture is a host with a tiny message quota on a fake clock, a demo
// room and the three demo agents; Sleep advances the clock.
type talkFixture struct {
	h      *adptest.Host
	agents []*client.Client
	roomID string
	got429 atomic.Int64
	slept  time.Duration
	out    strings.Builder
	errOut strings.Builder
}

func newTalkFixture(t *testing.T) *talkFixture {
	t.Helper()
	f := &talkFixture{}
	f.h = adptest.StartHost(t, node.Config{Rates: node.Rates{Message: 2, Signal: 2, Control: 2,
		MessageCeiling: 2, SignalCeiling: 2, ControlCeiling: 2, AgentStatus: 10}})
	for range 3 {
		k, err := client.GenerateKey()
		if err != nil {
			t.Fatal(err)
		}
		c := client.New(f.h.URL, k)
		c.Now = f.h.Clock.Now
		c.HTTP = &http.Client{Timeout: 10 * time.Second, Transport: count429{&f.got429, http.DefaultTransport}}
		f.agents = append(f.agents, c)
	}
	ctx := context.Background()
	now := f.h.Clock.Ms()
	room, err := f.agents[0].CreateRoom(ctx, map[string]any{"topic": "talk test", "visibility": "public",
		"start_time": now, "end_time": now + 3_600_000,
		"types": []any{map[string]any{"use": "adp:reactions/1.0"}}})
	if err != nil {
		t.Fatal(err)
	}
	f.roomID = room.ID
	for _, a := range f.agents[1:] {
		if _, err := a.Join(ctx, room.ID, "speaker", "", ""); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

func (f *talkFixture) config(rates node.Rates) talkConfig {
	return talkConfig{Agents: f.agents, Names: []string{"moderator", "analyst", "skeptic"}, RoomID: f.roomID,
		Script: demoScript, Interval: 10 * time.Millisecond, Rates: rates, Now: f.h.Clock.Now,
		Sleep: func(ctx context.Context, d time.Duration) error {
			f.slept += d
			f.h.Clock.Advance(d)
			return ctx.Err()
		},
		Out: &f.out, Err: &f.errOut}
}

// checkTranscript asserts the script ran once to its end: one record per
// step, no message repeated, replies and reactions on their targets, the
// room closed.
func (f *talkFixture) checkTranscript(t *testing.T) {
	t.Helper()
	for _, s := range []string{f.out.String(), f.errOut.String()} {
		if strings.Contains(s, "429") || strings.Contains(s, "rate_limited") || strings.Contains(s, "rate limit") {
			t.Fatalf("a rate limit reached the output:\n%s", s)
		}
	}
	if f.errOut.Len() > 0 {
		t.Fatalf("errors: %s", f.errOut.String())
	}
	hist, err := f.agents[0].History(context.Background(), f.roomID, 3) // after create and two joins
	if err != nil {
		t.Fatal(err)
	}
	if len(hist) != len(demoScript) {
		t.Fatalf("%d records for %d steps", len(hist), len(demoScript))
	}
	seen := map[string]bool{}
	byHash := map[string]int{} // event hash -> step
	for i, rec := range hist {
		var env struct {
			Hash  string `json:"hash"`
			Event struct {
				Type    string         `json:"type"`
				Payload map[string]any `json:"payload"`
			} `json:"event"`
		}
		if err := json.Unmarshal(rec.Envelope, &env); err != nil {
			t.Fatal(err)
		}
		byHash[env.Hash] = i
		st := demoScript[i]
		p := env.Event.Payload
		line, _ := p["content"].(string)
		if env.Event.Type == "message.create" {
			if seen[line] {
				t.Fatalf("repeated line %q", line)
			}
			seen[line] = true
		}
		switch st.kind {
		case "reply":
			refs, _ := p["references"].([]any)
			if len(refs) != 1 || byHash[refs[0].(string)] != st.about {
				t.Fatalf("step %d references %v, want step %d", i, refs, st.about)
			}
		case "reaction":
			if env.Event.Type != "reaction.create" || byHash[p["event_id"].(string)] != st.about || p["reaction"] != st.text {
				t.Fatalf("step %d: %s %v", i, env.Event.Type, p)
			}
		case "close":
			if env.Event.Type != "room.close" || i != len(demoScript)-1 {
				t.Fatalf("step %d: %s", i, env.Event.Type)
			}
		}
	}
	lines := strings.Split(strings.TrimSuffix(f.out.String(), "\n"), "\n")
	if len(lines) != len(demoScript) {
		t.Fatalf("%d output lines for %d steps:\n%s", len(lines), len(demoScript), f.out.String())
	}
	printed := map[string]bool{}
	for i, l := range lines {
		text := l[strings.Index(l, " ")+1:] // without the seq
		if printed[text] {
			t.Fatalf("repeated output line %q", l)
		}
		printed[text] = true
		// A reply or reaction names what it answers by the seq printed
		// for that record, never by a script step number.
		if st := demoScript[i]; st.kind == "reply" || st.kind == "reaction" {
			target := "#" + strconv.FormatInt(hist[st.about].Seq, 10)
			if !strings.HasPrefix(lines[st.about], target+" ") || !strings.Contains(l, target) || strings.Contains(l, "step") {
				t.Errorf("line %q should name %s, the record it answers (%q)", l, target, lines[st.about])
			}
		}
	}
}

// With the host's own limits the script never meets a 429 at all, and the
// pacing costs bounded (fake) time.
func TestDevnetTalkPacedWithinLimits(t *testing.T) {
	f := newTalkFixture(t)
	if err := runTalk(context.Background(), f.config(f.h.Node.Config().Rates)); err != nil {
		t.Fatal(err)
	}
	f.checkTranscript(t)
	if n := f.got429.Load(); n != 0 {
		t.Fatalf("the host answered 429 %d times to a paced script", n)
	}
	// Two messages per agent per minute: the busiest agent writes three,
	// so about one minute of waiting, never a minute per step.
	if f.slept < time.Minute || f.slept > 3*time.Minute {
		t.Fatalf("paced script waited %v", f.slept)
	}
}

// With a stale idea of the limits (unlimited) the agents meet 429s and
// wait out their retry_after_ms; none is printed, the script still runs
// once.
func TestDevnetTalkBacksOffOn429(t *testing.T) {
	f := newTalkFixture(t)
	if err := runTalk(context.Background(), f.config(node.NoRates())); err != nil {
		t.Fatal(err)
	}
	f.checkTranscript(t)
	if f.got429.Load() == 0 {
		t.Fatal("the stale limits never met a 429: the test does not exercise the back-off")
	}
	if f.slept > 5*time.Minute {
		t.Fatalf("back-off waited %v", f.slept)
	}
}

// A cancelled context stops the script at once, without output.
func TestDevnetTalkCancelled(t *testing.T) {
	f := newTalkFixture(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := runTalk(ctx, f.config(f.h.Node.Config().Rates)); err != context.Canceled {
		t.Fatalf("runTalk on a cancelled context: %v", err)
	}
	if f.errOut.Len() > 0 {
		t.Fatalf("errors on cancel: %s", f.errOut.String())
	}
}
