package seal

import (
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"strings"
	"testing"

	"github.com/adpnode/adpnode/adp"
	"github.com/adpnode/adpnode/adp/identity"
	"github.com/adpnode/adpnode/adp/record"
)

// signer is a member with its Ed25519 key, to sign the records a reader
// folds.
type signer struct {
	member
	ed ed25519.PrivateKey
}

func newSigner(t *testing.T) signer {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	k := mustKey(t)
	return signer{member{identity.AgentIDFromKey(pub), k}, priv}
}

// chain builds records of one room in seq order (the reader's seal
// bookkeeping does not need a replayable room: no room.create here).
type chain struct {
	t    *testing.T
	recs []*record.Record
}

func (c *chain) add(by signer, typ string, payload []byte) *record.Record {
	c.t.Helper()
	canon, err := identity.Canonicalize(payload)
	if err != nil {
		c.t.Fatal(err)
	}
	rid := room
	ev := identity.Event{Protocol: adp.Protocol, Type: typ, Actor: by.id, CreatedAt: 1, Nonce: int64(len(c.recs) + 1), Payload: canon, RoomID: &rid}
	env, err := identity.Sign(by.ed, ev)
	if err != nil {
		c.t.Fatal(err)
	}
	pre := ""
	if n := len(c.recs); n > 0 {
		pre = c.recs[n-1].Hash
	}
	r := record.New(room, int64(len(c.recs)+1), pre, env, 1)
	c.recs = append(c.recs, r)
	return r
}

func finder(ms ...member) KeyFinder {
	return func(pub []byte) *PrivateKey {
		for _, m := range ms {
			if string(m.priv.Public()) == string(pub) {
				return m.priv
			}
		}
		return nil
	}
}

// Property: a wrap addressed to a member that does not give it the epoch
// key, although the member holds the sealing key it names, is reported as
// a BadWrap naming the agent that signed the seal.epoch, its seq and the
// epoch, for each way it can be junk (bytes that do not open, a key other
// than the committed one, a key_seq that is not the member's seal.key);
// an honest wrap, and a wrap for a key the member no longer holds, are
// never reported; each verdict is found once and cached.
func TestBadWrapNamesTheWrapper(t *testing.T) {
	alice, bob, mallory := newSigner(t), newSigner(t), newSigner(t)
	c := &chain{t: t}
	keyA := c.add(alice, TypeKey, keyPayload(alice.member))
	keyB := c.add(bob, TypeKey, keyPayload(bob.member))
	keyM := c.add(mallory, TypeKey, keyPayload(mallory.member))
	to := []Recipient{
		{alice.id, MemberKey{keyA.Seq, alice.priv.Public()}},
		{bob.id, MemberKey{keyB.Seq, bob.priv.Public()}},
		{mallory.id, MemberKey{keyM.Seq, mallory.priv.Public()}},
	}
	honest := func(epoch int64) *EpochPayload {
		p, _, err := NewEpoch(rand.Reader, room, epoch, to)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	bobWrap := func(p *EpochPayload) *Wrap {
		for i := range p.Wraps {
			if p.Wraps[i].Member == bob.id {
				return &p.Wraps[i]
			}
		}
		t.Fatal("no wrap for bob")
		return nil
	}
	// Epoch 1, by alice: honest.
	c.add(alice, TypeEpoch, mustJSON(t, honest(1)))
	// Epoch 2, by mallory: bob's wrap is 80 random bytes.
	e2 := honest(2)
	junk := make([]byte, WrapSize)
	rand.Read(junk)
	bobWrap(e2).Wrap = identity.EncodeB64(junk)
	r2 := c.add(mallory, TypeEpoch, mustJSON(t, e2))
	// Epoch 3, by mallory: bob's wrap opens, to another key than the
	// committed one.
	e3 := honest(3)
	other := make([]byte, EpochKeySize)
	rand.Read(other)
	w, err := WrapKey(bob.priv.Public(), room, 3, string(bob.id), other)
	if err != nil {
		t.Fatal(err)
	}
	bobWrap(e3).Wrap = identity.EncodeB64(w)
	r3 := c.add(mallory, TypeEpoch, mustJSON(t, e3))
	// Epoch 4, by mallory: bob's wrap names mallory's seal.key.
	e4 := honest(4)
	bobWrap(e4).KeySeq = keyM.Seq
	r4 := c.add(mallory, TypeEpoch, mustJSON(t, e4))
	// Epoch 5, by alice: honest again.
	c.add(alice, TypeEpoch, mustJSON(t, honest(5)))

	rd := NewReader(room, bob.id, nil)
	rd.Fold(c.recs)
	if got := rd.CheckWraps(nil); len(got) != 0 {
		t.Fatalf("without keys nothing is checked: %v", got)
	}
	bad := rd.CheckWraps(finder(bob.member))
	want := []struct {
		epoch int64
		seq   int64
		why   string
	}{{2, r2.Seq, "does not open"}, {3, r3.Seq, "commitment"}, {4, r4.Seq, "not a seal.key of this member"}}
	if len(bad) != len(want) {
		t.Fatalf("bad wraps: %v", bad)
	}
	for i, w := range want {
		b := bad[i]
		if b.Epoch != w.epoch || b.Seq != w.seq || b.Wrapper != mallory.id || b.Member != bob.id || !strings.Contains(b.Reason, w.why) {
			t.Fatalf("bad wrap %d: %+v, want epoch %d seq %d by mallory (%s)", i, b, w.epoch, w.seq, w.why)
		}
		if !errors.Is(b, ErrOpen) || !strings.Contains(b.Error(), string(mallory.id)) {
			t.Fatalf("bad wrap %d error: %v", i, b)
		}
	}
	// The honest epochs open; the bad ones stay bad, from the cache, and
	// are not returned again.
	for _, e := range []int64{1, 5} {
		if _, err := rd.EpochKey(e, finder(bob.member)); err != nil {
			t.Fatalf("honest epoch %d: %v", e, err)
		}
	}
	var b *BadWrap
	if _, err := rd.EpochKey(2, func([]byte) *PrivateKey { t.Fatal("a cached verdict opened again"); return nil }); !errors.As(err, &b) || b.Epoch != 2 {
		t.Fatalf("epoch 2 again: %v", err)
	}
	if again := rd.CheckWraps(finder(bob.member)); len(again) != 0 || len(rd.BadWraps()) != 3 {
		t.Fatalf("reported twice: %v (all: %v)", again, rd.BadWraps())
	}

	// Honest readers: alice (every wrap for her is honest), and bob after
	// losing his key (a new one that opens nothing) are told of no bad wrap.
	ra := NewReader(room, alice.id, nil)
	ra.Fold(c.recs)
	if got := ra.CheckWraps(finder(alice.member)); len(got) != 0 {
		t.Fatalf("honest wraps reported as bad: %v", got)
	}
	lost := NewReader(room, bob.id, nil)
	lost.Fold(c.recs)
	if got := lost.CheckWraps(finder(member{bob.id, mustKey(t)})); len(got) != 3-2 {
		// Epoch 4's key_seq is wrong whatever key bob holds; 2 and 3
		// cannot be told from a lost key.
		t.Fatalf("a lost key: %v", got)
	}
	if _, err := lost.EpochKey(2, finder(member{bob.id, mustKey(t)})); errors.As(err, &b) || !errors.Is(err, ErrOpen) {
		t.Fatalf("a wrap for a key not held is not bad: %v", err)
	}
}
