package identity

import (
	"crypto/ed25519"
	"testing"
)

// benchEnvelope is a realistic message.create envelope of about 600 bytes.
func benchEnvelope(b testing.TB) (*Envelope, ed25519.PublicKey) {
	priv := testKey(b)
	ev := testEvent(b)
	ev.Payload = []byte(`{"content":"I reviewed the patch. The retry loop in fetch() never backs off, so a flapping upstream ` +
		`gets hammered; suggest exponential backoff capped at 30 s. Otherwise LGTM.","content_type":"text/markdown",` +
		`"extra":{},"references":[{"hash":"QmFzZTY0dXJsLXByZXZpb3VzLXJlY29yZC1oYXNoMDA","seq":40}]}`)
	ev.Mentions = []string{"did:agent:6kpsY-KcUgq-9VB7Ey7F-ZVHdq6-vnuSQh7qaRRG0iw"}
	env, err := Sign(priv, ev)
	if err != nil {
		b.Fatal(err)
	}
	return env, priv.Public().(ed25519.PublicKey)
}

func BenchmarkOpenEnvelope(b *testing.B) {
	env, _ := benchEnvelope(b)
	b.SetBytes(int64(len(env.Raw)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := OpenEnvelope(env.Raw); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkParseEnvelopeOnly(b *testing.B) {
	env, _ := benchEnvelope(b)
	b.SetBytes(int64(len(env.Raw)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseEnvelope(env.Raw); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkParseEnvelopeNonCanonical parses the same envelope pretty-printed,
// which takes the jcs.Transform path.
func BenchmarkParseEnvelopeNonCanonical(b *testing.B) {
	env, _ := benchEnvelope(b)
	noisy := make([]byte, 0, len(env.Raw)*2)
	inStr, esc := false, false
	for _, c := range env.Raw {
		noisy = append(noisy, c)
		switch {
		case esc:
			esc = false
		case inStr && c == '\\':
			esc = true
		case c == '"':
			inStr = !inStr
		case !inStr && (c == ',' || c == ':'):
			noisy = append(noisy, ' ')
		}
	}
	if _, err := OpenEnvelope(noisy); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(noisy)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseEnvelope(noisy); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEd25519Verify(b *testing.B) {
	env, pub := benchEnvelope(b)
	sig, _ := DecodeB64(env.Signature)
	b.ReportAllocs()
	for b.Loop() {
		if !ed25519.Verify(pub, env.Digest[:], sig) {
			b.Fatal("verify failed")
		}
	}
}

func BenchmarkCheckJSON(b *testing.B) {
	env, _ := benchEnvelope(b)
	b.SetBytes(int64(len(env.Raw)))
	b.ReportAllocs()
	for b.Loop() {
		if err := CheckJSON(env.Raw); err != nil {
			b.Fatal(err)
		}
	}
}

// TestCheckJSONReusesNameStacks bounds what the strict check of an
// envelope costs: its member-name stack comes from a pool, so a check
// allocates nothing (on average below one allocation even where the race
// detector makes the pool drop some of what it is given), and the pool
// keeps nothing of a checked document alive.
func TestCheckJSONReusesNameStacks(t *testing.T) {
	env, _ := benchEnvelope(t)
	if n := testing.AllocsPerRun(200, func() {
		if err := CheckJSON(env.Raw); err != nil {
			t.Fatal(err)
		}
	}); n >= 1 {
		t.Fatalf("CheckJSON allocates %v times per envelope, want none", n)
	}
	s := cleared(append(make([][]byte, 0, 16), env.Raw[:4], env.Raw[4:8]))
	for _, n := range s[:cap(s)] {
		if n != nil {
			t.Fatal("a returned name stack still points into its document")
		}
	}
}
