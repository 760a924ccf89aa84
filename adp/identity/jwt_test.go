package identity

import (
	"crypto/ed25519"
	"strings"
	"testing"

	"github.com/adpnode/adpnode/adp"
)

const testAud = "https://api.example.com"

// rawJWT signs arbitrary header and claims text.
func rawJWT(priv ed25519.PrivateKey, header, claims string) string {
	in := EncodeB64([]byte(header)) + "." + EncodeB64([]byte(claims))
	return in + "." + EncodeB64(ed25519.Sign(priv, []byte(in)))
}

func TestJWT(t *testing.T) {
	priv := testKey(t)
	id := string(AgentIDFromKey(priv.Public().(ed25519.PublicKey)))
	other, _ := KeyFromSeed(make([]byte, 32))
	otherID := string(AgentIDFromKey(other.Public().(ed25519.PublicKey)))
	const iat, exp = 1_800_000_000, 1_800_000_120

	good, err := SignJWT(priv, testAud, iat, exp)
	if err != nil {
		t.Fatal(err)
	}
	got, err := VerifyJWT(good, testAud, iat+10)
	if err != nil || string(got) != id {
		t.Fatalf("good token: %v %v", got, err)
	}

	hdr := `{"alg":"EdDSA","typ":"JWT","kid":"` + id + `"}`
	claims := func(extra string) string {
		return `{"iss":"` + id + `","sub":"` + id + `","aud":"` + testAud + `","iat":1800000000,"exp":1800000120` + extra + `}`
	}
	tampered := strings.Split(good, ".")
	tampered[1] = EncodeB64([]byte(strings.Replace(claims(""), "1800000120", "1800000300", 1)))

	okCases := []struct {
		name  string
		token string
		now   int64
	}{
		{"at iat-60", good, iat - 60},
		{"at exp+59", good, exp + 59},
		{"no typ", rawJWT(priv, `{"alg":"EdDSA","kid":"`+id+`"}`, claims("")), iat},
		{"aud array of one", rawJWT(priv, hdr, strings.Replace(claims(""), `"aud":"`+testAud+`"`, `"aud":["`+testAud+`"]`, 1)), iat},
		{"lifetime 300", rawJWT(priv, hdr, strings.Replace(claims(""), "1800000120", "1800000300", 1)), iat},
		{"past nbf", rawJWT(priv, hdr, claims(`,"nbf":1800000000`)), iat},
		{"unknown claim", rawJWT(priv, hdr, claims(`,"jti":"x"`)), iat},
	}
	for _, c := range okCases {
		if _, err := VerifyJWT(c.token, testAud, c.now); err != nil {
			t.Errorf("%s: %v", c.name, err)
		}
	}

	badCases := []struct {
		name  string
		token string
		aud   string
		now   int64
	}{
		{"wrong aud", good, "https://other.example.com", iat},
		{"aud with slash", good, testAud + "/", iat},
		{"expired", good, testAud, exp + 60},
		{"iat beyond skew", good, testAud, iat - 61},
		{"lifetime 301", rawJWT(priv, hdr, strings.Replace(claims(""), "1800000120", "1800000301", 1)), testAud, iat},
		{"exp == iat", rawJWT(priv, hdr, strings.Replace(claims(""), "1800000120", "1800000000", 1)), testAud, iat},
		{"exp < iat", rawJWT(priv, hdr, strings.Replace(claims(""), "1800000120", "1799999999", 1)), testAud, iat},
		{"kid != iss", rawJWT(priv, hdr, strings.Replace(claims(""), `"iss":"`+id, `"iss":"`+otherID, 1)), testAud, iat},
		{"kid != sub", rawJWT(priv, hdr, strings.Replace(claims(""), `"sub":"`+id, `"sub":"`+otherID, 1)), testAud, iat},
		{"kid of another key", rawJWT(priv, strings.Replace(hdr, id, otherID, 1), strings.ReplaceAll(claims(""), id, otherID)), testAud, iat},
		{"kid missing", rawJWT(priv, `{"alg":"EdDSA","typ":"JWT"}`, claims("")), testAud, iat},
		{"kid malformed", rawJWT(priv, `{"alg":"EdDSA","typ":"JWT","kid":"did:agent:x"}`, claims("")), testAud, iat},
		{"alg none", EncodeB64([]byte(`{"alg":"none","typ":"JWT","kid":"`+id+`"}`)) + "." + EncodeB64([]byte(claims(""))) + ".", testAud, iat},
		{"alg none signed", rawJWT(priv, `{"alg":"none","typ":"JWT","kid":"`+id+`"}`, claims("")), testAud, iat},
		{"alg HS256", rawJWT(priv, `{"alg":"HS256","typ":"JWT","kid":"`+id+`"}`, claims("")), testAud, iat},
		{"typ wrong", rawJWT(priv, `{"alg":"EdDSA","typ":"JWS","kid":"`+id+`"}`, claims("")), testAud, iat},
		{"crit", rawJWT(priv, `{"alg":"EdDSA","typ":"JWT","kid":"`+id+`","crit":["b64"]}`, claims("")), testAud, iat},
		{"tampered payload", strings.Join(tampered, "."), testAud, iat},
		{"duplicate claim", rawJWT(priv, hdr, claims(`,"aud":"`+testAud+`"`)), testAud, iat},
		{"duplicate header", rawJWT(priv, `{"alg":"EdDSA","alg":"EdDSA","typ":"JWT","kid":"`+id+`"}`, claims("")), testAud, iat},
		{"aud array of two", rawJWT(priv, hdr, strings.Replace(claims(""), `"aud":"`+testAud+`"`, `"aud":["`+testAud+`","x"]`, 1)), testAud, iat},
		{"aud missing", rawJWT(priv, hdr, strings.Replace(claims(""), `"aud":"`+testAud+`",`, ``, 1)), testAud, iat},
		{"iat float", rawJWT(priv, hdr, strings.Replace(claims(""), "1800000000", "1800000000.0", 1)), testAud, iat},
		{"iat string", rawJWT(priv, hdr, strings.Replace(claims(""), "1800000000", `"1800000000"`, 1)), testAud, iat},
		{"exp missing", rawJWT(priv, hdr, strings.Replace(claims(""), `,"exp":1800000120`, ``, 1)), testAud, iat},
		{"future nbf", rawJWT(priv, hdr, claims(`,"nbf":1800000100`)), testAud, iat},
		{"signed by other key", rawJWT(other, hdr, claims("")), testAud, iat},
		{"header not object", rawJWT(priv, `[]`, claims("")), testAud, iat},
		{"claims invalid json", rawJWT(priv, hdr, `{"iss":`), testAud, iat},
		{"two parts", good[:strings.LastIndex(good, ".")], testAud, iat},
		{"four parts", good + ".x", testAud, iat},
		{"padded signature", good + "==", testAud, iat},
		{"signature trailing bits", good[:len(good)-1] + "B", testAud, iat},
		{"too large", rawJWT(priv, hdr, claims(`,"pad":"`+strings.Repeat("x", 4000)+`"`)), testAud, iat},
		{"empty", "", testAud, iat},
	}
	for _, c := range badCases {
		t.Run(c.name, func(t *testing.T) {
			_, err := VerifyJWT(c.token, c.aud, c.now)
			wantCode(t, err, adp.CodeInvalidToken)
		})
	}

	// The small-order forgery (A = R = identity, S = 0) with a did:agent id.
	ident := make([]byte, 32)
	ident[0] = 1
	weak := string(AgentIDFromKey(ident))
	in := EncodeB64([]byte(`{"alg":"EdDSA","typ":"JWT","kid":"`+weak+`"}`)) + "." +
		EncodeB64([]byte(strings.ReplaceAll(claims(""), id, weak)))
	forged := in + "." + EncodeB64(append(append([]byte(nil), ident...), make([]byte, 32)...))
	_, err = VerifyJWT(forged, testAud, iat)
	wantCode(t, err, adp.CodeInvalidToken)

	// SignJWT argument checks.
	for _, c := range []struct{ iat, exp int64 }{{10, 10}, {10, 9}, {-1, 10}, {1, MaxSafeInt + 1}} {
		_, err := SignJWT(priv, testAud, c.iat, c.exp)
		wantCode(t, err, adp.CodeInvalidRequest)
	}
	_, err = SignJWT(priv[:3], testAud, 1, 2)
	wantCode(t, err, adp.CodeInvalidRequest)
	_, err = SignJWT(priv, "\xff", 1, 2)
	wantCode(t, err, adp.CodeInvalidRequest)
}

