package node

import (
	"bytes"
	"crypto/ed25519"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/adpnode/adpnode/adp"
	"github.com/adpnode/adpnode/adp/identity"
	"github.com/adpnode/adpnode/adp/record"
	"github.com/adpnode/adpnode/adp/room"
	"github.com/adpnode/adpnode/hostport"
	"github.com/adpnode/adpnode/internal/testwait"
)

// buildRooms writes rooms public rooms into a new data dir, each created at
// t0 for an hour, with members agents joined (from a pool, so agents are in
// many rooms) and a few messages, stored the way the write path stores
// them. It returns the states of the first keep rooms.
func buildRooms(t testing.TB, dir string, rooms, members, keep int, t0 int64) map[string]*room.State {
	t.Helper()
	db, err := badger.Open(BadgerOptions(dir).WithSyncWrites(false))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	const pool = 240
	keys := make([]ed25519.PrivateKey, pool)
	nonces := make([]int64, pool)
	for i := range keys {
		seed := make([]byte, 32)
		copy(seed, fmt.Sprintf("cold-agent-%d", i))
		keys[i], _ = identity.KeyFromSeed(seed)
	}
	agent := func(i int) identity.AgentID { return identity.AgentIDFromKey(keys[i].Public().(ed25519.PublicKey)) }
	kept := map[string]*room.State{}
	wb := db.NewWriteBatch()
	defer wb.Cancel()
	for r := 0; r < rooms; r++ {
		id := fmt.Sprintf("c%019x", r)
		st := room.New(room.Config{Limits: room.DefaultLimits(), History: room.NewMemHistory()})
		now := t0 + int64(r)
		post := func(k int, typ, payload string) {
			nonces[k]++
			ev := identity.Event{Protocol: adp.Protocol, Type: typ, Actor: agent(k), CreatedAt: now, Nonce: nonces[k], Payload: json.RawMessage(payload)}
			if typ != "room.create" {
				seq, hash := st.Head.Seq, st.Head.Hash
				ev.RoomID, ev.BaseSeq, ev.BaseHash = &id, &seq, &hash
			}
			env, err := identity.Sign(keys[k], ev)
			if err != nil {
				t.Fatal(err)
			}
			a, err := st.Admit(env, now, nil)
			if err != nil {
				t.Fatalf("room %d %s: %v", r, typ, err)
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
					t.Fatal(err)
				}
			}
		}
		creator := (r * 7) % pool
		post(creator, "room.create", fmt.Sprintf(`{"agenda":"Agenda of room %d","end_time":%d,"start_time":%d,"tags":["cold","t%d"],"topic":"Cold room %d","types":[{"use":"adp:reactions/1.0"}],"visibility":"public"}`,
			r, t0+3_600_000, t0, r%10, r))
		for m := 0; m < members; m++ {
			post((creator+1+m*13)%pool, "room.join", fmt.Sprintf(`{"perspective":"member %d of room %d","role":"speaker"}`, m, r))
		}
		for i := 0; i < 3; i++ {
			post((creator+1+i*13)%pool, "message.create", fmt.Sprintf(`{"content":"message %d","content_type":"text/plain"}`, i))
		}
		if err := wb.Set(roomKey(id), nil); err != nil {
			t.Fatal(err)
		}
		if err := wb.Set(snapshotKey(id), st.Encode()); err != nil {
			t.Fatal(err)
		}
		if len(kept) < keep {
			kept[id] = st
		}
	}
	for k := range keys {
		if err := wb.Set(nonceKey(agent(k)), nonceValue(nonces[k], t0)); err != nil {
			t.Fatal(err)
		}
	}
	if err := wb.Set([]byte(keyLayout), binary.BigEndian.AppendUint64(nil, layoutVersion)); err != nil {
		t.Fatal(err)
	}
	if err := wb.Flush(); err != nil {
		t.Fatal(err)
	}
	return kept
}

