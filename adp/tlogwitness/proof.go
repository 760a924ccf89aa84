package tlogwitness

import (
	"crypto/sha256"

	"golang.org/x/mod/sumdb/tlog"
)

// nodeHash is RFC 6962's interior node hash.
func nodeHash(l, r tlog.Hash) tlog.Hash {
	var buf [1 + 2*tlog.HashSize]byte
	buf[0] = 1
	copy(buf[1:], l[:])
	copy(buf[1+tlog.HashSize:], r[:])
	return sha256.Sum256(buf[:])
}

// isPow2 reports whether n is a power of two.
func isPow2(n uint64) bool { return n != 0 && n&(n-1) == 0 }

// PrefixRoot runs RFC 9162 §2.1.4.2 consistency verification from size n
// to size m (0 < n < m) on proof and returns the root of the n-leaf
// prefix it implies, provided the proof reproduces newRoot. The proof's
// hashes then are the new tree's own nodes (short of a SHA-256 collision),
// so a prefix root that differs from a checkpoint at size n shows that
// the two checkpoints cannot both be true.
//
// When n is a power of two the standard proof omits the prefix root (the
// verifier knows it); here proof[0] must then be that node, made explicit
// (step 2 of the RFC's algorithm done by the prover).
func PrefixRoot(n, m uint64, proof []tlog.Hash, newRoot tlog.Hash) (tlog.Hash, bool) {
	if n == 0 || n >= m || len(proof) == 0 || len(proof) > MaxProofHashes+1 {
		return tlog.Hash{}, false
	}
	fn, sn := n-1, m-1
	for fn&1 == 1 {
		fn >>= 1
		sn >>= 1
	}
	fr, sr := proof[0], proof[0]
	for _, c := range proof[1:] {
		if sn == 0 {
			return tlog.Hash{}, false
		}
		if fn&1 == 1 || fn == sn {
			fr = nodeHash(c, fr)
			sr = nodeHash(c, sr)
			for fn&1 == 0 && fn != 0 {
				fn >>= 1
				sn >>= 1
			}
		} else {
			sr = nodeHash(sr, c)
		}
		fn >>= 1
		sn >>= 1
	}
	if sn != 0 || sr != newRoot {
		return tlog.Hash{}, false
	}
	return fr, true
}
