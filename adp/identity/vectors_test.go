package identity

import (
	"bytes"
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"testing"

	"github.com/adpnode/adpnode/adp"
)

type vectorFile struct {
	Keys []struct {
		Name      string `json:"name"`
		Seed      string `json:"seed"`
		PublicKey string `json:"public_key"`
		AgentID   string `json:"agent_id"`
	} `json:"keys"`
	Events []struct {
		Name      string          `json:"name"`
		Event     json.RawMessage `json:"event"`
		JCS       string          `json:"jcs"`
		Hash      string          `json:"hash"`
		Signature string          `json:"signature"`
		Seed      string          `json:"seed"`
	} `json:"events"`
	Signatures []struct {
		Name      string `json:"name"`
		PublicKey string `json:"public_key"`
		Message   string `json:"message"`
		Signature string `json:"signature"`
		Valid     bool   `json:"valid"`
	} `json:"signatures"`
	AgentIDs struct {
		Valid   []string `json:"valid"`
		Invalid []struct {
			Name, Value string
		} `json:"invalid"`
	} `json:"agent_ids"`
	JSON struct {
		Valid []struct {
			Name, Text string
		} `json:"valid"`
		Invalid []struct {
			Name, Text string
		} `json:"invalid"`
	} `json:"json"`
	EventsClosedShape struct {
		Invalid []struct {
			Name  string          `json:"name"`
			Event json.RawMessage `json:"event"`
		} `json:"invalid"`
	} `json:"events_closed_shape"`
	MaxSeenNonce []struct {
		Name      string `json:"name"`
		NextNonce int64  `json:"next_nonce"`
		NowMs     int64  `json:"now_ms"`
		Header    string `json:"header"`
		Accepted  bool   `json:"accepted"`
		NextAfter int64  `json:"next_after"`
	} `json:"max_seen_nonce"`
}

func loadVectors(t testing.TB) *vectorFile {
	t.Helper()
	b, err := os.ReadFile("testdata/agent-identity-1.0.vectors.json")
	if err != nil {
		t.Fatal(err)
	}
	var v vectorFile
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	if len(v.Keys) == 0 || len(v.Events) == 0 || len(v.Signatures) == 0 || len(v.MaxSeenNonce) == 0 ||
		len(v.AgentIDs.Invalid) == 0 || len(v.JSON.Invalid) == 0 || len(v.EventsClosedShape.Invalid) == 0 {
		t.Fatal("vector file did not load completely")
	}
	return &v
}

// wantCode fails unless err is an *adp.Error with code.
func wantCode(t testing.TB, err error, code adp.Code) {
	t.Helper()
	var e *adp.Error
	if !errors.As(err, &e) {
		t.Fatalf("want *adp.Error %s, got %T %v", code, err, err)
	}
	if e.Code != code {
		t.Fatalf("want code %s, got %s (%v)", code, e.Code, e)
	}
}

func mustHex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func envelopeJSON(hash string, event []byte, sig string) []byte {
	var b bytes.Buffer
	b.WriteString(`{"hash":"` + hash + `","event":`)
	b.Write(event)
	b.WriteString(`,"signature":"` + sig + `"}`)
	return b.Bytes()
}

func TestVectorKeys(t *testing.T) {
	for _, k := range loadVectors(t).Keys {
		t.Run(k.Name, func(t *testing.T) {
			priv, err := KeyFromSeed(mustHex(t, k.Seed))
			if err != nil {
				t.Fatal(err)
			}
			pub := priv.Public().(ed25519.PublicKey)
			if got := EncodeB64(pub); got != k.PublicKey {
				t.Fatalf("public key %s, want %s", got, k.PublicKey)
			}
			id := AgentIDFromKey(pub)
			if id.String() != k.AgentID {
				t.Fatalf("agent id %s, want %s", id, k.AgentID)
			}
			parsed, err := ParseAgentID(k.AgentID)
			if err != nil || !bytes.Equal(parsed.PublicKey(), pub) {
				t.Fatalf("ParseAgentID: %v", err)
			}
		})
	}
}

