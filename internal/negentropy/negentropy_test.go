package negentropy

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"math/rand/v2"
	"sort"
	"testing"
)

func item(ts uint64, seed uint64) Item {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], seed)
	return Item{Timestamp: ts, ID: sha256.Sum256(b[:])}
}

// run reconciles a (initiator) with b and returns have, need, rounds and
// bytes sent both ways.
func run(t testing.TB, a, b *Set, frame int) (have, need []ID, rounds, sent int) {
	t.Helper()
	ia, rb := NewSession(a, frame), NewSession(b, frame)
	msg := ia.Initiate()
	for msg != nil {
		rounds++
		if rounds > 100 {
			t.Fatal("no convergence in 100 rounds")
		}
		if frame > 0 && len(msg) > frame {
			t.Fatalf("initiator message of %d bytes over the frame limit %d", len(msg), frame)
		}
		sent += len(msg)
		ans, err := rb.Respond(msg)
		if err != nil {
			t.Fatal(err)
		}
		if frame > 0 && len(ans) > frame {
			t.Fatalf("answer of %d bytes over the frame limit %d", len(ans), frame)
		}
		sent += len(ans)
		var h, n []ID
		msg, h, n, err = ia.Reconcile(ans)
		if err != nil {
			t.Fatal(err)
		}
		have, need = append(have, h...), append(need, n...)
	}
	return have, need, rounds, sent
}

func sortIDs(ids []ID) []ID {
	sort.Slice(ids, func(i, j int) bool { return bytes.Compare(ids[i][:], ids[j][:]) < 0 })
	return ids
}

// randomPair builds two sets sharing common items, with onlyA and onlyB
// items of their own.
func randomPair(r *rand.Rand, common, onlyA, onlyB int) (a, b *Set, wantHave, wantNeed []ID) {
	var ai, bi []Item
	seed := r.Uint64()
	next := func() Item {
		seed++
		// Timestamps collide often, so bounds need id prefixes.
		return item(1_700_000_000_000+uint64(r.IntN(common+onlyA+onlyB+1)/3), seed)
	}
	for range common {
		it := next()
		ai, bi = append(ai, it), append(bi, it)
	}
	for range onlyA {
		it := next()
		ai = append(ai, it)
		wantHave = append(wantHave, it.ID)
	}
	for range onlyB {
		it := next()
		bi = append(bi, it)
		wantNeed = append(wantNeed, it.ID)
	}
	return NewSet(ai), NewSet(bi), sortIDs(wantHave), sortIDs(wantNeed)
}

func equalIDs(a, b []ID) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// Random sets with a small symmetric difference converge on exactly the
// difference, with and without a frame limit.
func TestConvergesOnTheDifference(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for trial := range 60 {
		common := []int{0, 1, 31, 32, 100, 1000, 20_000}[trial%7]
		onlyA, onlyB := r.IntN(40), r.IntN(40)
		if trial%5 == 0 {
			onlyA = 0
		}
		frame := []int{0, 4096, 60_000}[trial%3]
		a, b, wantHave, wantNeed := randomPair(r, common, onlyA, onlyB)
		have, need, _, _ := run(t, a, b, frame)
		if !equalIDs(sortIDs(have), wantHave) || !equalIDs(sortIDs(need), wantNeed) {
			t.Fatalf("trial %d (common %d, a %d, b %d, frame %d): have %d (want %d), need %d (want %d)",
				trial, common, onlyA, onlyB, frame, len(have), len(wantHave), len(need), len(wantNeed))
		}
	}
}

// A large difference under a small frame limit takes more rounds but
// every message stays within the limit and the result is exact.
func TestFrameLimitLargeDifference(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	a, b, wantHave, wantNeed := randomPair(r, 5000, 3000, 2000)
	have, need, rounds, _ := run(t, a, b, 4096)
	if !equalIDs(sortIDs(have), wantHave) || !equalIDs(sortIDs(need), wantNeed) {
		t.Fatalf("have %d want %d, need %d want %d", len(have), len(wantHave), len(need), len(wantNeed))
	}
	if rounds < 3 {
		t.Fatalf("5,000 differing ids in %d rounds of 4 KB frames", rounds)
	}
}

// Bytes exchanged grow with the difference, not with the set size.
func TestBytesGrowWithDifferenceNotSize(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	bytesFor := func(common, diff int) int {
		a, b, _, _ := randomPair(r, common, diff/2, diff-diff/2)
		_, _, _, sent := run(t, a, b, 60_000)
		return sent
	}
	small, large := bytesFor(1_000, 10), bytesFor(100_000, 10)
	t.Logf("10 differences: %d B at 1,000 items, %d B at 100,000", small, large)
	if large > 4*small {
		t.Fatalf("100x the items cost %d B vs %d B for the same difference", large, small)
	}
	d100, d1000 := bytesFor(20_000, 100), bytesFor(20_000, 1000)
	t.Logf("20,000 items: %d B for 100 differences, %d B for 1,000", d100, d1000)
	if d1000 < 5*d100 || d1000 > 20*d100 {
		t.Fatalf("10x the difference cost %.1fx the bytes", float64(d1000)/float64(d100))
	}
	// Identical sets: one round of 16 fingerprints, whatever the size.
	a, b, _, _ := randomPair(r, 100_000, 0, 0)
	_, _, rounds, sent := run(t, a, b, 60_000)
	if rounds != 1 || sent > 16*(FingerprintSize+12)+8 {
		t.Fatalf("identical 100,000-item sets: %d rounds, %d B", rounds, sent)
	}
}

