//go:build e2e

package mirror_test

import (
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/adpnode/adpnode/adp/identity"
	"github.com/adpnode/adpnode/adp/record"
	"github.com/adpnode/adpnode/federation"
	"github.com/adpnode/adpnode/internal/adptest"
	"github.com/adpnode/adpnode/internal/fedtest"
	"github.com/adpnode/adpnode/internal/testwait"
	"github.com/adpnode/adpnode/mirror"
)

// TestHistoryReadFaultIsNoEvidence: a mirror that cannot read its own
// store while it checks a host's record records no evidence against the
// host and does not mark it faulty; it stores nothing and fetches the
// record again by itself once reads work (a record judged invalid would
// be dropped until the host announced again). Property: a storage error is
// never a verdict on someone else's record.
func TestHistoryReadFaultIsNoEvidence(t *testing.T) {
	peers := fedtest.Network(t, 2, nil, fedtest.Options{Rates: noRates, Mirror: true})
	b := peers[0]
	if _, err := b.Mir.AddTarget(mirror.TargetAll, ""); err != nil {
		t.Fatal(err)
	}
	fake := newRawPeer(t, seedKey(t, "faulty disk host"), true)
	fake.connect(t, b)
	hostKey := fake.signer.HostKey()

	alice, bob := adptest.NewAgent("alice"), adptest.NewAgent("bob")
	now := b.Clock.Ms()
	hon := kernelRoom(t, "d8ftedhpqhsusbg00f01", now, alice, 0)
	hon.add(t, bob, "room.join", map[string]any{"role": "speaker"})
	for i := 0; i < 4; i++ {
		hon.add(t, []*adptest.Agent{alice, bob}[i%2], "message.create", msg(fmt.Sprintf("m %d", i)))
	}
	const first = 6 // create, join, four messages
	// The next record is a signal anchored to an old record: judging it
	// reads the mirror's store (the anchor, the exact-duplicate lookup).
	anchor := hon.recs[2]
	carol := adptest.NewAgent("carol")
	env, err := identity.OpenEnvelope(carol.Envelope(hon.now, "room.join", hon.id, anchor.Seq, anchor.Hash,
		map[string]any{"role": "observer"}))
	if err != nil {
		t.Fatal(err)
	}
	adm, err := hon.st.Admit(env, hon.now, nil)
	if err != nil {
		t.Fatal(err)
	}
	next := record.New(hon.id, hon.st.Seq+1, hon.st.LastHash, env, hon.now)
	hon.st.Commit(adm, next)
	hon.recs = append(hon.recs, next)
	var served atomic.Int64 // records the host serves to backfill
	served.Store(first)
	fake.serveBackfill(func(req rawBackfillRequest) federation.BackfillBatch {
		var out federation.BackfillBatch
		if req.RoomID != hon.id {
			out.Error = "room_not_found"
			return out
		}
		n := served.Load()
		for _, r := range hon.recs[min(req.AfterSeq, n):min(req.AfterSeq+int64(req.Limit), n)] {
			out.Records = append(out.Records, recJSON(r))
		}
		if len(out.Records) > 0 {
			out.Checkpoints = []json.RawMessage{fake.checkpoint(t, hon.recs[req.AfterSeq+int64(len(out.Records))-1], now)}
		}
		return out
	})

	fake.awaitSubscriber(t, federation.IndexTopic, b)
	last := time.Time{}
	testwait.Until(t, 20*time.Second, "B mirrors the room", func() bool {
		if time.Since(last) > 300*time.Millisecond {
			fake.announce(t, hon.id, 0, alice.ID, now)
			last = time.Now()
		}
		_, ok := b.Mir.Room(hon.id, hostKey)
		return ok
	})
	fake.awaitSubscriber(t, federation.RecordTopic(fake.id), b)
	for _, rec := range hon.recs[:first] {
		fake.publishRecord(t, rec, now)
	}
	br, _ := b.Mir.Room(hon.id, hostKey)
	testwait.Until(t, 20*time.Second, "B verified the chain", func() bool {
		if time.Since(last) > 300*time.Millisecond {
			fake.announce(t, hon.id, first, alice.ID, now)
			last = time.Now()
		}
		return br.Tip() == first
	})

	// The disk fails; the host streams its next record.
	br.FailHistoryReadsForTest(true)
	last = time.Time{}
	testwait.Until(t, 20*time.Second, "B checked the record against its store", func() bool {
		if time.Since(last) > 300*time.Millisecond { // gossip may lose one message
			fake.publishRecord(t, next, now)
			last = time.Now()
		}
		return br.HistoryReadsFailedForTest() > 0
	})
	// Info waits for the room lock, which the failed check held.
	if info := br.Info(); info.Faulty || br.Tip() != first || len(b.Mir.EvidenceList()) != 0 {
		t.Fatalf("a failed read judged the host: faulty %v, tip %d, %d evidence", info.Faulty, br.Tip(), len(b.Mir.EvidenceList()))
	}

	// Reads work again: the mirror fetches the record again by itself (the
	// host announces nothing more) and verifies it.
	served.Store(int64(len(hon.recs)))
	br.FailHistoryReadsForTest(false)
	testwait.Until(t, 30*time.Second, "B verified the record after the fault", func() bool {
		return br.Tip() == next.Seq
	})
	if info := br.Info(); info.Faulty || len(b.Mir.EvidenceList()) != 0 {
		t.Fatalf("after the fault: faulty %v, %d evidence", info.Faulty, len(b.Mir.EvidenceList()))
	}
}