func TestVectorEvents(t *testing.T) {
	for _, v := range loadVectors(t).Events {
		t.Run(v.Name, func(t *testing.T) {
			// JCS of the event text.
			got, err := Canonicalize(v.Event)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != v.JCS {
				t.Fatalf("jcs mismatch\n got %s\nwant %s", got, v.JCS)
			}
			// The parsed envelope reproduces jcs and hash, and opens.
			env, err := OpenEnvelope(envelopeJSON(v.Hash, v.Event, v.Signature))
			if err != nil {
				t.Fatal(err)
			}
			if EncodeB64(env.Digest[:]) != v.Hash {
				t.Fatalf("digest %s, want %s", EncodeB64(env.Digest[:]), v.Hash)
			}
			canon, err := env.Event.Canonical()
			if err != nil || string(canon) != v.JCS {
				t.Fatalf("Event.Canonical: %v\n got %s\nwant %s", err, canon, v.JCS)
			}
			wantRaw := `{"event":` + v.JCS + `,"hash":"` + v.Hash + `","signature":"` + v.Signature + `"}`
			if string(env.Raw) != wantRaw {
				t.Fatalf("Raw\n got %s\nwant %s", env.Raw, wantRaw)
			}
			// Signing from the seed reproduces the signature.
			priv, err := KeyFromSeed(mustHex(t, v.Seed))
			if err != nil {
				t.Fatal(err)
			}
			signed, err := Sign(priv, env.Event)
			if err != nil {
				t.Fatal(err)
			}
			if signed.Hash != v.Hash || signed.Signature != v.Signature {
				t.Fatalf("Sign: hash %s sig %s, want %s %s", signed.Hash, signed.Signature, v.Hash, v.Signature)
			}
			if !bytes.Equal(signed.Raw, env.Raw) {
				t.Fatalf("Sign Raw differs:\n%s\n%s", signed.Raw, env.Raw)
			}
			if _, err := OpenEnvelope(signed.Raw); err != nil {
				t.Fatal(err)
			}
			// Re-parsing the canonical text gives the same Raw and digest.
			again, err := OpenEnvelope(env.Raw)
			if err != nil || !bytes.Equal(again.Raw, env.Raw) || again.Digest != env.Digest {
				t.Fatalf("reparse of Raw: %v", err)
			}
		})
	}
}

func TestVectorSignatures(t *testing.T) {
	for _, v := range loadVectors(t).Signatures {
		t.Run(v.Name, func(t *testing.T) {
			pub, err := DecodeB64(v.PublicKey)
			if err != nil {
				t.Fatal(err)
			}
			msg, err := DecodeB64Len(v.Message, 32)
			if err != nil {
				t.Fatal(err)
			}
			sig, err := DecodeB64Len(v.Signature, 64)
			if err != nil {
				t.Fatal(err)
			}
			if got := VerifyStrict(pub, msg, sig); got != v.Valid {
				t.Fatalf("VerifyStrict = %v, want %v", got, v.Valid)
			}
			if got := VerifyStrictMessage(pub, msg, sig); got != v.Valid {
				t.Fatalf("VerifyStrictMessage = %v, want %v", got, v.Valid)
			}
		})
	}
}

func TestVectorAgentIDs(t *testing.T) {
	v := loadVectors(t)
	for _, s := range v.AgentIDs.Valid {
		id, err := ParseAgentID(s)
		if err != nil || id.String() != s || len(id.PublicKey()) != 32 {
			t.Errorf("valid %q: %v", s, err)
		}
	}
	for _, c := range v.AgentIDs.Invalid {
		t.Run(c.Name, func(t *testing.T) {
			_, err := ParseAgentID(c.Value)
			wantCode(t, err, adp.CodeInvalidActor)
			if AgentID(c.Value).PublicKey() != nil {
				t.Fatal("PublicKey of an invalid id is not nil")
			}
		})
	}
}

func TestVectorJSON(t *testing.T) {
	v := loadVectors(t)
	for _, c := range v.JSON.Valid {
		if err := CheckJSON([]byte(c.Text)); err != nil {
			t.Errorf("%s: %v", c.Name, err)
		}
	}
	for _, c := range v.JSON.Invalid {
		if err := CheckJSON([]byte(c.Text)); err == nil {
			t.Errorf("%s: accepted", c.Name)
		}
		if _, err := Canonicalize([]byte(c.Text)); err == nil {
			t.Errorf("%s: Canonicalize accepted", c.Name)
		}
	}
}

func TestVectorEventsClosedShape(t *testing.T) {
	v := loadVectors(t)
	hash := v.Events[0].Hash
	sig := v.Events[0].Signature
	for _, c := range v.EventsClosedShape.Invalid {
		t.Run(c.Name, func(t *testing.T) {
			_, err := ParseEnvelope(envelopeJSON(hash, c.Event, sig))
			wantCode(t, err, adp.CodeInvalidEvent)
		})
	}
}

func TestVectorMaxSeenNonce(t *testing.T) {
	for _, c := range loadVectors(t).MaxSeenNonce {
		t.Run(c.Name, func(t *testing.T) {
			next, err := ApplyMaxSeenNonce(c.NextNonce, c.NowMs, c.Header)
			if !c.Accepted {
				wantCode(t, err, adp.CodeInvalidRequest)
				if next != c.NextNonce {
					t.Fatalf("refused header changed next to %d", next)
				}
				return
			}
			if err != nil || next != c.NextAfter {
				t.Fatalf("next = %d, %v; want %d", next, err, c.NextAfter)
			}
		})
	}
}
