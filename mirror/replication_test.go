//go:build e2e

package mirror_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/adpnode/adpnode/adp"
	"github.com/adpnode/adpnode/adp/archive"
	"github.com/adpnode/adpnode/adp/record"
	"github.com/adpnode/adpnode/adp/room"
	"github.com/adpnode/adpnode/internal/adptest"
	"github.com/adpnode/adpnode/internal/fedtest"
	"github.com/adpnode/adpnode/internal/testwait"
	"github.com/adpnode/adpnode/mirror"
)

// quietLog keeps warnings and errors only.
var quietLog = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))

// Timeline of TestMirrorReplication (seconds after the writers start).
const (
	replWriteFor = 40 * time.Second // writers pace replRecords over this
	replStopB    = 3 * time.Second  // B is stopped…
	replCutC     = 5 * time.Second  // C is cut off from A and B…
	replStartB   = 7 * time.Second  // …B restarts and reconnects to A…
	replCutFor   = 30 * time.Second // …and C is reconnected after this
	replRooms    = 5                // public rooms on A
	replPerRoom  = 2                // writing agents per room
)

// replWriter is one agent writing message.create records into one room.
type replWriter struct {
	agent  *adptest.Agent
	roomID string
	quota  int
}

// writeLoad runs the writers, paced so that each spreads its quota evenly
// over `over`; it returns a function that waits for them and reports how
// many records were written. Head mismatches (two agents of one room
// racing for the head) are retried on the new head.
func writeLoad(t *testing.T, a *fedtest.Peer, ws []replWriter, over time.Duration, written *atomic.Int64) func() {
	var wg sync.WaitGroup
	var stop atomic.Bool
	errs := make(chan error, len(ws))
	start := time.Now()
	for _, w := range ws {
		wg.Add(1)
		go func() {
			defer wg.Done()
			step := over / time.Duration(w.quota)
			for k := 0; k < w.quota && !stop.Load(); k++ {
				time.Sleep(time.Until(start.Add(time.Duration(k) * step)))
				for !stop.Load() {
					_, err := fedtest.Submit(t, a, w.agent, "message.create", w.roomID, msg(fmt.Sprintf("%s #%d", w.agent.Name, k)))
					if err == nil {
						written.Add(1)
						break
					}
					if adp.CodeOf(err) != adp.CodeRoomHeadMismatch {
						errs <- fmt.Errorf("%s in %s: %w", w.agent.Name, w.roomID, err)
						return
					}
				}
			}
		}()
	}
	t.Cleanup(func() { stop.Store(true); wg.Wait() })
	return func() {
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		if t.Failed() {
			t.FailNow()
		}
	}
}

// heads returns A's seq of every room.
func heads(t testing.TB, a *fedtest.Peer, ids []string) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	for _, id := range ids {
		r, err := a.Node.Room(id, "")
		if err != nil {
			t.Fatal(err)
		}
		out[id] = r.Seq
	}
	return out
}

// tips returns a mirror's verified tip of every room (0 when not mirrored).
func tips(mp *fedtest.Peer, ids []string) map[string]int64 {
	out := map[string]int64{}
	for _, id := range ids {
		if r, ok := mp.Mir.Room(id, ""); ok {
			out[id] = r.Tip()
		}
	}
	return out
}

func sum(m map[string]int64) (n int64) {
	for _, v := range m {
		n += v
	}
	return n
}

// caughtUp reports whether the mirror verified every room up to want.
func caughtUp(mp *fedtest.Peer, want map[string]int64) bool {
	for id, seq := range want {
		r, ok := mp.Mir.Room(id, "")
		if !ok || r.Tip() < seq {
			return false
		}
	}
	return true
}

// mirrorRecords reads a mirrored room's whole verified chain.
func mirrorRecords(t *testing.T, mp *fedtest.Peer, roomID string) [][]byte {
	t.Helper()
	r, ok := mp.Mir.Room(roomID, "")
	if !ok {
		t.Fatalf("%s does not mirror %s", mp.Name, roomID)
	}
	var out [][]byte
	for after := int64(0); ; {
		page, more, err := r.Events(after, 1000)
		if err != nil {
			t.Fatal(err)
		}
		for _, raw := range page {
			out = append(out, raw)
		}
		after += int64(len(page))
		if !more {
			return out
		}
	}
}

