package identity

import (
	"crypto/sha512"
	"crypto/subtle"
	"sync"

	"filippo.io/edwards25519"
)

// keyCacheSize bounds each generation of the decoded-key cache. Two
// generations are kept, so at most 2×keyCacheSize keys are held: about
// 200 bytes each (a 32-byte key and a decoded point), under 2 MiB.
const keyCacheSize = 4096

// keyCache keeps the negated curve points of recently seen public keys.
// Decoding a point (a square root in the field) is about 7 % of an
// Ed25519 verification, and an agent signs many events with one key: a
// host verifies the same writers again and again, and an archive holds a
// few speakers' records by the thousand. What is cached is only a pure
// function of the 32 key bytes, so a hit answers exactly as a decode
// would. Keys that do not decode are not cached.
//
// Two generations bound it without per-entry bookkeeping: lookups read
// the current map, then the previous one (moving a hit forward); when the
// current map is full it becomes the previous one and the oldest keys are
// dropped. A flood of fresh keys costs a decode each, as without a cache.
type keyCache struct {
	mu        sync.Mutex
	cur, prev map[[32]byte]*edwards25519.Point
}

var decodedKeys = &keyCache{cur: make(map[[32]byte]*edwards25519.Point)}

// negated returns −A for the point A that pub encodes, or false if pub is
// not a point. The result is shared: callers must not modify it.
func (c *keyCache) negated(pub []byte) (*edwards25519.Point, bool) {
	var k [32]byte
	copy(k[:], pub)
	c.mu.Lock()
	p, ok := c.cur[k]
	if !ok {
		if p, ok = c.prev[k]; ok {
			c.put(k, p)
		}
	}
	c.mu.Unlock()
	if ok {
		return p, true
	}
	a, err := new(edwards25519.Point).SetBytes(pub)
	if err != nil {
		return nil, false
	}
	p = new(edwards25519.Point).Negate(a)
	c.mu.Lock()
	c.put(k, p)
	c.mu.Unlock()
	return p, true
}

func (c *keyCache) put(k [32]byte, p *edwards25519.Point) {
	if len(c.cur) >= keyCacheSize {
		c.prev, c.cur = c.cur, make(map[[32]byte]*edwards25519.Point, keyCacheSize)
	}
	c.cur[k] = p
}

func (c *keyCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.cur) + len(c.prev)
}

// verifyCofactorless checks the Ed25519 equation as RFC 8032 §5.1.7 and
// crypto/ed25519 do, without the cofactor: S must be canonical (S < L),
// and R must equal the encoding of [S]B − [k]A with k = SHA-512(R ‖ A ‖ M)
// reduced mod L. The key's decode comes from the cache.
func verifyCofactorless(pub, msg, sig []byte) bool {
	minusA, ok := decodedKeys.negated(pub)
	if !ok {
		return false
	}
	s, err := new(edwards25519.Scalar).SetCanonicalBytes(sig[32:])
	if err != nil {
		return false
	}
	h := sha512.New()
	h.Write(sig[:32])
	h.Write(pub)
	h.Write(msg)
	var digest [64]byte
	k, err := new(edwards25519.Scalar).SetUniformBytes(h.Sum(digest[:0]))
	if err != nil {
		return false
	}
	r := new(edwards25519.Point).VarTimeDoubleScalarBaseMult(k, minusA, s)
	return subtle.ConstantTimeCompare(sig[:32], r.Bytes()) == 1
}
