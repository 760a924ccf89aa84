package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/adpnode/adpnode/adp"
	"github.com/adpnode/adpnode/adp/record"
	"github.com/adpnode/adpnode/client"
	"github.com/adpnode/adpnode/node"
)

// The devnet demo conversation: a script the demo agents play once, paced
// within the host's per-agent rate limits, after which they stay quiet.

// demoStep is one line of the demo script.
type demoStep struct {
	agent int    // index into talkConfig.Agents
	kind  string // "message", "reply", "reaction" or "close"
	text  string // the message, the reaction value or the close reason
	about int    // for reply and reaction: the index of the step answered
}

// demoScript is a short design review that goes somewhere: a question,
// claims, replies citing what they answer, reactions to specific points,
// a summary and the close. Agents: 0 moderator, 1 analyst, 2 skeptic.
var demoScript = []demoStep{
	{agent: 0, kind: "message", text: "Question for today: is **group commit** worth its latency cost for room writes?"},
	{agent: 1, kind: "reply", about: 0, text: "Group commit turns many fsyncs into one; throughput scales with the batch size."},
	{agent: 2, kind: "reply", about: 1, text: "But latency grows with the batch window. What p99 do we accept?"},
	{agent: 0, kind: "reaction", about: 2, text: "important"},
	{agent: 1, kind: "reply", about: 2, text: "Measured: 64 writers, p99 under 50 ms, so the window stays small."},
	{agent: 2, kind: "reaction", about: 4, text: "agree"},
	{agent: 2, kind: "message", text: "Second concern: mirrors verify every record. Do they keep up at 2,000 writes/s?"},
	{agent: 1, kind: "reply", about: 6, text: "They parallelise signature checks during catch-up; the devnet progress lines show them at the host's seq."},
	{agent: 0, kind: "reaction", about: 7, text: "agree"},
	{agent: 2, kind: "reply", about: 7, text: "Then my last condition: the archive must verify offline with `adpnode verify`."},
	{agent: 1, kind: "reaction", about: 9, text: "agree"},
	{agent: 0, kind: "reply", about: 0, text: "Summary: group commit stays on (p99 under 50 ms); mirrors keep up; the archive is verified offline before release."},
	{agent: 0, kind: "close", text: "decided: keep group commit"},
}

// talkConfig is what runTalk needs; the clock and the pause are injectable
// so that tests run the script on a fake clock.
type talkConfig struct {
	Agents   []*client.Client
	Names    []string
	RoomID   string
	Script   []demoStep
	Interval time.Duration // pause between steps
	// Rates are the host's per-agent limits (per minute, per room); zero
	// fields are unlimited. A 429 is still handled by waiting for its
	// retry_after_ms, so a stale figure costs time, not errors.
	Rates node.Rates
	Now   func() time.Time
	Sleep func(ctx context.Context, d time.Duration) error
	Out   io.Writer // one line per accepted step
	Err   io.Writer // steps that failed for a reason other than a rate limit
}

// maxRateRetries bounds the waits for one step that keeps being rate limited.
const maxRateRetries = 8

// sleepCtx waits d on the real clock, or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// pacer tracks one agent's accepted writes of one kind in the host's
// sliding one-minute window.
type pacer struct {
	limit int
	times []time.Time
}

// wait returns how long to wait at now before one more write fits.
func (p *pacer) wait(now time.Time) time.Duration {
	if p.limit <= 0 {
		return 0
	}
	i := 0
	for i < len(p.times) && now.Sub(p.times[i]) >= time.Minute {
		i++
	}
	p.times = p.times[i:]
	if len(p.times) < p.limit {
		return 0
	}
	// The host's window is [now-60 s, now]; a small margin absorbs rounding.
	return p.times[0].Add(time.Minute + 50*time.Millisecond).Sub(now)
}

func (p *pacer) hit(now time.Time) { p.times = append(p.times, now) }