func heapNow() uint64 {
	var ms runtime.MemStats
	for range 3 {
		runtime.GC()
	}
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

func openAt(t testing.TB, dir string, clock *atomic.Int64) *Node {
	t.Helper()
	n, err := Open(Config{PublicURL: "http://127.0.0.1:1", DataDir: dir, Now: func() time.Time { return time.UnixMilli(clock.Load()) }})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func waitAllCold(t testing.TB, n *Node, want int) {
	t.Helper()
	testwait.Until(t, 60*time.Second, fmt.Sprintf("all %d rooms cold", want), func() bool {
		cold, _ := n.ColdRooms()
		return cold == want
	})
}

// roomsHeap is the heap the node holds for its rooms: the heap after GC
// minus the heap once the room table and the scheduler's per-room entries
// are dropped. Badger's memtables and caches (tens of MiB, bounded and not
// per room) stay as they were, so they do not blur the figure. The node is
// unusable afterwards: close it.
func roomsHeap(n *Node) uint64 {
	before := heapNow()
	n.mu.Lock()
	n.rooms = map[string]*hostedRoom{}
	n.mu.Unlock()
	n.sched.mu.Lock()
	n.sched.known, n.sched.at, n.sched.q = map[string]room.Status{}, map[string]int64{}, nil
	n.sched.mu.Unlock()
	after := heapNow()
	if after > before {
		return 0
	}
	return before - after
}

// TestEndedRoomsCostNoRAM: 2000 ended rooms (400 under -race) of a dozen members
// each hold under 2 KiB of heap apiece once cold (their full states hold
// several times that), answer as their states do, stay cold across a
// restart that decodes none of them, and a crowd of readers of random cold
// rooms keeps the heap and the cache bounded.
func TestEndedRoomsCostNoRAM(t *testing.T) {
	const members = 12
	rooms := 2000
	if raceEnabled {
		rooms = 400 // the per-room bound is the same; signing 2000 rooms under -race takes minutes
	}
	if s := os.Getenv("ADPNODE_COLD_ROOMS"); s != "" {
		rooms, _ = strconv.Atoi(s)
	}
	if testing.Short() {
		t.Skip("builds 2000 rooms")
	}
	dir := t.TempDir()
	t0 := time.Now().Add(-24 * time.Hour).UnixMilli()
	began := time.Now()
	kept := buildRooms(t, dir, rooms, members, 16, t0)
	t.Logf("built %d rooms in %v", rooms, time.Since(began).Round(time.Millisecond))
	var clock atomic.Int64
	per := func(b uint64) float64 { return float64(b) / float64(rooms) }

	// Live rooms: every state in memory.
	clock.Store(t0 + 600_000)
	n := openAt(t, dir, &clock)
	if st := n.RecoveryStats(); st.Rooms != rooms || st.Cold != 0 {
		t.Fatalf("recovery: %+v", st)
	}
	perHot := per(roomsHeap(n))
	n.Close()

	// Ended: the scheduler finishes every room and drops its state.
	clock.Store(t0 + 2*3_600_000)
	began = time.Now()
	n = openAt(t, dir, &clock)
	waitAllCold(t, n, rooms)
	t.Logf("%d rooms ended and went cold in %v", rooms, time.Since(began).Round(time.Millisecond))
	checkKept(t, n, kept, members+1)
	for id := range kept {
		n.cold.drop(id)
	}
	perCold := per(roomsHeap(n))
	n.Close()
	t.Logf("heap per room: %.0f B live (full state), %.0f B ended (cold)", perHot, perCold)
	if perCold > 2048 {
		t.Errorf("an ended room holds %.0f B of heap, want under 2 KiB", perCold)
	}
	if perHot < 2*2048 {
		t.Errorf("a live room holds only %.0f B: the bound above would not catch a full state", perHot)
	}

	// Restart: every room recovers cold, none decoded.
	n = openAt(t, dir, &clock)
	if st := n.RecoveryStats(); st.Rooms != rooms || st.Cold != rooms || st.Broken != 0 || st.Replayed != 0 {
		t.Fatalf("restart: %+v", st)
	}
	if c, cached := n.ColdRooms(); c != rooms || cached != 0 {
		t.Fatalf("restart: %d cold, %d decoded", c, cached)
	}
	checkKept(t, n, kept, members+1)

	// Hostile: readers of random cold rooms thrash the cache.
	ids := make([]string, 0, rooms)
	for _, hr := range n.roomList() {
		ids = append(ids, hr.id)
	}
	// The first round also fills Badger's block and index caches, which
	// their own configuration bounds; the second round, drawing other
	// rooms, must cost next to nothing more: the decoded-state cache is the
	// only thing the reads could grow, and it holds coldCacheRooms.
	goroutines := runtime.NumGoroutine()
	thrash := func(seed uint64) {
		var wg sync.WaitGroup
		var maxCached atomic.Int64
		var fails atomic.Int64
		for w := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(uint64(w), seed))
				for range 150 {
					id := ids[rng.IntN(len(ids))]
					res, err := n.Room(id, "")
					ms, err2 := n.Members(id, "")
					if err != nil || err2 != nil || res.ID != id || res.Status != room.StatusEnded || len(ms) != members+1 {
						if fails.Add(1) == 1 {
							t.Logf("cold read of %s: %v %v %d members", id, err, err2, len(ms))
						}
					}
					if c := n.cold.len(); int64(c) > maxCached.Load() {
						maxCached.Store(int64(c))
					}
				}
			}()
		}
		wg.Wait()
		if fails.Load() != 0 {
			t.Errorf("%d cold reads failed", fails.Load())
		}
		if maxCached.Load() > coldCacheRooms {
			t.Errorf("%d states cached, bound %d", maxCached.Load(), coldCacheRooms)
		}
	}
	quiet := heapNow()
	thrash(1)
	warm := heapNow()
	thrash(2)
	thrashed := heapNow()
	first, second := int64(warm)-int64(quiet), int64(thrashed)-int64(warm)
	t.Logf("random cold reads by 8 readers, 1200 a round: %d decoded states cached; heap %+d KiB in round 1 (Badger's caches warming), %+d KiB in round 2",
		n.cold.len(), first>>10, second>>10)
	if limit := int64(badgerBlockCacheSize + badgerIndexCacheSize + 4<<20); first > limit {
		t.Errorf("heap grew %d KiB in the first round, more than Badger's caches and slack (%d KiB)", first>>10, limit>>10)
	}
	if second > 1<<20 {
		t.Errorf("heap grew %d KiB in the second round of cache thrash (at most %d states cached)", second>>10, coldCacheRooms)
	}
	if g := runtime.NumGoroutine(); g > goroutines {
		t.Errorf("%d goroutines after the readers, %d before", g, goroutines)
	}
	for id := range kept {
		n.cold.drop(id)
	}
	for _, id := range ids {
		n.cold.drop(id)
	}
	perRestart := per(roomsHeap(n))
	n.Close()
	t.Logf("heap per ended room after a restart: %.0f B", perRestart)
	if perRestart > 2048 {
		t.Errorf("after a restart an ended room holds %.0f B", perRestart)
	}
}

