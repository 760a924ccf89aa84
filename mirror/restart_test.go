//go:build e2e

package mirror_test

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/adpnode/adpnode/adp/identity"
	"github.com/adpnode/adpnode/adp/room"
	"github.com/adpnode/adpnode/hostport"
	"github.com/adpnode/adpnode/internal/adptest"
	"github.com/adpnode/adpnode/internal/fedtest"
	"github.com/adpnode/adpnode/internal/testwait"
	"github.com/adpnode/adpnode/mirror"
	"github.com/adpnode/adpnode/node"
)

var restartOpts = fedtest.Options{Rates: noRates, Mirror: true}

// withDB opens a stopped peer's database, runs fn on it and closes it.
func withDB(t *testing.T, p *fedtest.Peer, fn func(db *badger.DB)) {
	t.Helper()
	db, err := badger.Open(node.BadgerOptions(filepath.Join(p.Dir, "db")))
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
	}()
	fn(db)
}

func getKey(t *testing.T, db *badger.DB, k []byte) []byte {
	t.Helper()
	var v []byte
	if err := db.View(func(txn *badger.Txn) error {
		item, err := txn.Get(k)
		if err != nil {
			return err
		}
		v, err = item.ValueCopy(nil)
		return err
	}); err != nil {
		t.Fatalf("read %q: %v", k, err)
	}
	return v
}

func setKey(t *testing.T, db *badger.DB, k, v []byte) {
	t.Helper()
	if err := db.Update(func(txn *badger.Txn) error { return txn.Set(k, v) }); err != nil {
		t.Fatal(err)
	}
}

func countKeys(t *testing.T, db *badger.DB, prefix string) int {
	t.Helper()
	n := 0
	db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte(prefix)})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			n++
		}
		return nil
	})
	return n
}

// restartWith restarts p (after between, run on its stopped database),
// connects it to host and returns the mirror's recovery stats.
func restartWith(t *testing.T, p, host *fedtest.Peer, between func(db *badger.DB)) (*fedtest.Peer, mirror.RecoveryStats) {
	t.Helper()
	p.Stop()
	if between != nil {
		withDB(t, p, between)
	}
	p = fedtest.Start(t, p.Name, p.Dir, p.Clock, p.Port, restartOpts)
	fedtest.Connect(t, p, host)
	return p, p.Mir.RecoveryStats()
}

// sameState asserts the mirrored room answers what the host does: every
// record, the tip and its hash.
func sameState(t *testing.T, host, mp *fedtest.Peer, roomID string) {
	t.Helper()
	n := sameChain(t, host, mp, roomID)
	if got := len(mirrorRecords(t, mp, roomID)); got != n {
		t.Fatalf("%s holds %d records of %s, the host %d", mp.Name, got, roomID, n)
	}
	recs := hostRecords(t, host, roomID)
	last := string(getField(t, recs[len(recs)-1], "hash"))
	r, _ := mp.Mir.Room(roomID, "")
	if info := r.Info(); info.VerifiedSeq != int64(len(recs)) || info.VerifiedHash != last {
		t.Fatalf("%s verified %d %s, the host is at %d %s", mp.Name, info.VerifiedSeq, info.VerifiedHash, len(recs), last)
	}
}

func tipIs(mp *fedtest.Peer, roomID string, seq int64) func() bool {
	return func() bool {
		r, ok := mp.Mir.Room(roomID, "")
		return ok && r.Tip() == seq
	}
}

func envHash(t *testing.T, res *hostport.Result) string {
	var env struct {
		Hash string `json:"hash"`
	}
	if err := json.Unmarshal(res.Record.Envelope, &env); err != nil {
		t.Fatal(err)
	}
	return env.Hash
}

// mirrorView is what a mirror answers about a room, to compare across a
// restart.
type mirrorView struct {
	records  [][]byte
	info     mirror.Info
	resource []byte
	archive  []byte
	evidence int
}

