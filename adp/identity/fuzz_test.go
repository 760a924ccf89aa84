package identity

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"testing"

	"github.com/adpnode/adpnode/adp"

	"github.com/gowebpki/jcs"
)

// canonicalByStd is the reference definition of canonical base64url.
func canonicalByStd(s string) bool {
	b, err := base64.RawURLEncoding.DecodeString(s)
	return err == nil && base64.RawURLEncoding.EncodeToString(b) == s
}

func FuzzParseEnvelope(f *testing.F) {
	v := loadVectors(f)
	for _, e := range v.Events {
		f.Add(envelopeJSON(e.Hash, e.Event, e.Signature))
	}
	f.Add(envelopeJSON(someHash, baseFields().json(), someSig))
	f.Fuzz(func(t *testing.T, data []byte) {
		env, err := ParseEnvelope(data)
		if err != nil {
			var ae *adp.Error
			if !errors.As(err, &ae) || (ae.Code != adp.CodeInvalidEvent && ae.Code != adp.CodeInvalidActor) {
				t.Fatalf("unexpected error %T %v", err, err)
			}
			return
		}
		if CheckJSON(data) != nil {
			t.Fatal("envelope accepted but CheckJSON rejects the text")
		}
		again, err := ParseEnvelope(env.Raw)
		if err != nil {
			t.Fatalf("reparse of Raw: %v\n%s", err, env.Raw)
		}
		if !bytes.Equal(again.Raw, env.Raw) || again.Digest != env.Digest {
			t.Fatalf("reparse differs:\n%s\n%s", again.Raw, env.Raw)
		}
		ref, err := jcs.Transform(data)
		if err != nil || !bytes.Equal(ref, env.Raw) {
			t.Fatalf("Raw is not jcs of the input: %v\n%s\n%s", err, ref, env.Raw)
		}
		canon, err := env.Event.Canonical()
		if err != nil || !bytes.Equal(canon, env.Raw[len(`{"event":`):len(`{"event":`)+len(canon)]) {
			t.Fatalf("Event.Canonical: %v\n%s\n%s", err, canon, env.Raw)
		}
		pl, err := Canonicalize(env.Event.Payload)
		if err != nil || !bytes.Equal(pl, env.Event.Payload) {
			t.Fatalf("payload not canonical: %v %s", err, env.Event.Payload)
		}
		_ = env.Verify()
	})
}

func FuzzCanonicalize(f *testing.F) {
	v := loadVectors(f)
	for _, e := range v.Events {
		f.Add([]byte(e.Event))
		f.Add([]byte(e.JCS))
	}
	for _, c := range v.JSON.Valid {
		f.Add([]byte(c.Text))
	}
	for _, c := range v.JSON.Invalid {
		f.Add([]byte(c.Text))
	}
	for _, s := range []string{`"\u2028<>&\/"`, `{"b":[1.0,-0,1e-7],"a":{}}`, `{"😀":1,"` + "\ue000" + `":2}`, `"\ud83d\ude00"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		canonical, err := checkJSON(data)
		if _, perr := ParseJSON(data); (perr == nil) != (err == nil) {
			t.Fatalf("ParseJSON and CheckJSON disagree: %v / %v", perr, err)
		}
		if err != nil {
			return
		}
		if !json.Valid(data) {
			t.Fatal("accepted text that encoding/json rejects")
		}
		out, err := Canonicalize(data)
		if err != nil {
			t.Fatalf("Canonicalize failed on checked input: %v", err)
		}
		if c, err := checkJSON(out); err != nil || !c {
			t.Fatalf("output fails CheckJSON or is not recognised as canonical (%v): %s", err, out)
		}
		again, err := Canonicalize(out)
		if err != nil || !bytes.Equal(again, out) {
			t.Fatalf("not idempotent: %s -> %s (%v)", out, again, err)
		}
		ref, err := jcs.Transform(data)
		if err != nil || !bytes.Equal(ref, out) {
			t.Fatalf("differs from jcs.Transform: %v\n%s\n%s", err, ref, out)
		}
		if canonical && !bytes.Equal(out, data) {
			t.Fatalf("input flagged canonical but jcs changes it:\n%s\n%s", data, out)
		}
	})
}

func FuzzDecodeB64(f *testing.F) {
	for _, s := range []string{"", "AA", "AB", "AAA", "AAB", "AAAA", "AA==", "A+/_", "6kpsY-KcUgq-9VB7Ey7F-ZVHdq6-vnuSQh7qaRRG0iw"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		_, err := DecodeB64(s)
		if (err == nil) != canonicalByStd(s) {
			t.Fatalf("DecodeB64(%q) err=%v, canonical=%v", s, err, canonicalByStd(s))
		}
	})
}