// Fixed vectors pin the wire format: varints, the fingerprint of a known
// set, and the first message over a small and an empty set.
func TestWireVectors(t *testing.T) {
	for _, c := range []struct {
		n    uint64
		want string
	}{{0, "00"}, {1, "01"}, {127, "7f"}, {128, "8100"}, {16384, "818000"}} {
		if got := hex.EncodeToString(appendVarint(nil, c.n)); got != c.want {
			t.Errorf("varint(%d) = %s, want %s", c.n, got, c.want)
		}
	}
	// Empty set: version, infinite bound (0), empty prefix (0), id list
	// (2) of 0 ids.
	if got := hex.EncodeToString(NewSession(NewSet(nil), 0).Initiate()); got != "6100000200" {
		t.Fatalf("empty initiate = %s", got)
	}
	// Fingerprint: ids 0x01.. and 0xff.. sum with carry across bytes.
	var x, y ID
	x[0], y[0], y[1] = 0x01, 0xff, 0x01
	s := NewSet([]Item{{1, x}, {2, y}})
	var sum [IDSize]byte
	sum[0], sum[1] = 0x00, 0x02
	h := sha256.Sum256(append(sum[:], 0x02))
	if fp := s.fingerprint(0, 2); !bytes.Equal(fp[:], h[:FingerprintSize]) {
		t.Fatalf("fingerprint %x, want %x", fp, h[:FingerprintSize])
	}
}

// Hostile messages: truncated, oversized counts, bad modes and versions
// fail cleanly, and never allocate beyond the message's own size.
func TestHostileMessages(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	a, _, _, _ := randomPair(r, 1000, 0, 0)
	for _, msg := range [][]byte{
		{},
		{0x61, 0x00},                         // bound without prefix length
		{0x61, 0x00, 0x00, 0x07},             // unknown mode
		{0x61, 0x00, 0x00, 0x02, 0x8f, 0xff}, // id count over what follows
		{0x61, 0x00, 0x21},                   // prefix longer than an id
		{0x61, 0x00, 0x00, 0x01, 0x01},       // truncated fingerprint
		{0x61, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, // endless varint
	} {
		if _, err := NewSession(a, 0).Respond(msg); err == nil {
			t.Errorf("%x: accepted", msg)
		}
	}
	// Another version: the responder answers with its own version byte;
	// an initiator refuses.
	if out, err := NewSession(a, 0).Respond([]byte{0x62, 1, 2}); err != nil || !bytes.Equal(out, []byte{ProtocolVersion}) {
		t.Fatalf("version answer %x %v", out, err)
	}
	init := NewSession(a, 0)
	init.Initiate()
	if _, _, _, err := init.Reconcile([]byte{0x62}); err != ErrVersion {
		t.Fatalf("initiator took version 0x62: %v", err)
	}
	// Random garbage never panics and answers stay within the frame limit.
	for range 2000 {
		msg := make([]byte, 1+r.IntN(300))
		for i := range msg {
			msg[i] = byte(r.UintN(256))
		}
		msg[0] = ProtocolVersion
		out, err := NewSession(a, 4096).Respond(msg)
		if err == nil && len(out) > 4096 {
			t.Fatalf("answer of %d B over the limit", len(out))
		}
	}
}

func FuzzRespond(f *testing.F) {
	a := NewSet([]Item{item(1, 1), item(1, 2), item(5, 3)})
	f.Add([]byte{0x61, 0x00, 0x00, 0x02, 0x00})
	f.Fuzz(func(t *testing.T, msg []byte) {
		out, err := NewSession(a, 4096).Respond(msg)
		if err == nil && len(out) > 4096 {
			t.Fatalf("answer of %d B", len(out))
		}
	})
}

func BenchmarkReconcile100kDiff100(b *testing.B) {
	r := rand.New(rand.NewPCG(9, 10))
	x, y, _, _ := randomPair(r, 100_000, 50, 50)
	b.ResetTimer()
	for range b.N {
		_, _, _, sent := run(b, x, y, 60_000)
		b.ReportMetric(float64(sent), "B/op-wire")
	}
}

// A returning node's shape: it holds the old version of every changed
// entry and the peer holds the new one, all newer than everything else,
// so every difference the initiator lacks sits at the end of the order,
// where the initiator has nothing. Under a frame limit the peer's id
// lists are cut; each cut must be followed by a description of the rest
// (a cut list once ended the session with 2,887 of 10,000 ids unsent).
// Exact at several sizes, frames and change shares.
func TestFrameLimitEveryChangeNewer(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	mk := func(ts uint64) Item {
		var id ID
		for i := range id {
			id[i] = byte(r.Uint32())
		}
		return Item{Timestamp: ts, ID: id}
	}
	const ts = 1_700_000_000_000
	for _, tc := range []struct{ rooms, every, frame int }{
		{20_000, 2, 128 << 10}, {2_000, 2, 4096}, {5_000, 1, 60_000}, {5_000, 3, 8192}, {1_000, 7, 4096}, {300, 1, 4096},
	} {
		var mine, theirs []Item
		var wantHave, wantNeed []ID
		for i := range tc.rooms {
			old := mk(ts)
			mine = append(mine, old)
			if i%tc.every == 0 {
				n := mk(ts + 1 + uint64(r.IntN(3)))
				theirs = append(theirs, n)
				wantHave, wantNeed = append(wantHave, old.ID), append(wantNeed, n.ID)
			} else {
				theirs = append(theirs, old)
			}
		}
		have, need, rounds, _ := run(t, NewSet(mine), NewSet(theirs), tc.frame)
		if !equalIDs(sortIDs(have), sortIDs(wantHave)) || !equalIDs(sortIDs(need), sortIDs(wantNeed)) {
			t.Errorf("%d rooms, every %d changed, frame %d: have %d (want %d), need %d (want %d) in %d rounds",
				tc.rooms, tc.every, tc.frame, len(have), len(wantHave), len(need), len(wantNeed), rounds)
		}
	}
}