func viewOf(t *testing.T, mp *fedtest.Peer, roomID string, now int64) mirrorView {
	t.Helper()
	r, ok := mp.Mir.Room(roomID, "")
	if !ok {
		t.Fatalf("%s does not mirror %s", mp.Name, roomID)
	}
	v := mirrorView{records: mirrorRecords(t, mp, roomID), info: r.Info(), evidence: len(mp.Mir.EvidenceList())}
	v.info.KnownSeq, v.info.Pending = 0, 0
	v.resource, _ = json.Marshal(r.Resource(now))
	if arc, err := r.Archive(now); err == nil {
		arc.Manifest.Extra = nil // witnesses come and go with cosignatures
		v.archive, _ = json.Marshal(arc)
	}
	return v
}

func sameView(t *testing.T, what string, a, b mirrorView) {
	t.Helper()
	if len(a.records) != len(b.records) {
		t.Fatalf("%s: %d records, then %d", what, len(a.records), len(b.records))
	}
	for i := range a.records {
		if !bytes.Equal(a.records[i], b.records[i]) {
			t.Fatalf("%s: record %d differs", what, i+1)
		}
	}
	ai, _ := json.Marshal(a.info)
	bi, _ := json.Marshal(b.info)
	if !bytes.Equal(ai, bi) {
		t.Fatalf("%s: info %+v, then %+v", what, a.info, b.info)
	}
	if !bytes.Equal(a.resource, b.resource) {
		t.Fatalf("%s: resource\n%s\nthen\n%s", what, a.resource, b.resource)
	}
	if !bytes.Equal(a.archive, b.archive) {
		t.Fatalf("%s: archive differs", what)
	}
	if a.evidence != b.evidence {
		t.Fatalf("%s: %d pieces of evidence, then %d", what, a.evidence, b.evidence)
	}
}

// A mirror restarted on its data dir restores its rooms from their
// snapshots and replays nothing; it answers exactly what it did (records,
// status, resource, archive, evidence), and live ingest goes on with no gap
// or duplicate, references to and anchors on records from before the
// restart answered by the stored history. Records stored past a snapshot
// (here: an older snapshot put back) are replayed, and only those.
func TestMirrorRestartFromSnapshot(t *testing.T) {
	peers := fedtest.Network(t, 2, nil, restartOpts)
	a, b := peers[0], peers[1]
	alice := adptest.NewAgent("alice")
	if _, err := b.Mir.AddTarget(mirror.TargetAll, ""); err != nil {
		t.Fatal(err)
	}
	now := a.Clock.Ms()
	live := fedtest.MustSubmit(t, a, alice, "room.create", "", map[string]any{"topic": "live", "visibility": room.Public,
		"start_time": now, "end_time": now + 3_600_000, "tags": []string{}, "types": []map[string]any{{"use": "adp:reactions/1.0"}}}).Record.RoomID
	ended := fedtest.CreateRoom(t, a, alice, room.Public, "ended")
	var early []*hostport.Result
	for i := 0; i < 40; i++ {
		early = append(early, fedtest.MustSubmit(t, a, alice, "message.create", live, msg("before")))
	}
	first := fedtest.MustSubmit(t, a, alice, "message.create", ended, msg("first"))
	fedtest.MustSubmit(t, a, alice, "message.create", ended, map[string]any{"content_type": "text/plain", "content": "re",
		"references": []string{first.Record.Hash, envHash(t, first)}})
	fedtest.MustSubmit(t, a, alice, "room.close", ended, map[string]any{"reason": "done"})
	testwait.Until(t, 20*time.Second, "B verified both rooms", func() bool { return tipIs(b, live, 41)() && tipIs(b, ended, 4)() })
	now = a.Clock.Ms()
	before := map[string]mirrorView{live: viewOf(t, b, live, now), ended: viewOf(t, b, ended, now)}
	if before[ended].archive == nil {
		t.Fatal("the ended room has no archive")
	}

	b, st := restartWith(t, b, a, nil)
	if st.Rooms != 2 || st.FromSnapshot != 2 || st.Replayed != 0 {
		t.Fatalf("restart: %+v, want both rooms from snapshots and nothing replayed", st)
	}
	for id, v := range before {
		sameView(t, "after the restart", v, viewOf(t, b, id, now))
	}

	// Live ingest continues; the kernel's history questions about old
	// records are answered from the store.
	fedtest.MustSubmit(t, a, alice, "message.create", live, map[string]any{"content_type": "text/plain", "content": "re",
		"references": []string{early[3].Record.Hash, envHash(t, early[5])}})
	fedtest.MustSubmit(t, a, alice, "reaction.create", live, map[string]any{"event_id": envHash(t, early[2]), "reaction": "agree"})
	for i := 0; i < 18; i++ {
		fedtest.MustSubmit(t, a, alice, "message.create", live, msg("after"))
	}
	testwait.Until(t, 20*time.Second, "B verified the records after the restart", tipIs(b, live, 61))
	sameState(t, a, b, live)
	if n := b.Mir.Stats().Refused.Load(); n != 0 {
		t.Fatalf("B refused %d records after the restart", n)
	}

	// An older (but true) snapshot: only the records after it replay.
	var old []byte
	b.Stop()
	withDB(t, b, func(db *badger.DB) { old = getKey(t, db, mirror.SnapshotKeyForTest(a.Fed.HostKey(), live)) })
	b = fedtest.Start(t, b.Name, b.Dir, b.Clock, b.Port, restartOpts)
	fedtest.Connect(t, b, a)
	for i := 0; i < 10; i++ {
		fedtest.MustSubmit(t, a, alice, "message.create", live, msg("later"))
	}
	testwait.Until(t, 20*time.Second, "B verified 71 records", tipIs(b, live, 71))
	b, st = restartWith(t, b, a, func(db *badger.DB) { setKey(t, db, mirror.SnapshotKeyForTest(a.Fed.HostKey(), live), old) })
	if st.FromSnapshot != 2 || st.Replayed != 10 {
		t.Fatalf("restart from an older snapshot: %+v, want the 10 records after it replayed", st)
	}
	sameState(t, a, b, live)
	sameView(t, "ended room after the restarts", before[ended], viewOf(t, b, ended, now))
}