// runTalk plays the script once and returns: nil at its end, ctx.Err() when
// cancelled. A step whose target failed is skipped.
func runTalk(ctx context.Context, cfg talkConfig) error {
	pacers := map[string]*pacer{}
	pacerFor := func(agent int, kind adp.Kind) *pacer {
		key := fmt.Sprintf("%d|%s", agent, kind)
		if p, ok := pacers[key]; ok {
			return p
		}
		limit := cfg.Rates.Control
		switch kind {
		case adp.KindMessage:
			limit = cfg.Rates.Message
		case adp.KindSignal:
			limit = cfg.Rates.Signal
		}
		p := &pacer{limit: limit}
		pacers[key] = p
		return p
	}
	hashes := make([]string, len(cfg.Script)) // event hash of each accepted step
	seqs := make([]int64, len(cfg.Script))    // and its seq, as printed
	for i, st := range cfg.Script {
		if i > 0 {
			if err := cfg.Sleep(ctx, cfg.Interval); err != nil {
				return err
			}
		}
		typ, kind, payload := stepEvent(st, hashes)
		if typ == "" {
			fmt.Fprintf(cfg.Err, "%s: skipped step %d: the record it answers was not written\n", cfg.Names[st.agent], i+1)
			continue
		}
		p := pacerFor(st.agent, kind)
		rec, err := postPaced(ctx, cfg, p, st.agent, typ, payload)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			fmt.Fprintf(cfg.Err, "%s: %s: %v\n", cfg.Names[st.agent], typ, err)
			continue
		}
		hashes[i], seqs[i] = envelopeHash(rec), rec.Seq
		fmt.Fprintf(cfg.Out, "#%d %s%s\n", rec.Seq, cfg.Names[st.agent], describeStep(st, seqs))
	}
	return nil
}

// postPaced waits for the pacer, posts, and on rate_limited waits the
// host's retry_after_ms (never reporting it) before trying again.
func postPaced(ctx context.Context, cfg talkConfig, p *pacer, agent int, typ string, payload any) (*record.Record, error) {
	a := cfg.Agents[agent]
	for try := 0; ; try++ {
		if d := p.wait(cfg.Now()); d > 0 {
			if err := cfg.Sleep(ctx, d); err != nil {
				return nil, err
			}
		}
		rec, err := a.Post(ctx, cfg.RoomID, 5, func(*client.Room, []*record.Record) (string, any, error) { return typ, payload, nil })
		if err == nil {
			p.hit(cfg.Now())
			return rec, nil
		}
		if client.CodeOf(err) != adp.CodeRateLimited || try >= maxRateRetries {
			return nil, err
		}
		if err := cfg.Sleep(ctx, retryAfter(err)); err != nil {
			return nil, err
		}
	}
}

// retryAfter reads retry_after_ms from a rate_limited error (1 s if absent).
func retryAfter(err error) time.Duration {
	var e *client.Error
	if errors.As(err, &e) {
		if ms, ok := e.Data["retry_after_ms"].(float64); ok && ms > 0 {
			return time.Duration(ms)*time.Millisecond + 50*time.Millisecond
		}
	}
	return time.Second
}

// stepEvent builds a step's event type, kind and payload ("" when the step
// answers one that was not written).
func stepEvent(st demoStep, hashes []string) (string, adp.Kind, any) {
	switch st.kind {
	case "reply":
		if hashes[st.about] == "" {
			return "", "", nil
		}
		return "message.create", adp.KindMessage, map[string]any{"content_type": "text/markdown", "content": st.text,
			"references": []string{hashes[st.about]}}
	case "reaction":
		if hashes[st.about] == "" {
			return "", "", nil
		}
		return "reaction.create", adp.KindSignal, map[string]any{"event_id": hashes[st.about], "reaction": st.text}
	case "close":
		return "room.close", adp.KindControl, map[string]any{"reason": st.text}
	}
	return "message.create", adp.KindMessage, map[string]any{"content_type": "text/markdown", "content": st.text}
}

// describeStep is the line printed for an accepted step; a reply or a
// reaction names the record it answers by the seq printed for it.
func describeStep(st demoStep, seqs []int64) string {
	switch st.kind {
	case "reply":
		return fmt.Sprintf(" (re #%d): %s", seqs[st.about], st.text)
	case "reaction":
		return fmt.Sprintf(" reacted %q to #%d", st.text, seqs[st.about])
	case "close":
		return " closed the room: " + st.text
	}
	return ": " + st.text
}

// envelopeHash is the event hash of a record (the id references use).
func envelopeHash(rec *record.Record) string {
	var env struct {
		Hash string `json:"hash"`
	}
	if json.Unmarshal(rec.Envelope, &env) != nil || env.Hash == "" {
		return rec.Hash // a record hash resolves too
	}
	return env.Hash
}
