package node

import (
	"crypto/ed25519"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/adpnode/adpnode/adp"
	"github.com/adpnode/adpnode/adp/identity"
	"github.com/adpnode/adpnode/adp/record"
	"github.com/adpnode/adpnode/adp/room"
)

// BulkLoad writes rooms × perRoom records into a new data dir the way the
// write path stores them — signed envelopes admitted by the kernel, the
// record, both index entries, the nonce, then a state snapshot per room —
// without the per-write verification and synced commits that make the real
// path take a quarter of an hour for ten million records. It exists for
// the restart benchmark (cmd/adprestart): the node that then starts on the
// dir cannot tell the difference. Each room has its own creator, who posts
// every message. progress is called with the number of records written.
func BulkLoad(dir string, rooms, perRoom int, progress func(int64)) error {
	// The node's own table format (block size, compression), without
	// synced writes and with larger memtables, so the dir is what the
	// write path would have left.
	db, err := badger.Open(BadgerOptions(dir).WithSyncWrites(false).WithMemTableSize(64 << 20))
	if err != nil {
		return err
	}
	start := time.Now().UnixMilli()
	var written atomic.Int64
	var wg sync.WaitGroup
	errs := make([]error, runtime.GOMAXPROCS(0))
	for w := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			wb := db.NewWriteBatch()
			defer wb.Cancel()
			for r := w; r < rooms && errs[w] == nil; r += len(errs) {
				errs[w] = bulkRoom(wb, r, perRoom, start, &written, progress)
			}
			if errs[w] == nil {
				errs[w] = wb.Flush()
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			db.Close()
			return err
		}
	}
	if err := db.Update(func(txn *badger.Txn) error {
		return txn.Set([]byte(keyLayout), binary.BigEndian.AppendUint64(nil, layoutVersion))
	}); err != nil {
		return err
	}
	return db.Close()
}

func bulkRoom(wb *badger.WriteBatch, r, perRoom int, start int64, written *atomic.Int64, progress func(int64)) error {
	lim := room.DefaultLimits()
	seed := make([]byte, 32)
	binary.BigEndian.PutUint64(seed, uint64(r)+1)
	copy(seed[8:], "adp-bulkload")
	key, _ := identity.KeyFromSeed(seed)
	actor := identity.AgentIDFromKey(key.Public().(ed25519.PublicKey))
	id := fmt.Sprintf("%08x", r)
	id = "b" + id + "0000000000a"[:20-1-len(id)] // a valid room ID, 20 base32hex characters
	st := room.New(room.Config{Limits: lim})
	now := start + int64(r)
	var nonce int64
	for i := 0; i < perRoom; i++ {
		typ, payload := "message.create", fmt.Sprintf(`{"content":"bulk-loaded message %d of room %d, long enough to look like a sentence someone wrote","content_type":"text/plain"}`, i, r)
		if i == 0 {
			typ = "room.create"
			payload = fmt.Sprintf(`{"end_time":%d,"start_time":%d,"tags":["bench"],"topic":"bulk-loaded room %d","types":[{"use":"adp:reactions/1.0"}],"visibility":"public"}`,
				start+6*24*3600*1000, start, r)
		}
		nonce++
		ev := identity.Event{Protocol: adp.Protocol, Type: typ, Actor: actor, CreatedAt: now, Nonce: nonce, Payload: json.RawMessage(payload)}
		if i > 0 {
			seq, hash := st.Head.Seq, st.Head.Hash
			ev.RoomID, ev.BaseSeq, ev.BaseHash = &id, &seq, &hash
		}
		env, err := identity.Sign(key, ev)
		if err != nil {
			return err
		}
		a, err := st.Admit(env, now, nil)
		if err != nil {
			return fmt.Errorf("room %d record %d: %w", r, i+1, err)
		}
		rec := record.New(id, st.Seq+1, st.LastHash, env, now)
		st.Commit(a, rec)
		raw, _ := rec.MarshalJSON()
		for _, e := range []kv{
			{K: recordKey(id, rec.Seq), V: raw},
			{K: envelopeKey(env.Digest), V: envelopeValue(id, rec.Seq)},
			{K: envelopeKey(recordDigest(rec)), V: envelopeValue(id, rec.Seq)},
		} {
			if err := wb.Set(e.K, e.V); err != nil {
				return err
			}
		}
		if n := written.Add(1); progress != nil && n%100_000 == 0 {
			progress(n)
		}
	}
	if err := wb.Set(nonceKey(actor), nonceValue(nonce, now)); err != nil {
		return err
	}
	if err := wb.Set(roomKey(id), nil); err != nil {
		return err
	}
	if err := wb.Set(snapshotKey(id), st.Encode()); err != nil {
		return err
	}
	return nil
}