// hostRecords reads a hosted room's whole chain.
func hostRecords(t *testing.T, host *fedtest.Peer, roomID string) [][]byte {
	t.Helper()
	var out [][]byte
	for after := int64(0); ; {
		page, more, err := host.Node.Events(roomID, "", after, 1000)
		if err != nil {
			t.Fatal(err)
		}
		for _, raw := range page {
			out = append(out, raw)
		}
		after += int64(len(page))
		if !more {
			return out
		}
	}
}

// verifyChain checks a mirror's copy of a room the way an archive is
// checked (§19: shape, signatures, seq order, kernel replay, hash chain,
// events digest) against a manifest made from the host's own records, and
// that the copy is the host's byte for byte.
func verifyChain(t *testing.T, name string, host [][]byte, got [][]byte, roomURL string, now int64) {
	t.Helper()
	if len(got) != len(host) {
		t.Fatalf("%s holds %d records, the host %d", name, len(got), len(host))
	}
	recs := make([]*record.Record, len(host))
	for i, raw := range host {
		if string(got[i]) != string(raw) {
			t.Fatalf("%s differs from the host at seq %d", name, i+1)
		}
		rec, _, err := record.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		recs[i] = rec
	}
	u, _ := url.Parse(roomURL)
	m := archive.NewManifest(u.Host, roomURL, recs, now)
	rep, err := archive.VerifyRecords(&m, nil, got, archive.Options{})
	if err != nil {
		t.Fatalf("%s: mirrored chain does not verify: %v", name, err)
	}
	if rep.LastSeq != int64(len(host)) || rep.LastHash != recs[len(recs)-1].Hash {
		t.Fatalf("%s: verified to seq %d %s", name, rep.LastSeq, rep.LastHash)
	}
}

