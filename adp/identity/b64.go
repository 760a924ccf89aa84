package identity

import (
	"encoding/base64"

	"github.com/adpnode/adpnode/adp"
)

const b64Alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"

// b64Val maps a byte to its 6-bit value, or 0xff when it is not in the
// URL-safe alphabet.
var b64Val = func() (t [256]byte) {
	for i := range t {
		t[i] = 0xff
	}
	for i := 0; i < len(b64Alphabet); i++ {
		t[b64Alphabet[i]] = byte(i)
	}
	return t
}()

// EncodeB64 returns the unpadded base64url encoding of b.
func EncodeB64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

// DecodeB64 decodes canonical unpadded base64url: only the URL-safe alphabet,
// no '=' padding, no whitespace, zero trailing bits, so that re-encoding the
// result gives back s exactly. Errors are invalid_request; callers that know
// the context (event hash, signature, ...) re-code them.
func DecodeB64(s string) ([]byte, error) {
	out, ok := appendB64(make([]byte, 0, len(s)*3/4), s)
	if !ok {
		return nil, adp.Reason(adp.CodeInvalidRequest, "base64", "not canonical unpadded base64url")
	}
	return out, nil
}

// DecodeB64Len is DecodeB64 that also requires exactly n decoded bytes.
func DecodeB64Len(s string, n int) ([]byte, error) {
	if len(s) != b64Len(n) {
		return nil, adp.Reason(adp.CodeInvalidRequest, "base64", "base64url value has the wrong length")
	}
	return DecodeB64(s)
}

// b64Len is the unpadded encoded length of n bytes.
func b64Len(n int) int { return (n*8 + 5) / 6 }

// validB64Len reports whether s is canonical base64url of exactly n bytes,
// without allocating (n <= 64).
func validB64Len(s string, n int) bool {
	if len(s) != b64Len(n) {
		return false
	}
	var buf [64]byte
	_, ok := appendB64(buf[:0], s)
	return ok
}

// appendB64 decodes canonical unpadded base64url s onto dst.
func appendB64(dst []byte, s string) ([]byte, bool) {
	if len(s)%4 == 1 {
		return dst, false
	}
	i := 0
	for ; i+4 <= len(s); i += 4 {
		a, b, c, d := b64Val[s[i]], b64Val[s[i+1]], b64Val[s[i+2]], b64Val[s[i+3]]
		if (a|b|c|d)&0xc0 != 0 {
			return dst, false
		}
		v := uint32(a)<<18 | uint32(b)<<12 | uint32(c)<<6 | uint32(d)
		dst = append(dst, byte(v>>16), byte(v>>8), byte(v))
	}
	switch len(s) - i {
	case 2:
		a, b := b64Val[s[i]], b64Val[s[i+1]]
		if (a|b)&0xc0 != 0 || b&0x0f != 0 {
			return dst, false
		}
		dst = append(dst, a<<2|b>>4)
	case 3:
		a, b, c := b64Val[s[i]], b64Val[s[i+1]], b64Val[s[i+2]]
		if (a|b|c)&0xc0 != 0 || c&0x03 != 0 {
			return dst, false
		}
		v := uint32(a)<<12 | uint32(b)<<6 | uint32(c)
		dst = append(dst, byte(v>>10), byte(v>>2))
	}
	return dst, true
}