// checkKept compares cold reads with the states that built the rooms.
func checkKept(t *testing.T, n *Node, kept map[string]*room.State, members int) {
	t.Helper()
	for id, st := range kept {
		res, err := n.Room(id, "")
		if err != nil {
			t.Fatalf("room %s: %v", id, err)
		}
		got, _ := json.Marshal(res)
		want, _ := json.Marshal(st.Resource(n.NowMs(), n.RoomURL(id)))
		if !bytes.Equal(got, want) {
			t.Errorf("room %s:\n%s\nwant %s", id, got, want)
		}
		ms, err := n.Members(id, "")
		if err != nil {
			t.Fatal(err)
		}
		var wantMs []hostport.MemberView
		for _, m := range st.Members() {
			wantMs = append(wantMs, hostport.MemberView{AgentID: m.Agent, Role: m.Role, Perspective: m.Perspective, JoinedSeq: m.JoinedSeq, Creator: m.Agent == st.Creator})
		}
		if g, w := mustJSON(ms), mustJSON(wantMs); g != w {
			t.Errorf("members of %s:\n%s\nwant %s", id, g, w)
		}
		if len(ms) != members {
			t.Errorf("room %s: %d members, want %d", id, len(ms), members)
		}
		if h, ok, err := n.RecordHash(id, st.Seq-1); !ok || err != nil || h != mustHash(st, st.Seq-1) {
			t.Errorf("record hash of %s: %s %v %v", id, h, ok, err)
		}
	}
}

func mustJSON(v any) string { b, _ := json.Marshal(v); return string(b) }

func mustHash(st *room.State, seq int64) string { h, _, _ := st.RecordHash(seq); return h }
