package identity

import (
	"encoding/json"
	"strconv"

	"github.com/adpnode/adpnode/adp"
)

// MaxNonceJump is the furthest one Max-Seen-Nonce header may move a client's
// next nonce past max(next, now_ms) (Identity §8).
const MaxNonceJump = 1 << 32

// NextNonce returns the client nonce rule max(last+1, nowMs) (Identity §8).
// It does not check that the result is at most MaxSafeInt.
func NextNonce(last, nowMs int64) int64 {
	return max(last+1, nowMs)
}

// ApplyMaxSeenNonce applies a Max-Seen-Nonce response header to the client's
// next nonce (Identity §8). The header must be a decimal safe integer without
// sign or leading zeros; a header beyond max(next, nowMs)+2^32, or one that
// leaves no safe nonce after it, is refused. A header >= next gives
// header+1; a smaller one leaves next unchanged. Errors are invalid_request.
func ApplyMaxSeenNonce(next, nowMs int64, header string) (int64, error) {
	h, ok := parseDecimal(header)
	if !ok {
		return next, adp.Reason(adp.CodeInvalidRequest, "max_seen_nonce_malformed", "Max-Seen-Nonce is not a decimal safe integer")
	}
	if h > max(next, nowMs)+MaxNonceJump {
		return next, adp.Reason(adp.CodeInvalidRequest, "max_seen_nonce_out_of_bound", "Max-Seen-Nonce jumps more than 2^32 past the local nonce")
	}
	if h < next {
		return next, nil
	}
	if h >= MaxSafeInt {
		return next, adp.Reason(adp.CodeInvalidRequest, "max_seen_nonce_exhausted", "Max-Seen-Nonce leaves no safe nonce")
	}
	return h + 1, nil
}

// DataMaxSeenNonce is the data key of a nonce_not_greater error that
// carries the actor's highest accepted nonce, sent as Max-Seen-Nonce.
const DataMaxSeenNonce = "max_seen_nonce"

// NonceNotGreater is the error for a nonce at or below maxSeen, the
// actor's highest accepted nonce (Identity §7): nonce_not_greater with
// data.max_seen_nonce.
func NonceNotGreater(maxSeen int64) *adp.Error {
	return &adp.Error{Code: adp.CodeNonceNotGreater, Message: "nonce is not greater than the highest accepted nonce",
		Data: map[string]any{DataMaxSeenNonce: maxSeen}}
}

// MaxSeenNonceOf returns the highest accepted nonce a nonce_not_greater
// error carries in its data (an integer, as set by NonceNotGreater or as
// decoded from JSON), and whether it carries a safe non-negative one.
func MaxSeenNonceOf(e *adp.Error) (int64, bool) {
	if e == nil || e.Code != adp.CodeNonceNotGreater {
		return 0, false
	}
	var v int64
	switch x := e.Data[DataMaxSeenNonce].(type) {
	case int64:
		v = x
	case int:
		v = int64(x)
	case float64:
		if x != float64(int64(x)) {
			return 0, false
		}
		v = int64(x)
	case json.Number:
		n, err := x.Int64()
		if err != nil {
			return 0, false
		}
		v = n
	default:
		return 0, false
	}
	return v, v >= 0 && v <= MaxSafeInt
}

// FormatMaxSeenNonce renders a Max-Seen-Nonce header value (a decimal
// integer, as ApplyMaxSeenNonce parses it).
func FormatMaxSeenNonce(v int64) string { return strconv.FormatInt(v, 10) }

// parseDecimal parses 0 or a decimal integer without sign or leading zeros,
// up to MaxSafeInt.
func parseDecimal(s string) (int64, bool) {
	if s == "" || len(s) > 16 || (s[0] == '0' && len(s) > 1) {
		return 0, false
	}
	var v int64
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + int64(c-'0')
	}
	if v > MaxSafeInt {
		return 0, false
	}
	return v, true
}