// Snapshots that cannot be trusted are discarded with a whole replay of
// that room, never a wrong state or a failed start: garbage bytes, the
// snapshot of another room, one that names a record the mirror no longer
// stores (a suffix lost in a crash, backfilled again afterwards).
func TestMirrorSnapshotHostile(t *testing.T) {
	peers := fedtest.Network(t, 2, nil, restartOpts)
	a, b := peers[0], peers[1]
	alice := adptest.NewAgent("alice")
	if _, err := b.Mir.AddTarget(mirror.TargetAll, ""); err != nil {
		t.Fatal(err)
	}
	x := fedtest.CreateRoom(t, a, alice, room.Public, "x")
	y := fedtest.CreateRoom(t, a, alice, room.Public, "y")
	for i := 0; i < 10; i++ {
		fedtest.MustSubmit(t, a, alice, "message.create", x, msg("x"))
	}
	for i := 0; i < 30; i++ {
		fedtest.MustSubmit(t, a, alice, "message.create", y, msg("y"))
	}
	testwait.Until(t, 20*time.Second, "B verified both rooms", func() bool { return tipIs(b, x, 11)() && tipIs(b, y, 31)() })
	host := a.Fed.HostKey()
	kx, ky := mirror.SnapshotKeyForTest(host, x), mirror.SnapshotKeyForTest(host, y)

	b, st := restartWith(t, b, a, func(db *badger.DB) { setKey(t, db, kx, []byte("\x00not a snapshot{")) })
	if st.Rooms != 2 || st.FromSnapshot != 1 || st.Replayed != 11 {
		t.Fatalf("garbage snapshot: %+v, want room x replayed whole (11 records)", st)
	}
	sameState(t, a, b, x)
	sameState(t, a, b, y)

	b, st = restartWith(t, b, a, func(db *badger.DB) { setKey(t, db, kx, getKey(t, db, ky)) })
	if st.FromSnapshot != 1 || st.Replayed != 11 {
		t.Fatalf("another room's snapshot: %+v, want room x replayed whole", st)
	}
	sameState(t, a, b, x)

	// A valid-looking snapshot of the room at a seq whose stored record
	// has another hash.
	b, st = restartWith(t, b, a, func(db *badger.DB) {
		var s struct {
			Bytes int64          `json:"bytes"`
			State map[string]any `json:"state"`
		}
		if err := json.Unmarshal(getKey(t, db, kx), &s); err != nil {
			t.Fatal(err)
		}
		s.State["last_hash"] = identity.EncodeB64(make([]byte, 32))
		raw, _ := json.Marshal(s)
		setKey(t, db, kx, raw)
	})
	if st.FromSnapshot != 1 || st.Replayed != 11 {
		t.Fatalf("snapshot with a wrong hash: %+v, want room x replayed whole", st)
	}
	sameState(t, a, b, x)

	// The snapshot is ahead of the stored chain: records 29..31 were lost.
	b, st = restartWith(t, b, a, func(db *badger.DB) {
		if err := db.Update(func(txn *badger.Txn) error {
			for s := int64(29); s <= 31; s++ {
				if err := txn.Delete(mirror.RecordKeyForTest(host, y, s)); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	})
	if st.FromSnapshot != 1 || st.Replayed != 28 {
		t.Fatalf("snapshot ahead of the chain: %+v, want room y replayed whole (28 records)", st)
	}
	testwait.Until(t, 20*time.Second, "B backfills the lost records", tipIs(b, y, 31))
	sameState(t, a, b, y)
	if n := b.Mir.Stats().Refused.Load(); n != 0 || len(b.Mir.EvidenceList()) != 0 {
		t.Fatalf("B refused %d records, holds %d evidence", n, len(b.Mir.EvidenceList()))
	}
}

// A data dir written before the hash index and snapshots (records and
// metadata only) starts: the one whole replay indexes every record, the
// next start restores from the snapshot, and references to old records
// are answered from the new index.
func TestMirrorUpgradeFromOldLayout(t *testing.T) {
	peers := fedtest.Network(t, 2, nil, restartOpts)
	a, b := peers[0], peers[1]
	alice := adptest.NewAgent("alice")
	id := fedtest.CreateRoom(t, a, alice, room.Public, "old layout")
	var recs [][]byte
	for i := 0; i < 30; i++ {
		fedtest.MustSubmit(t, a, alice, "message.create", id, msg("old"))
	}
	recs = hostRecords(t, a, id)
	host := a.Fed.HostKey()
	b, st := restartWith(t, b, a, func(db *badger.DB) {
		if err := mirror.WriteLegacyRoomForTest(db, host, a.Fed.PeerID().String(), id, a.Node.RoomURL(id), recs); err != nil {
			t.Fatal(err)
		}
	})
	if st.Rooms != 1 || st.FromSnapshot != 0 || st.Replayed != 31 {
		t.Fatalf("first start on the old layout: %+v, want one whole replay of 31 records", st)
	}
	sameState(t, a, b, id)
	b.Stop()
	withDB(t, b, func(db *badger.DB) {
		if n := countKeys(t, db, "m/x/"); n != 2*31 {
			t.Fatalf("%d hash index entries after the upgrade, want 62", n)
		}
	})
	b, st = restartWith(t, b, a, nil)
	if st.FromSnapshot != 1 || st.Replayed != 0 {
		t.Fatalf("second start: %+v, want the room from its snapshot", st)
	}
	// B follows the host again; a reference to an old record is admitted.
	if _, err := b.Mir.AddTarget(mirror.TargetRoom, a.Node.RoomURL(id)); err != nil {
		t.Fatal(err)
	}
	var env struct {
		Hash string `json:"hash"`
	}
	json.Unmarshal(getField(t, recs[4], "envelope"), &env)
	fedtest.MustSubmit(t, a, alice, "message.create", id, map[string]any{"content_type": "text/plain", "content": "re",
		"references": []string{string(getField(t, recs[2], "hash")), env.Hash}})
	testwait.Until(t, 20*time.Second, "B verifies the reply", tipIs(b, id, 32))
	sameState(t, a, b, id)
}

func getField(t *testing.T, raw []byte, field string) []byte {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	if field == "hash" {
		var s string
		json.Unmarshal(m[field], &s)
		return []byte(s)
	}
	return m[field]
}