// TestMirrorReplication is the mirror acceptance test: agents write
// replRecords records into several public rooms of A while mirrors B and C
// (target "all") follow them, and
//
//	a. B is stopped mid-stream and restarted, and catches up;
//	b. C is cut off from every peer for 30 s while A keeps writing, then
//	   reconnected, and catches up;
//	c. D, started after the writes while A is down, learns the rooms from
//	   B's index and backfills them from B's mirror.
//
// Every mirror's chain must equal A's seq for seq and verify by replay.
func TestMirrorReplication(t *testing.T) {
	if testing.Short() {
		t.Skip("runs for about a minute")
	}
	began := time.Now()
	// C's cut is a partition: discovery dials the hosts it knows from
	// their announcements, so a disconnection alone would heal at once.
	part := fedtest.NewPartition()
	opts := fedtest.Options{Rates: noRates, Mirror: true, Log: quietLog, Configure: part.Configure}
	peers := fedtest.Network(t, 3, nil, opts)
	a, b, c := peers[0], peers[1], peers[2]
	for _, mp := range []*fedtest.Peer{b, c} {
		if _, err := mp.Mir.AddTarget(mirror.TargetAll, ""); err != nil {
			t.Fatal(err)
		}
	}

	// Public rooms, each with an owner and joined speakers writing.
	var ids []string
	var ws []replWriter
	owners := map[string]*adptest.Agent{}
	per := replRecords / (replRooms * replPerRoom)
	for i := 0; i < replRooms; i++ {
		owner := adptest.NewAgent(fmt.Sprintf("repl-owner-%d", i))
		id := fedtest.CreateRoom(t, a, owner, room.Public, fmt.Sprintf("replication %d", i))
		ids, owners[id] = append(ids, id), owner
		ws = append(ws, replWriter{owner, id, per})
		for j := 1; j < replPerRoom; j++ {
			ag := adptest.NewAgent(fmt.Sprintf("repl-speaker-%d-%d", i, j))
			fedtest.MustSubmit(t, a, ag, "room.join", id, map[string]any{"role": "speaker"})
			ws = append(ws, replWriter{ag, id, per})
		}
	}
	var written atomic.Int64
	start := time.Now()
	wait := writeLoad(t, a, ws, replWriteFor, &written)
	at := func(d time.Duration) { time.Sleep(time.Until(start.Add(d))) }

	// a. B is stopped mid-stream…
	at(replStopB)
	bTips := tips(b, ids)
	if sum(bTips) == 0 {
		t.Fatalf("B mirrored nothing in %v", replStopB)
	}
	bID := b.Fed.PeerID()
	b.Stop()
	t.Logf("B stopped at %d records written (B had verified %d)", written.Load(), sum(bTips))

	// b. …C is cut off from every peer; nothing may redial it.
	at(replCutC)
	part.Cut(c.Fed.PeerID())
	for _, id := range []peer.ID{a.Fed.PeerID(), bID} {
		if err := c.Fed.Disconnect(id); err != nil {
			t.Fatal(err)
		}
	}
	cutAt, cutWritten := time.Now(), written.Load()
	var redials atomic.Int64
	watchCtx, stopWatch := context.WithCancel(context.Background())
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		for watchCtx.Err() == nil {
			for _, p := range c.Fed.Peers() {
				if p.Connected {
					redials.Add(1)
				}
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	defer func() { stopWatch(); <-watched }()

	// …B restarts on its directory and reconnects to A only.
	at(replStartB)
	b = b.Restart(t)
	fedtest.Connect(t, b, a)
	t.Logf("B restarted at %d records written (B had verified %d)", written.Load(), sum(tips(b, ids)))

	// C's chains stand still while it is cut off.
	time.Sleep(time.Second)
	cTips := tips(c, ids)
	// The cut lasts replCutFor, and longer on a slow machine until C is
	// well behind (the writers pace themselves by time, so a loaded
	// machine writes fewer records in the same time).
	time.Sleep(time.Until(cutAt.Add(replCutFor)))
	for deadline := time.Now().Add(2 * time.Minute); written.Load()-cutWritten < int64(replRecords)/4 &&
		written.Load() < int64(replRecords) && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
	}
	stopWatch()
	<-watched
	if n := redials.Load(); n > 0 {
		t.Fatalf("C was connected again %d times during the cut", n)
	}
	if got := tips(c, ids); sum(got) != sum(cTips) {
		t.Fatalf("C verified records while cut off: %d → %d", sum(cTips), sum(got))
	}
	missed := written.Load() - cutWritten
	if missed < 100 {
		t.Fatalf("A accepted only %d records during the cut: C is not behind enough to test its catch-up", missed)
	}
	t.Logf("C reconnected after %v cut off, %d records behind", time.Since(cutAt).Round(time.Millisecond), missed)
	part.Heal()
	fedtest.Connect(t, c, a)
	fedtest.Connect(t, c, b)

	wait()
	final := heads(t, a, ids)
	if got := written.Load(); got < int64(replRecords) || sum(final) < int64(replRecords) {
		t.Fatalf("wrote %d records (%d in all chains); want %d", got, sum(final), replRecords)
	}
	t.Logf("writers done after %v: %d records in %d rooms", time.Since(start).Round(time.Millisecond), sum(final), len(ids))

	// One room ends, so that a mirror can serve its archive.
	closed := ids[0]
	fedtest.MustSubmit(t, a, owners[closed], "room.close", closed, map[string]any{})
	final = heads(t, a, ids)

	for _, mp := range []*fedtest.Peer{b, c} {
		d := testwait.Until(t, 60*time.Second, mp.Name+" caught up to A", func() bool { return caughtUp(mp, final) })
		t.Logf("%s caught up %v after the writers stopped", mp.Name, d.Round(time.Millisecond))
	}
	now := a.Clock.Ms()
	hostChains := map[string][][]byte{}
	for _, id := range ids {
		hostChains[id] = hostRecords(t, a, id)
		for _, mp := range []*fedtest.Peer{b, c} {
			if n := sameChain(t, a, mp, id); n != int(final[id]) {
				t.Fatalf("%s: compared %d records of %s, want %d", mp.Name, n, id, final[id])
			}
			verifyChain(t, mp.Name, hostChains[id], mirrorRecords(t, mp, id), a.Node.RoomURL(id), now)
		}
	}
	verifyArchive(t, b, closed, hostChains[closed], now)
	verifyArchive(t, c, closed, hostChains[closed], now)

	// c. A goes down right after a last burst that B verified but that B's
	// index may not know yet (A announces changes at most every 200 ms):
	// B's index then announces a seq that is a multiple of the backfill
	// batch, which D's catch-up reaches exactly at a batch boundary, and
	// D must fetch on to the records B holds beyond it. D starts late and
	// learns everything from B.
	burst := ids[1]
	owner := owners[burst]
	for seq := final[burst]; seq%1000 != 0; seq++ {
		fedtest.MustSubmit(t, a, owner, "message.create", burst, msg(fmt.Sprintf("top-up %d", seq)))
	}
	announced := heads(t, a, ids)[burst]
	testwait.Until(t, 10*time.Second, "B's index announces the topped-up room", func() bool {
		e, ok := b.Index.Room(burst, b.Clock.Ms())
		return ok && e.Room.Seq == announced
	})
	for i := 0; i < 20; i++ {
		fedtest.MustSubmit(t, a, owner, "message.create", burst, msg(fmt.Sprintf("last #%d", i)))
	}
	final = heads(t, a, ids)
	hostChains[burst] = hostRecords(t, a, burst)
	testwait.Until(t, 10*time.Second, "B verified the last burst", func() bool { return caughtUp(b, final) })
	aID, aAddr, aURLs, aKey := a.Fed.PeerID(), a.Fed.Addrs()[0], map[string]string{}, a.Fed.HostKey()
	for _, id := range ids {
		aURLs[id] = a.Node.RoomURL(id)
	}
	a.Stop()
	if e, ok := b.Index.Room(burst, b.Clock.Ms()); ok {
		t.Logf("A stopped; B's index announces seq %d of %d for the last room written", e.Room.Seq, final[burst])
	}
	d := fedtest.Start(t, "D", t.TempDir(), b.Clock, 0, opts)
	// A is down, so D cannot verify its binding and "all" would not take
	// its rooms: the operator names the host.
	if _, err := d.Mir.AddTarget(mirror.TargetHost, string(aKey)); err != nil {
		t.Fatal(err)
	}
	fedtest.Connect(t, d, b)
	took := testwait.Until(t, 60*time.Second, "D caught up from B", func() bool { return caughtUp(d, final) })
	t.Logf("D backfilled %d records from B in %v", d.Mir.Stats().Backfilled.Load(), took.Round(time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := d.Fed.Connect(ctx, aAddr); err == nil {
		t.Fatal("A answered while it was supposed to be down")
	}
	for _, p := range append(d.Fed.Peers(), b.Fed.Peers()...) {
		if p.PeerID == aID.String() && p.Connected {
			t.Fatalf("A is connected while it was supposed to be down")
		}
	}
	if got, want := d.Mir.Stats().Backfilled.Load(), sum(final); got != want {
		t.Fatalf("D backfilled %d records; want all %d", got, want)
	}
	for _, id := range ids {
		got := mirrorRecords(t, d, id)
		fromB := mirrorRecords(t, b, id)
		if len(got) != len(fromB) {
			t.Fatalf("D holds %d records of %s, B %d", len(got), id, len(fromB))
		}
		for i := range got {
			if string(got[i]) != string(fromB[i]) {
				t.Fatalf("D differs from B at seq %d of %s", i+1, id)
			}
		}
		verifyChain(t, "D", hostChains[id], got, aURLs[id], now)
	}
	verifyArchive(t, d, closed, hostChains[closed], now)
	t.Logf("total %v", time.Since(began).Round(time.Millisecond))
}

// verifyArchive checks the archive a mirror serves for an ended room.
func verifyArchive(t *testing.T, mp *fedtest.Peer, roomID string, host [][]byte, now int64) {
	t.Helper()
	r, _ := mp.Mir.Room(roomID, "")
	arc, err := r.Archive(now)
	if err != nil {
		t.Fatalf("%s: archive: %v", mp.Name, err)
	}
	// Round-trip through JSON, as a reader of the archive would get it.
	raw, _ := json.Marshal(arc)
	parsed, err := archive.ParseJSON(raw)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := archive.Verify(parsed, archive.Options{})
	if err != nil {
		t.Fatalf("%s: mirror archive does not verify: %v", mp.Name, err)
	}
	last, _, _ := record.Parse(host[len(host)-1])
	if rep.Records != int64(len(host)) || rep.LastHash != last.Hash || rep.Status != room.StatusEnded {
		t.Fatalf("%s: archive report %d records, %s, %s", mp.Name, rep.Records, rep.LastHash, rep.Status)
	}
}
