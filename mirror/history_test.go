package mirror

import (
	"fmt"
	"testing"

	"github.com/dgraph-io/badger/v4"

	"github.com/adpnode/adpnode/adp/identity"
)

func testHash(b byte) [32]byte {
	var h [32]byte
	for i := range h {
		h[i] = b
	}
	return h
}

// storedRecord is the part of a stored record the history reads.
func storedRecord(rec, env [32]byte) []byte {
	return []byte(fmt.Sprintf(`{"hash":%q,"envelope":{"hash":%q}}`, identity.EncodeB64(rec[:]), identity.EncodeB64(env[:])))
}

// The history answers from the store what the overlay no longer holds, and
// trusts a hash index entry only as far as the record it names carries the
// hash: an entry pointing at another record, past the chain or malformed
// answers "unknown".
func TestRoomHistoryIndexNotTrusted(t *testing.T) {
	db, err := badger.Open(badger.DefaultOptions("").WithInMemory(true).WithLogger(nil))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	const rk = "did:agent:host/aaaaaaaaaaaaaaaaaaaa"
	other := "did:agent:host/bbbbbbbbbbbbbbbbbbbb"
	h := newRoomHistory(db, rk)
	err = db.Update(func(txn *badger.Txn) error {
		for s := int64(1); s <= 2; s++ {
			rec, env := testHash(byte(s)), testHash(byte(100+s))
			txn.Set(seqKey(pfxRec, rk, s), storedRecord(rec, env))
			txn.Set(hashKey(rk, rec), seqValue(s))
			txn.Set(hashKey(rk, env), seqValue(s))
		}
		txn.Set(hashKey(rk, testHash(50)), seqValue(1))   // names a record without that hash
		txn.Set(hashKey(rk, testHash(51)), seqValue(9))   // names no stored record
		txn.Set(hashKey(rk, testHash(52)), []byte{1, 2})  // malformed
		txn.Set(hashKey(other, testHash(1)), seqValue(1)) // another room's entry
		txn.Set(seqKey(pfxRec, other, 1), storedRecord(testHash(60), testHash(61)))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		id   [32]byte
		seq  int64
		want bool
	}{{testHash(1), 1, true}, {testHash(101), 1, true}, {testHash(2), 2, true}, {testHash(102), 2, true},
		{testHash(50), 0, false}, {testHash(51), 0, false}, {testHash(52), 0, false}, {testHash(60), 0, false}, {testHash(7), 0, false}} {
		seq, ok, _ := h.SeqOf(c.id)
		if ok != c.want || seq != c.seq {
			t.Errorf("SeqOf(%x…) = %d %v, want %d %v", c.id[:2], seq, ok, c.seq, c.want)
		}
	}
	if got, ok, _ := h.RecordHash(2); !ok || got != testHash(2) {
		t.Errorf("RecordHash(2) = %x %v", got[:2], ok)
	}
	if _, ok, _ := h.RecordHash(3); ok {
		t.Error("RecordHash(3) answered a record that is not stored")
	}

	// Applied, not yet durable: answered from memory, until the write is
	// reported done; then the overlay is empty.
	h.Append(3, testHash(3), testHash(103))
	h.Append(4, testHash(4), testHash(104))
	if seq, ok, _ := h.SeqOf(testHash(104)); !ok || seq != 4 {
		t.Fatalf("pending envelope: %d %v", seq, ok)
	}
	if got, ok, _ := h.RecordHash(3); !ok || got != testHash(3) {
		t.Fatalf("pending record hash: %v", ok)
	}
	h.durable(3)
	if h.pending() != 1 {
		t.Fatalf("%d pending after the first write", h.pending())
	}
	if _, ok, _ := h.SeqOf(testHash(103)); ok {
		t.Fatal("a record reported durable but not stored is still answered")
	}
	h.durable(4)
	if h.pending() != 0 || len(h.ids) != 0 {
		t.Fatalf("overlay not empty: %d %d", h.pending(), len(h.ids))
	}
	// Out-of-order appends reset rather than answer by a wrong position.
	h.Append(10, testHash(10), testHash(110))
	h.Append(12, testHash(12), testHash(112))
	if _, ok, _ := h.RecordHash(10); ok || h.pending() != 1 {
		t.Fatalf("after a gap: pending %d", h.pending())
	}
}
