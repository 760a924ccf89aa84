package identity

import (
	"crypto/ed25519"
)

// smallOrder holds the five small-order point encodings of Identity §2, with
// the top (sign) bit of byte 31 cleared.
var smallOrder = [5][32]byte{
	{0x01},
	{0xec, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
		0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f},
	{},
	{0x26, 0xe8, 0x95, 0x8f, 0xc2, 0xb2, 0x27, 0xb0, 0x45, 0xc3, 0xf4, 0x89, 0xf2, 0xef, 0x98, 0xf0,
		0xd5, 0xdf, 0xac, 0x05, 0xd3, 0xc6, 0x33, 0x39, 0xb1, 0x38, 0x02, 0x88, 0x6d, 0x53, 0xfc, 0x05},
	{0xc7, 0x17, 0x6a, 0x70, 0x3d, 0x4d, 0xd8, 0x4f, 0xba, 0x3c, 0x0b, 0x76, 0x0d, 0x10, 0x67, 0x0f,
		0x2a, 0x20, 0x53, 0xfa, 0x2c, 0x39, 0xcc, 0xc6, 0x4e, 0xc7, 0xfd, 0x77, 0x92, 0xac, 0x03, 0x7a},
}

// strictPoint applies Identity §2 rules 1 and 2 to a 32-byte point encoding:
// y (top bit cleared) below p = 2^255-19, and not one of the small-order
// encodings. It does not check that the encoding decodes to a curve point.
func strictPoint(b []byte) bool {
	var y [32]byte
	copy(y[:], b)
	y[31] &= 0x7f
	// y >= p exactly when y is in [2^255-19, 2^255-1]: bytes 1..30 are 0xff,
	// byte 31 is 0x7f and byte 0 is at least 0xed.
	if y[31] == 0x7f && y[0] >= 0xed {
		high := true
		for _, c := range y[1:31] {
			if c != 0xff {
				high = false
				break
			}
		}
		if high {
			return false
		}
	}
	for i := range smallOrder {
		if y == smallOrder[i] {
			return false
		}
	}
	return true
}

// VerifyStrict verifies an Ed25519 signature over a 32-byte event digest under
// the strict rules of Identity §2: 32-byte key, 64-byte signature, canonical
// non-small-order A and R, S < L and the cofactorless equation. It returns
// false for a msg that is not 32 bytes.
func VerifyStrict(pub, msg, sig []byte) bool {
	if len(msg) != 32 {
		return false
	}
	return VerifyStrictMessage(pub, msg, sig)
}

// VerifyStrictMessage is VerifyStrict for a message of any length (used for
// JWS signing inputs).
func VerifyStrictMessage(pub, msg, sig []byte) bool {
	if len(pub) != ed25519.PublicKeySize || len(sig) != ed25519.SignatureSize {
		return false
	}
	if !strictPoint(pub) || !strictPoint(sig[:32]) {
		return false
	}
	// Cofactorless, S >= L refused, and encodings that do not decode to a
	// point refused: crypto/ed25519.Verify's checks, with the key's decode
	// cached (keycache.go; FuzzVerifyMatchesStdlib compares the two).
	return verifyCofactorless(pub, msg, sig)
}
