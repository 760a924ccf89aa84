package identity

import (
	"crypto/ed25519"
	"encoding/json"
	"strconv"
	"strings"

	"github.com/adpnode/adpnode/adp"
)

// Request JWT limits (Identity §10).
const (
	MaxJWTSize     = 4096 // bytes of the compact token
	MaxJWTLifetime = 300  // seconds, exp - iat
	JWTSkew        = 60   // seconds of clock skew allowed on iat and exp
)

// SignJWT returns a request JWT (Identity §10): compact JWS with header
// {"alg":"EdDSA","typ":"JWT","kid":<agent id>} and claims iss = sub = kid,
// aud, iat, exp in seconds. It requires 0 <= iat < exp <= 2^53-1 and valid
// UTF-8 aud (invalid_request); it does not enforce the lifetime bound.
func SignJWT(priv ed25519.PrivateKey, aud string, iat, exp int64) (string, error) {
	priv, err := normalizeKey(priv)
	if err != nil {
		return "", err
	}
	if iat < 0 || exp <= iat || exp > MaxSafeInt {
		return "", adp.Errorf(adp.CodeInvalidRequest, "jwt times must satisfy 0 <= iat < exp <= 2^53-1")
	}
	id := string(AgentIDFromKey(priv.Public().(ed25519.PublicKey)))
	header := `{"alg":"EdDSA","typ":"JWT","kid":"` + id + `"}`
	claims := make([]byte, 0, 256)
	claims = append(claims, `{"iss":"`...)
	claims = append(claims, id...)
	claims = append(claims, `","sub":"`...)
	claims = append(claims, id...)
	claims = append(claims, `","aud":`...)
	claims, ok := appendJCSString(claims, aud)
	if !ok {
		return "", adp.Errorf(adp.CodeInvalidRequest, "jwt audience is not valid UTF-8")
	}
	claims = append(claims, `,"iat":`...)
	claims = strconv.AppendInt(claims, iat, 10)
	claims = append(claims, `,"exp":`...)
	claims = strconv.AppendInt(claims, exp, 10)
	claims = append(claims, '}')
	input := EncodeB64([]byte(header)) + "." + EncodeB64(claims)
	return input + "." + EncodeB64(ed25519.Sign(priv, []byte(input))), nil
}

func tokenErr(reason, msg string) error { return adp.Reason(adp.CodeInvalidToken, reason, msg) }

// VerifyJWT verifies a request JWT for audience at nowSec (Identity §10) and
// returns its Agent ID. It checks: size <= 4096 bytes; three canonical
// base64url parts; strict-JSON header and claims (duplicates rejected);
// alg "EdDSA"; typ "JWT" when present; no crit; kid == iss == sub, a valid
// Agent ID; the strict Ed25519 signature over the signing input; aud a string
// (or a one-string array) equal to audience; iat and exp integers with
// iat < exp <= iat+300, iat-60 <= nowSec < exp+60; nbf, when present, an
// integer with nbf-60 <= nowSec. Every failure is invalid_token. It does not
// check revocation or replay.
func VerifyJWT(token, audience string, nowSec int64) (AgentID, error) {
	if len(token) > MaxJWTSize {
		return "", tokenErr("too_large", "token exceeds 4096 bytes")
	}
	h64, rest, ok1 := strings.Cut(token, ".")
	c64, s64, ok2 := strings.Cut(rest, ".")
	if !ok1 || !ok2 || strings.Contains(s64, ".") {
		return "", tokenErr("malformed", "token is not a compact JWS")
	}
	header, err := jwtObject(h64, "header")
	if err != nil {
		return "", err
	}
	claims, err := jwtObject(c64, "claims")
	if err != nil {
		return "", err
	}
	if alg, _ := header["alg"].(string); alg != "EdDSA" {
		return "", tokenErr("alg", "alg must be EdDSA")
	}
	if typ, present := header["typ"]; present && typ != "JWT" {
		return "", tokenErr("typ", "typ must be JWT")
	}
	if _, present := header["crit"]; present {
		return "", tokenErr("crit", "crit header parameters are not supported")
	}
	kid, _ := header["kid"].(string)
	id, err := ParseAgentID(kid)
	if err != nil {
		return "", tokenErr("kid", "kid is not a valid agent id")
	}
	if iss, _ := claims["iss"].(string); iss != kid {
		return "", tokenErr("iss", "iss must equal kid")
	}
	if sub, _ := claims["sub"].(string); sub != kid {
		return "", tokenErr("sub", "sub must equal kid")
	}
	var sb [64]byte
	sig, ok := appendB64(sb[:0], s64)
	if !ok || !VerifyStrictMessage(id.PublicKey(), []byte(token[:len(h64)+1+len(c64)]), sig) {
		return "", tokenErr("signature", "token signature does not verify")
	}
	if !audMatches(claims["aud"], audience) {
		return "", tokenErr("aud", "aud does not match this service")
	}
	iat, ok1 := jwtInt(claims["iat"])
	exp, ok2 := jwtInt(claims["exp"])
	if !ok1 || !ok2 {
		return "", tokenErr("time", "iat and exp must be integers")
	}
	if exp <= iat {
		return "", tokenErr("time", "exp must be after iat")
	}
	if exp-iat > MaxJWTLifetime {
		return "", tokenErr("lifetime", "token lifetime exceeds 300 s")
	}
	if nowSec < iat-JWTSkew {
		return "", tokenErr("not_yet_valid", "token iat is in the future")
	}
	if nowSec >= exp+JWTSkew {
		return "", tokenErr("expired", "token has expired")
	}
	if v, present := claims["nbf"]; present {
		nbf, ok := jwtInt(v)
		if !ok || nowSec < nbf-JWTSkew {
			return "", tokenErr("not_yet_valid", "token nbf is in the future")
		}
	}
	return id, nil
}

// jwtObject decodes one base64url JWS part holding a strict-JSON object.
func jwtObject(part, what string) (map[string]any, error) {
	raw, ok := appendB64(nil, part)
	if !ok {
		return nil, tokenErr("malformed", "token "+what+" is not canonical base64url")
	}
	v, err := ParseJSON(raw)
	if err != nil {
		return nil, tokenErr("malformed", "token "+what+": "+err.Error())
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, tokenErr("malformed", "token "+what+" is not a JSON object")
	}
	return m, nil
}

func audMatches(v any, audience string) bool {
	switch a := v.(type) {
	case string:
		return a == audience
	case []any:
		if len(a) != 1 {
			return false
		}
		s, ok := a[0].(string)
		return ok && s == audience
	}
	return false
}

// jwtInt accepts a JSON integer literal (ParseJSON already bounded it to the
// safe range).
func jwtInt(v any) (int64, bool) {
	n, ok := v.(json.Number)
	if !ok || strings.ContainsAny(string(n), ".eE") {
		return 0, false
	}
	i, err := strconv.ParseInt(string(n), 10, 64)
	return i, err == nil
}
