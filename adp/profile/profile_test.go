package profile_test

import (
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/adpnode/adpnode/adp"
	"github.com/adpnode/adpnode/adp/identity"
	"github.com/adpnode/adpnode/adp/profile"
)

type vectorEvent struct {
	Name      string          `json:"name"`
	Event     json.RawMessage `json:"event"`
	JCS       string          `json:"jcs"`
	Hash      string          `json:"hash"`
	Signature string          `json:"signature"`
	Seed      string          `json:"seed"`
}

type vectors struct {
	Events []vectorEvent `json:"events"`
	Closed struct {
		Invalid []struct {
			Name  string          `json:"name"`
			Event json.RawMessage `json:"event"`
		} `json:"invalid"`
	} `json:"events_closed_shape"`
}

func loadVectors(t *testing.T) vectors {
	t.Helper()
	b, err := os.ReadFile("../identity/testdata/agent-identity-1.0.vectors.json")
	if err != nil {
		t.Fatal(err)
	}
	var v vectors
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

func envelopeOf(event json.RawMessage, hash, sig string) []byte {
	b, _ := json.Marshal(map[string]any{"event": event, "hash": hash, "signature": sig})
	return b
}

// Property: the spec's profile vectors are reproduced from their seed and
// open as the profile they describe; the closed-shape vectors of the
// profile protocol are refused.
func TestProfileVectors(t *testing.T) {
	v := loadVectors(t)
	n := 0
	for _, e := range v.Events {
		var head struct {
			Protocol string `json:"protocol"`
		}
		_ = json.Unmarshal(e.Event, &head)
		if head.Protocol != profile.Protocol {
			continue
		}
		n++
		seed, _ := hex.DecodeString(e.Seed)
		key, err := identity.KeyFromSeed(seed)
		if err != nil {
			t.Fatal(err)
		}
		p, err := profile.Open(envelopeOf(e.Event, e.Hash, e.Signature))
		if err != nil {
			t.Fatalf("%s: %v", e.Name, err)
		}
		if p.ID != identity.AgentIDFromKey(key.Public().(ed25519.PublicKey)) || p.Name != "ResearchAgent" ||
			strings.Join(p.Capabilities, ",") != "research,code-review" || string(p.Extra) != "{}" {
			t.Fatalf("%s: opened as %+v", e.Name, p)
		}
		// Signing the same event again gives the vector's bytes.
		re, err := identity.Sign(key, p.Envelope.Event)
		if err != nil {
			t.Fatal(err)
		}
		if re.Hash != e.Hash || re.Signature != e.Signature {
			t.Fatalf("%s: re-signed hash %s sig %s", e.Name, re.Hash, re.Signature)
		}
		if c, _ := p.Envelope.Event.Canonical(); string(c) != e.JCS {
			t.Fatalf("%s: jcs %s", e.Name, c)
		}
		// The payload a client builds is the vector's.
		pl, err := profile.Payload(p.ID, "ResearchAgent", []string{"research", "code-review"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(e.JCS, `"payload":`+string(mustJCS(t, pl))) {
			t.Fatalf("payload %s not in %s", pl, e.JCS)
		}
	}
	if n == 0 {
		t.Fatal("no profile vectors found")
	}
	for _, c := range v.Closed.Invalid {
		// Any signature: shape is refused before it is checked.
		_, err := profile.Open(envelopeOf(c.Event, strings.Repeat("A", 43), strings.Repeat("A", 86)))
		if adp.CodeOf(err) != adp.CodeInvalidEvent {
			t.Errorf("%s: %v, want invalid_event", c.Name, err)
		}
	}
}

func mustJCS(t *testing.T, b []byte) []byte {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	out, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func key(t *testing.T, b byte) (ed25519.PrivateKey, identity.AgentID) {
	t.Helper()
	k, err := identity.KeyFromSeed(make([]byte, 32))
	if b != 0 {
		seed := make([]byte, 32)
		seed[0] = b
		k, err = identity.KeyFromSeed(seed)
	}
	if err != nil {
		t.Fatal(err)
	}
	return k, identity.AgentIDFromKey(k.Public().(ed25519.PublicKey))
}

func sign(t *testing.T, k ed25519.PrivateKey, actor identity.AgentID, nonce int64, payload string) []byte {
	t.Helper()
	env, err := identity.Sign(k, identity.Event{Protocol: profile.Protocol, Type: profile.Type, Actor: actor,
		CreatedAt: 1_000_000, Nonce: nonce, Payload: json.RawMessage(payload)})
	if err != nil {
		t.Fatal(err)
	}
	return env.Raw
}

func code(err error) adp.Code { return adp.CodeOf(err) }

// Property: a forged, misdirected, oversized or malformed profile.update
// is refused with the spec's error code, and nobody can put a name on
// another agent's key.
func TestProfileHostile(t *testing.T) {
	k, me := key(t, 1)
	_, other := key(t, 2)
	good := `{"id":"` + string(me) + `","name":"Alice"}`
	if p, err := profile.Open(sign(t, k, me, 5, good)); err != nil || p.Name != "Alice" || len(p.Capabilities) != 0 {
		t.Fatalf("good: %v %+v", err, p)
	}
	forged := sign(t, k, me, 5, good)
	forged = []byte(strings.Replace(string(forged), `"Alice"`, `"Alicf"`, 1))
	long := strings.Repeat("x", 65)
	caps := make([]string, 33)
	for i := range caps {
		caps[i] = "c" + strings.Repeat("x", i)
	}
	capsJSON, _ := json.Marshal(caps)
	cases := []struct {
		name string
		env  []byte
		want adp.Code
	}{
		{"forged", forged, adp.CodeInvalidEventHash},
		{"another agent's key", sign(t, k, me, 5, `{"id":"`+string(other)+`","name":"Alice"}`), adp.CodePermissionDenied},
		{"name too long", sign(t, k, me, 5, `{"id":"`+string(me)+`","name":"`+long+`"}`), adp.CodePayloadTooLarge},
		{"empty name", sign(t, k, me, 5, `{"id":"`+string(me)+`","name":" "}`), adp.CodeInvalidEvent},
		{"control in name", sign(t, k, me, 5, `{"id":"`+string(me)+`","name":"a\u0007b"}`), adp.CodeInvalidEvent},
		{"too many capabilities", sign(t, k, me, 5, `{"id":"`+string(me)+`","name":"A","capabilities":`+string(capsJSON)+`}`), adp.CodePayloadTooLarge},
		{"capability too long", sign(t, k, me, 5, `{"id":"`+string(me)+`","name":"A","capabilities":["`+long+`"]}`), adp.CodePayloadTooLarge},
		{"duplicate capability", sign(t, k, me, 5, `{"id":"`+string(me)+`","name":"A","capabilities":["a","a"]}`), adp.CodeInvalidEvent},
		{"extra too large", sign(t, k, me, 5, `{"id":"`+string(me)+`","name":"A","extra":{"x":"`+strings.Repeat("y", 2100)+`"}}`), adp.CodePayloadTooLarge},
		{"extra not an object", sign(t, k, me, 5, `{"id":"`+string(me)+`","name":"A","extra":[]}`), adp.CodeInvalidEvent},
		{"unknown payload field", sign(t, k, me, 5, `{"id":"`+string(me)+`","name":"A","admin":true}`), adp.CodeInvalidEvent},
		{"envelope too large", sign(t, k, me, 5, `{"id":"`+string(me)+`","name":"A","extra":{"x":"`+strings.Repeat("y", 9000)+`"}}`), adp.CodePayloadTooLarge},
	}
	for _, c := range cases {
		if _, err := profile.Open(c.env); code(err) != c.want {
			t.Errorf("%s: %v, want %s", c.name, err, c.want)
		}
	}
	// Another protocol or type, or an ADP field, is not a profile.
	for _, ev := range []identity.Event{
		{Protocol: adp.Protocol, Type: profile.Type, Actor: me, CreatedAt: 1, Nonce: 1, Payload: json.RawMessage(good)},
		{Protocol: profile.Protocol, Type: "message.create", Actor: me, CreatedAt: 1, Nonce: 1, Payload: json.RawMessage(good)},
		{Protocol: profile.Protocol, Type: profile.Type, Actor: me, CreatedAt: 1, Nonce: 1, Payload: json.RawMessage(good), RoomID: new(string)},
	} {
		env, err := identity.Sign(k, ev)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := profile.Open(env.Raw); code(err) != adp.CodeInvalidEvent {
			t.Errorf("%s %s: %v, want invalid_event", ev.Protocol, ev.Type, err)
		}
	}
}

// Property: an older or equal update never replaces a newer one, while
// the same envelope again is a resubmission; the live window is Identity
// §7's.
func TestProfileOrderAndWindow(t *testing.T) {
	k, me := key(t, 1)
	open := func(nonce int64, name string) *profile.Profile {
		p, err := profile.Open(sign(t, k, me, nonce, `{"id":"`+string(me)+`","name":"`+name+`"}`))
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	p5, p5b, p4, p6 := open(5, "A"), open(5, "B"), open(4, "C"), open(6, "D")
	if same, err := profile.Replaces(nil, p5); same || err != nil {
		t.Fatal(same, err)
	}
	if same, err := profile.Replaces(p5, open(5, "A")); !same || err != nil {
		t.Fatalf("resubmission: %v %v", same, err)
	}
	for _, p := range []*profile.Profile{p5b, p4} {
		_, err := profile.Replaces(p5, p)
		var e *adp.Error
		if !errors.As(err, &e) || e.Code != adp.CodeNonceNotGreater || e.Data["max_seen_nonce"] != int64(5) {
			t.Fatalf("nonce %d: %v %#v", p.Nonce(), err, e)
		}
	}
	if same, err := profile.Replaces(p5, p6); same || err != nil {
		t.Fatal(same, err)
	}
	if err := profile.CheckWindow(p5, 1_000_000+300_000, 300_000); err != nil {
		t.Fatal(err)
	}
	if err := profile.CheckWindow(p5, 1_000_000+300_001, 300_000); code(err) != adp.CodeTimestampOutOfWindow {
		t.Fatal(err)
	}
	if err := profile.CheckWindow(p5, 1_000_000-300_001, 300_000); code(err) != adp.CodeTimestampOutOfWindow {
		t.Fatal(err)
	}
}

// Property: a shown name cannot carry bidi or invisible characters, and
// look-alike names stay apart by their key fragment.
func TestProfileLabelInert(t *testing.T) {
	_, a := key(t, 1)
	_, b := key(t, 2)
	name := "Al\u202eice\u200b\u2066"
	if got := profile.Inert(name); got != "Alice" {
		t.Fatalf("Inert = %q", got)
	}
	if profile.Label(a, "Alice") == profile.Label(b, "Al\u200bice") {
		t.Fatal("look-alike names of two keys render the same")
	}
	if got := profile.Label(a, ""); got != profile.KeyFragment(a) || len(got) != 8 {
		t.Fatalf("Label without a name = %q", got)
	}
}