func TestNonces(t *testing.T) {
	if NextNonce(10, 5) != 11 || NextNonce(10, 1000) != 1000 || NextNonce(0, 0) != 1 {
		t.Fatal("NextNonce")
	}
	for _, h := range []string{"", "-1", "+1", "01", "1.0", " 1", "1 ", "0x10", "9007199254740992", "99999999999999999999", "1e3"} {
		next, err := ApplyMaxSeenNonce(10, 1000, h)
		wantCode(t, err, adp.CodeInvalidRequest)
		if next != 10 {
			t.Fatalf("%q changed next", h)
		}
	}
	if n, err := ApplyMaxSeenNonce(10, 1000, "0"); err != nil || n != 10 {
		t.Fatal("header 0")
	}
	if n, err := ApplyMaxSeenNonce(10, 1000, "10"); err != nil || n != 11 {
		t.Fatal("header == next")
	}
	// Bound uses max(next, now).
	if n, err := ApplyMaxSeenNonce(5_000_000_000, 0, "9294967296"); err != nil || n != 9294967297 {
		t.Fatalf("bound from next: %d %v", n, err)
	}
	_, err := ApplyMaxSeenNonce(MaxSafeInt-10, 0, "9007199254740991")
	wantCode(t, err, adp.CodeInvalidRequest)
}

func TestB64(t *testing.T) {
	for n := 0; n < 70; n++ {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(i*37 + n)
		}
		s := EncodeB64(b)
		got, err := DecodeB64(s)
		if err != nil || string(got) != string(b) {
			t.Fatalf("round trip %d: %v", n, err)
		}
		if _, err := DecodeB64Len(s, n); err != nil {
			t.Fatal(err)
		}
		if _, err := DecodeB64Len(s, n+1); err == nil {
			t.Fatal("wrong length accepted")
		}
	}
	for _, s := range []string{"A", "AB==", "AB=", "AB", "A+", "A/", "AA\n", "A A", "AAAAB", "QUJ", "QR", "QUI", "\x00\x00"} {
		_, err := DecodeB64(s)
		ok := err == nil
		// Canonical means decode then re-encode gives s back.
		want := canonicalByStd(s)
		if ok != want {
			t.Errorf("DecodeB64(%q) ok=%v, canonical=%v", s, ok, want)
		}
		if !ok {
			wantCode(t, err, adp.CodeInvalidRequest)
		}
	}
}
