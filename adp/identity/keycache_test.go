package identity

import (
	"crypto/ed25519"
	"encoding/binary"
	"sync"
	"testing"

	"filippo.io/edwards25519"
)

// l is the order of the prime subgroup, little-endian (RFC 8032 §5.1).
var l = [32]byte{0xed, 0xd3, 0xf5, 0x5c, 0x1a, 0x63, 0x12, 0x58, 0xd6, 0x9c, 0xf7, 0xa2, 0xde, 0xf9, 0xde, 0x14,
	0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x10}

// addL returns s + L, the non-canonical twin of a canonical S.
func addL(s []byte) []byte {
	out := make([]byte, 32)
	carry := 0
	for i := 0; i < 32; i++ {
		v := int(s[i]) + int(l[i]) + carry
		out[i], carry = byte(v), v>>8
	}
	return out
}

func seededPair(i int) (ed25519.PublicKey, ed25519.PrivateKey) {
	seed := make([]byte, 32)
	binary.LittleEndian.PutUint64(seed, uint64(i)+1)
	priv := ed25519.NewKeyFromSeed(seed)
	return priv.Public().(ed25519.PublicKey), priv
}

// verifyCases are signatures crypto/ed25519 accepts and ones it refuses for
// each of its reasons.
func verifyCases() [][3][]byte {
	pub, priv := seededPair(0)
	pub2, _ := seededPair(1)
	msg := []byte("adp: key cache")
	sig := ed25519.Sign(priv, msg)
	flip := func(b []byte, i int) []byte {
		c := append([]byte(nil), b...)
		c[i] ^= 1
		return c
	}
	nonCanonicalS := append(append([]byte(nil), sig[:32]...), addL(sig[32:])...)
	notAPoint := make([]byte, 32)
	notAPoint[0] = 2 // y = 2 is not on the curve
	identityKey := make([]byte, 32)
	identityKey[0] = 1
	negZeroX := append([]byte(nil), identityKey...)
	negZeroX[31] |= 0x80 // x = 0 with the sign bit set
	yAboveP := []byte{0xee, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
		0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f}
	return [][3][]byte{
		{pub, msg, sig},
		{pub2, msg, sig},
		{pub, []byte("adp: key cachf"), sig},
		{pub, msg, flip(sig, 0)},
		{pub, msg, flip(sig, 40)},
		{flip(pub, 3), msg, sig},
		{pub, msg, nonCanonicalS},
		{notAPoint, msg, sig},
		{identityKey, msg, sig},
		{negZeroX, msg, sig},
		{yAboveP, msg, sig},
		{pub, msg, append(append([]byte(nil), identityKey...), make([]byte, 32)...)},
	}
}

// TestVerifyMatchesStdlib: the cached verification answers as
// crypto/ed25519.Verify, on a cold cache and on a warm one.
func TestVerifyMatchesStdlib(t *testing.T) {
	for round := 0; round < 2; round++ {
		for i, c := range verifyCases() {
			want := ed25519.Verify(c[0], c[1], c[2])
			if got := verifyCofactorless(c[0], c[1], c[2]); got != want {
				t.Errorf("round %d case %d: verifyCofactorless = %v, crypto/ed25519 = %v", round, i, got, want)
			}
		}
	}
	if c := verifyCases()[0]; !verifyCofactorless(c[0], c[1], c[2]) {
		t.Fatal("a good signature was refused")
	}
}

// FuzzVerifyMatchesStdlib compares the two verifications on any input:
// the cache must never change an answer.
func FuzzVerifyMatchesStdlib(f *testing.F) {
	for _, c := range verifyCases() {
		f.Add(c[0], c[1], c[2])
	}
	f.Fuzz(func(t *testing.T, pub, msg, sig []byte) {
		if len(pub) != 32 || len(sig) != 64 {
			return
		}
		want := ed25519.Verify(pub, msg, sig)
		for range 2 { // cold, then cached
			if got := verifyCofactorless(pub, msg, sig); got != want {
				t.Fatalf("verifyCofactorless(%x, %q, %x) = %v, crypto/ed25519 = %v", pub, msg, sig, got, want)
			}
		}
	})
}

// TestKeyCacheBounded: a flood of fresh keys (free to make) keeps the cache
// at two generations, and keys evicted long ago still verify.
func TestKeyCacheBounded(t *testing.T) {
	c := &keyCache{cur: map[[32]byte]*edwards25519.Point{}}
	for i := 0; i < 3*keyCacheSize+17; i++ {
		pub, _ := seededPair(i)
		if _, ok := c.negated(pub); !ok {
			t.Fatalf("key %d did not decode", i)
		}
		if n := c.len(); n > 2*keyCacheSize {
			t.Fatalf("after %d keys the cache holds %d (bound %d)", i+1, n, 2*keyCacheSize)
		}
	}
	if n := c.len(); n < keyCacheSize {
		t.Fatalf("the cache holds %d keys after the flood; want at least one full generation (%d)", n, keyCacheSize)
	}
	// A key of the first generation, long evicted, decodes again.
	pub, priv := seededPair(0)
	msg := []byte("evicted")
	if !VerifyStrictMessage(pub, msg, ed25519.Sign(priv, msg)) {
		t.Fatal("an evicted key no longer verifies")
	}
	// A hit in the previous generation is moved forward, not lost at the
	// next turn.
	hot, _ := seededPair(3*keyCacheSize + 16)
	for i := 0; i < keyCacheSize; i++ {
		other, _ := seededPair(10*keyCacheSize + i)
		c.negated(other)
		c.negated(hot)
	}
	var k [32]byte
	copy(k[:], hot)
	c.mu.Lock()
	_, inCur := c.cur[k]
	_, inPrev := c.prev[k]
	c.mu.Unlock()
	if !inCur && !inPrev {
		t.Fatal("a key used all along was evicted")
	}
}

// TestVerifyConcurrent verifies from many goroutines at once (run with
// -race): good signatures pass, a bad one fails, whatever the cache holds.
func TestVerifyConcurrent(t *testing.T) {
	msg := []byte("concurrent")
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				pub, priv := seededPair(i % 7)
				sig := ed25519.Sign(priv, msg)
				if !VerifyStrictMessage(pub, msg, sig) {
					t.Error("good signature refused")
					return
				}
				sig[5] ^= 0x10
				if VerifyStrictMessage(pub, msg, sig) {
					t.Error("bad signature accepted")
					return
				}
			}
		}()
	}
	wg.Wait()
}

// TestVerifyAllocatesNothing bounds what a cached verification costs the
// write path beside its arithmetic: no allocation once the key is cached.
func TestVerifyAllocatesNothing(t *testing.T) {
	pub, priv := seededPair(42)
	msg := []byte("no allocations")
	sig := ed25519.Sign(priv, msg)
	if !VerifyStrictMessage(pub, msg, sig) {
		t.Fatal("good signature refused")
	}
	if n := testing.AllocsPerRun(100, func() { VerifyStrictMessage(pub, msg, sig) }); n != 0 {
		t.Fatalf("a verification with its key cached allocates %.1f times; want 0", n)
	}
}
