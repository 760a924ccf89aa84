package receipt

import (
	"bytes"
	"crypto/ed25519"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/adpnode/adpnode/adp/identity"
	"github.com/adpnode/adpnode/adp/rounds"
	"github.com/adpnode/adpnode/adp/types"
)

func key(b byte) ed25519.PrivateKey {
	k, _ := identity.KeyFromSeed(bytes.Repeat([]byte{b}, 32))
	return k
}

func id(k ed25519.PrivateKey) string {
	return identity.AgentIDFromKey(k.Public().(ed25519.PublicKey)).String()
}

func signed(t testing.TB) (*Receipt, ed25519.PrivateKey, ed25519.PrivateKey) {
	a, b := key(1), key(2)
	th, err := TermsHash([]byte("10 widgets for 5 EUR"), bytes.Repeat([]byte{7}, SaltBytes))
	if err != nil {
		t.Fatal(err)
	}
	r := &Receipt{Type: Type, PartyA: id(a), PartyB: id(b), TermsHash: th, Context: "d8ftedhpqhsusbg001tg", Ref: strings.Repeat("A", 43), TS: 1_900_000_000}
	if err := r.Sign(a); err != nil {
		t.Fatal(err)
	}
	if err := r.Sign(b); err != nil {
		t.Fatal(err)
	}
	return r, a, b
}

func TestCoSignedReceipt(t *testing.T) {
	r, _, _ := signed(t)
	got, err := Check(r.Marshal())
	if err != nil || *got != *r {
		t.Fatalf("check: %v", err)
	}
	// The deal pack's schema accepts it (the host's shape check).
	p, _ := types.BundledPackByID(PackID)
	d, _ := p.Pack.Type(EventType)
	if err := d.ValidatePayload(r.Marshal()); err != nil {
		t.Fatal(err)
	}
	// The signed bytes are the domain then JCS without the signatures.
	msg, _ := r.SigningBytes()
	if !bytes.HasPrefix(msg, []byte("adpnode.deal.receipt/1\x00{\"context\":")) || bytes.Contains(msg, []byte("sigA")) {
		t.Fatalf("signing bytes %q", msg)
	}
	// Terms hash: SHA3-256 over terms then salt; the salt length is fixed.
	if _, err := TermsHash([]byte("x"), []byte("short")); err == nil {
		t.Fatal("short salt accepted")
	}
}

func TestOneBadSignatureFlagged(t *testing.T) {
	r, a, _ := signed(t)
	// partyB's signature over other content (a changed ts) is bad.
	other := *r
	other.TS++
	other.Sign(key(2))
	bad := *r
	bad.SigB = other.SigB
	v := bad.Verify()
	if v.A != nil || !errors.Is(v.B, ErrBad) || v.OK() {
		t.Fatalf("verify %+v", v)
	}
	if _, err := Check(bad.Marshal()); err == nil || !strings.Contains(err.Error(), "sigB") || strings.Contains(err.Error(), "sigA") {
		t.Fatalf("check: %v", err)
	}
	// Changing any signed member breaks both signatures.
	moved := *r
	moved.TermsHash = strings.Repeat("B", 43)
	if v := moved.Verify(); v.A == nil || v.B == nil {
		t.Fatalf("tampered terms verify: %+v", v)
	}
	// One party signing both slots does not make a co-signed receipt.
	self := *r
	self.SigB = self.SigA
	if self.Verify().B == nil {
		t.Fatal("partyA's signature accepted as partyB's")
	}
	// A receipt signature is not an event signature: the domain differs.
	msg, _ := r.SigningBytes()
	sig := ed25519.Sign(a, msg[len(Domain):])
	plain := *r
	plain.SigA = identity.EncodeB64(sig)
	if plain.Verify().A == nil {
		t.Fatal("a signature without the domain prefix verified")
	}
	// A third party cannot sign.
	if err := r.Sign(key(3)); err == nil {
		t.Fatal("a third key signed")
	}
}

func TestParseHostile(t *testing.T) {
	r, _, _ := signed(t)
	good := string(r.Marshal())
	for name, raw := range map[string]string{
		"duplicate":   strings.Replace(good, `"ts":`, `"ts":1,"ts":`, 1),
		"unknown":     strings.Replace(good, `"ts":`, `"terms":"secret","ts":`, 1),
		"missing sig": strings.Replace(good, `,"sigB":"`+r.SigB+`"`, "", 1),
		"same party":  strings.Replace(good, r.PartyB, r.PartyA, 1),
		"bad type":    strings.Replace(good, Type, "other/1", 1),
		"float ts":    strings.Replace(good, `"ts":1900000000`, `"ts":1.9e9`, 1),
		"short sig":   strings.Replace(good, r.SigA, "AAAA", 1),
		"not object":  `[]`,
		"huge":        `{"context":"` + strings.Repeat("x", MaxBytes) + `"}`,
	} {
		if _, err := Parse([]byte(raw)); err == nil {
			t.Errorf("%s: parsed", name)
		}
	}
	if _, err := ParseUnsigned([]byte(strings.Replace(good, `,"sigB":"`+r.SigB+`"`, "", 1))); err != nil {
		t.Fatalf("unsigned draft: %v", err)
	}
}

func FuzzParse(f *testing.F) {
	r, _, _ := signed(f)
	f.Add(r.Marshal())
	f.Add([]byte(`{"type":"adpnode.deal.receipt/1"}`))
	f.Add([]byte(`{"a":1,"a":2}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		got, err := Parse(raw)
		if err != nil {
			return
		}
		// A parsed receipt round-trips: re-marshal and parse again to the
		// same receipt and the same verdict.
		again, err := Parse(got.Marshal())
		if err != nil || *again != *got {
			t.Fatalf("round trip: %v", err)
		}
		if (got.Verify().Err() == nil) != (again.Verify().Err() == nil) {
			t.Fatal("verdict changed on round trip")
		}
	})
}

// Property: a receipt counts only in the room it names, for a round that
// exists there and was agreed before the receipt, signed by that round's
// two parties. Each way of failing is its own error, and a co-signed
// receipt with valid signatures still fails it.
func TestCheckInBindsRoomRoundAndParties(t *testing.T) {
	const room = "d8ftedhpqhsusbg001tg"
	a, b, c := key(1), key(2), key(3)
	round := hash("A")
	turns := []rounds.Turn{
		{Seq: 3, Hash: round, Actor: id(a), Payload: rounds.Payload{Type: rounds.Propose, Text: "t", Goal: "g", Options: []rounds.Option{{ID: "x", Title: "X"}}}},
		{Seq: 4, Hash: hash("B"), Actor: id(b), Payload: rounds.Payload{Type: rounds.Accept, Text: "ok", Ref: round, Choice: "x"}},
		{Seq: 5, Hash: hash("C"), Actor: id(c), Payload: rounds.Payload{Type: rounds.Propose, Text: "t", Goal: "open", Options: []rounds.Option{{ID: "x", Title: "X"}}}},
	}
	res := rounds.Derive(turns)
	mk := func(ctx, ref string, p, q ed25519.PrivateKey) []byte {
		r := &Receipt{Type: Type, PartyA: id(p), PartyB: id(q), TermsHash: hash("D"), Context: ctx, Ref: ref, TS: 1}
		if r.Sign(p) != nil || r.Sign(q) != nil {
			t.Fatal("sign")
		}
		return r.Marshal()
	}
	for name, tc := range map[string]struct {
		raw  []byte
		seq  int64
		want error
	}{
		"counts":            {mk(room, round, a, b), 6, nil},
		"parties swapped":   {mk(room, round, b, a), 6, nil},
		"not yet posted":    {mk(room, round, a, b), math.MaxInt64, nil},
		"another room":      {mk("d8ftedhpqhsusbg002tg", round, a, b), 6, ErrOtherRoom},
		"missing round":     {mk(room, hash("E"), a, b), 6, ErrNoRound},
		"a turn, no round":  {mk(room, hash("B"), a, b), 6, ErrNoRound},
		"round not agreed":  {mk(room, hash("C"), c, a), 6, ErrNotAgreed},
		"before agreement":  {mk(room, round, a, b), 4, ErrNotAgreed},
		"third party":       {mk(room, round, a, c), 6, ErrNotParties},
		"two third parties": {mk(room, round, c, key(4)), 6, ErrNotParties},
	} {
		r, err := CheckIn(room, tc.seq, res, tc.raw)
		if r == nil || !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
			t.Errorf("%s: %v, want %v", name, err, tc.want)
		}
		// The signatures themselves verify in every case.
		if r != nil && !r.Verify().OK() {
			t.Errorf("%s: signatures fail", name)
		}
	}
	// A bad signature is reported before the binding.
	bad, _, _ := signed(t)
	bad.SigB = bad.SigA
	if _, err := CheckIn(room, 6, res, bad.Marshal()); err == nil || !strings.Contains(err.Error(), "sigB") {
		t.Fatalf("bad signature: %v", err)
	}
	// No rounds at all: nothing counts.
	if _, err := CheckIn(room, 6, nil, mk(room, round, a, b)); !errors.Is(err, ErrNoRound) {
		t.Fatalf("no rounds: %v", err)
	}
}

// hash is an event hash of the test: c then 42 zero digits (strict base64url).
func hash(c string) string { return c + strings.Repeat("A", 42) }
