//go:build e2e

package federation_test

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"

	lp2pnet "github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/protocol"

	"github.com/adpnode/adpnode/adp/room"
	"github.com/adpnode/adpnode/federation"
	"github.com/adpnode/adpnode/internal/adptest"
	"github.com/adpnode/adpnode/internal/fedtest"
	"github.com/adpnode/adpnode/internal/negentropy"
	"github.com/adpnode/adpnode/internal/testwait"
)

func frame(b []byte) []byte {
	var l [4]byte
	binary.BigEndian.PutUint32(l[:], uint32(len(b)))
	return append(l[:], b...)
}

// A node that was away catches up by reconciliation with a peer that is
// not the rooms' host (gossip does not repeat old announcements, and
// nothing is re-announced periodically any more); after a restart on the
// same data dir it still lists them, and reconciling again finds nothing
// to exchange.
func TestReconcileCatchUp(t *testing.T) {
	peers := network(t, 3, [][2]int{{0, 1}})
	a, b, c := peers[0], peers[1], peers[2]
	alice := adptest.NewAgent("alice")
	var ids []string
	for i := range 6 {
		ids = append(ids, createRoom(t, a, alice, room.Public, fmt.Sprintf("while C was away %d", i)))
	}
	testwait.Until(t, 20*time.Second, "B lists A's rooms", func() bool {
		for _, id := range ids {
			if _, ok := listed(b, id); !ok {
				return false
			}
		}
		return true
	})
	for _, id := range ids {
		if _, ok := listed(c, id); ok {
			t.Fatal("C learned a room before it connected")
		}
	}
	connect(t, c, b) // C never talks to A
	testwait.Until(t, 20*time.Second, "C learns A's rooms from B", func() bool {
		for _, id := range ids {
			if _, ok := listed(c, id); !ok {
				return false
			}
		}
		return true
	})
	c = c.Restart(t)
	for _, id := range ids {
		if _, ok := listed(c, id); !ok {
			t.Fatalf("room %s lost across C's restart", id)
		}
	}
	connect(t, c, b)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// The on-connect session may still run: retry until ours runs.
	var res federation.ReconcileResult
	var err error
	testwait.Until(t, 20*time.Second, "a reconciliation session with B", func() bool {
		res, err = c.Fed.Reconcile(ctx, b.Fed.PeerID())
		return err == nil
	})
	if res.Need != 0 || res.Fetched != 0 || res.Rounds != 1 {
		t.Fatalf("in sync, yet: %+v", res)
	}
}

// A hostile peer speaking the reconcile protocol: oversize frames, unknown
// kinds, malformed negentropy, too many rounds and fetches are cut off
// with a reset; the node keeps serving and its goroutines return to where
// they were.
func TestReconcileHostileInitiator(t *testing.T) {
	peers := network(t, 1, nil)
	a := peers[0]
	createRoom(t, a, adptest.NewAgent("alice"), room.Public, "target")
	r := newRogue(t, "reconciler", a)
	before := runtime.NumGoroutine()
	open := func() lp2pnet.Stream {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s, err := r.h.NewStream(ctx, a.Fed.PeerID(), federation.ReconcileProtocol)
		if err != nil {
			t.Fatal(err)
		}
		s.SetDeadline(time.Now().Add(10 * time.Second))
		return s
	}
	// reset reports whether the node cut the stream off (no answer).
	reset := func(s lp2pnet.Stream) bool {
		defer s.Close()
		_, err := io.ReadAll(io.LimitReader(s, 1<<20))
		return err != nil
	}
	cases := map[string][]byte{
		"oversize frame": append([]byte{0x7f, 0xff, 0xff, 0xff}, make([]byte, 64)...),
		"unknown kind":   frame([]byte("x hello")),
		"bad negentropy": frame([]byte{'n', 0x61, 0x00, 0x00, 0x07}),
		"ragged fetch":   frame(append([]byte{'f'}, make([]byte, 33)...)),
		"fetch too big":  frame(append([]byte{'f'}, make([]byte, 257*32)...)),
	}
	for name, b := range cases {
		s := open()
		s.Write(b)
		if !reset(s) {
			t.Errorf("%s: not reset", name)
		}
	}
	// Rounds: valid messages past the per-session bound.
	s := open()
	br := bufio.NewReader(s)
	empty := negentropy.NewSession(negentropy.NewSet(nil), 0).Initiate()
	answered := 0
	for i := 0; i < 100; i++ {
		if _, err := s.Write(frame(append([]byte{'n'}, empty...))); err != nil {
			break
		}
		var l [4]byte
		if _, err := io.ReadFull(br, l[:]); err != nil {
			break
		}
		if _, err := io.CopyN(io.Discard, br, int64(binary.BigEndian.Uint32(l[:]))); err != nil {
			break
		}
		answered++
	}
	s.Close()
	if answered == 0 || answered >= 100 {
		t.Fatalf("answered %d rounds on one stream", answered)
	}
	// Fetches of unknown ids answer an empty list.
	s = open()
	s.Write(frame(append([]byte{'f'}, make([]byte, 32)...)))
	var l [4]byte
	if _, err := io.ReadFull(s, l[:]); err != nil {
		t.Fatal(err)
	}
	body := make([]byte, binary.BigEndian.Uint32(l[:]))
	io.ReadFull(s, body)
	var got []json.RawMessage
	if json.Unmarshal(body, &got) != nil || len(got) != 0 {
		t.Fatalf("fetch of an unknown id: %s", body)
	}
	s.Close()
	testwait.Until(t, 20*time.Second, "goroutines back to baseline", func() bool { return runtime.NumGoroutine() <= before+5 })
}

// A hostile responder claims ids the node lacks and answers the fetch
// with announcements it was not asked for (a forged claim on the node's
// own room): nothing is admitted.
func TestReconcileHostileResponder(t *testing.T) {
	peers := network(t, 1, nil)
	a := peers[0]
	target := createRoom(t, a, adptest.NewAgent("alice"), room.Public, "target")
	r := newRogue(t, "responder", a)
	r.serveDiscovery(t)
	now := a.Clock.Ms()
	forged := r.hijack(t, a, target, now, now, now+60_000)
	var fake []negentropy.Item
	for i := range 40 {
		var it negentropy.Item
		it.Timestamp = uint64(now)
		it.ID[0], it.ID[1] = byte(i), 0xee
		fake = append(fake, it)
	}
	sess := negentropy.NewSession(negentropy.NewSet(fake), 0)
	r.h.SetStreamHandler(federation.ReconcileProtocol, func(s lp2pnet.Stream) {
		defer s.Close()
		br := bufio.NewReader(s)
		for {
			var l [4]byte
			if _, err := io.ReadFull(br, l[:]); err != nil {
				return
			}
			b := make([]byte, binary.BigEndian.Uint32(l[:]))
			if _, err := io.ReadFull(br, b); err != nil {
				return
			}
			var out []byte
			if b[0] == 'n' {
				out, _ = sess.Respond(b[1:])
			} else {
				out, _ = json.Marshal([]json.RawMessage{forged, forged, json.RawMessage(`"junk"`)})
			}
			s.Write(frame(out))
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := a.Fed.Reconcile(ctx, r.id)
	if err != nil {
		t.Fatal(err)
	}
	if res.Need != 40 || res.Fetched != 0 || res.Learned != 0 {
		t.Fatalf("hostile responder: %+v", res)
	}
	if claims := a.Index.Claims(target, a.Clock.Ms()); len(claims) != 0 {
		t.Fatalf("forged claim admitted: %d", len(claims))
	}
}

// A restart on the same data dir and port does not re-announce unchanged
// rooms: peers keep the very entry they had (same nonce), and a change
// after the restart is announced as usual.
func TestRestartDoesNotReannounce(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	clock := adptest.NewClock()
	a := fedtest.Start(t, "A", t.TempDir(), clock, 0, fedtest.Options{P2PListen: []string{fmt.Sprintf("/ip4/127.0.0.1/tcp/%d", port)}})
	b := fedtest.Start(t, "B", t.TempDir(), clock, 0, fedtest.Options{})
	connect(t, b, a)
	alice := adptest.NewAgent("alice")
	id := createRoom(t, a, alice, room.Public, "quiet room")
	var nonce int64
	// By gossip, or (if the mesh had not formed when A announced) by a
	// reconciliation session.
	testwait.Until(t, 10*time.Second, "B holds A's entry", func() bool {
		e, ok := b.Index.Room(id, b.Clock.Ms())
		if ok {
			nonce = e.Nonce
			return true
		}
		rctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		b.Fed.Reconcile(rctx, a.Fed.PeerID())
		return false
	})
	// Settled: B holds the announcement A keeps as its latest.
	testwait.Until(t, 10*time.Second, "B holds A's latest announcement", func() bool {
		e, ok := b.Index.Room(id, b.Clock.Ms())
		if ok {
			nonce = e.Nonce
		}
		return ok && string(e.Raw) == string(a.Index.Own()[id])
	})
	a = a.Restart(t)
	connect(t, a, b)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// Item sets are rebuilt at most once a second: retry until the
	// sessions see the same directories.
	testwait.Until(t, 20*time.Second, "a session after the restart finds nothing to exchange", func() bool {
		res, err := b.Fed.Reconcile(ctx, a.Fed.PeerID())
		return err == nil && res.Need == 0 && res.Have == 0
	})
	if e, _ := b.Index.Room(id, b.Clock.Ms()); e == nil || e.Nonce != nonce {
		t.Fatal("A re-announced an unchanged room after restarting")
	}
	before := string(a.Index.Own()[id])
	// Signer nonces follow the clock; the test clock stood still across
	// the restart, so let it move on as a real one would.
	clock.Advance(time.Second)
	submit(t, a, alice, "room.update", id, map[string]any{"topic": "renamed after restart"})
	testwait.Until(t, 20*time.Second, "A announces the change", func() bool { return string(a.Index.Own()[id]) != before })
	// By gossip, or (if the restarted node's mesh was not formed yet)
	// by reconciliation.
	testwait.Until(t, 10*time.Second, "the change reaches B", func() bool {
		if s, ok := listed(b, id); ok && s.Topic == "renamed after restart" {
			return true
		}
		rctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		b.Fed.Reconcile(rctx, a.Fed.PeerID())
		return false
	})
}

// Property: reconciliation and index sync carry each announcement as the
// exact bytes its host signed, so a room whose topic and tags hold '&',
// '<' and '>' (which json.Marshal would re-escape, changing the item id)
// reaches a node that missed its gossip, and the node stores the very
// bytes the host keeps as its latest announcement.
func TestReconcileCarriesSignedBytes(t *testing.T) {
	clock := adptest.NewClock()
	a := fedtest.Start(t, "A", t.TempDir(), clock, 0, fedtest.Options{})
	b := fedtest.Start(t, "B", t.TempDir(), clock, 0, fedtest.Options{})
	alice := adptest.NewAgent("alice")
	id := fedtest.CreateRoom(t, a, alice, room.Public, "Q&A <live> & more", "r&d", "<b>")
	testwait.Until(t, 20*time.Second, "A keeps its announcement", func() bool { return a.Index.Own()[id] != nil })
	own := a.Index.Own()[id]
	if !strings.Contains(string(own), "Q&A <live>") {
		t.Fatalf("the signed announcement does not hold the topic verbatim: %s", own)
	}

	// Legacy index sync: the page holds the signed bytes verbatim.
	r := newRogue(t, "syncer", a)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := r.h.NewStream(ctx, a.Fed.PeerID(), federation.SyncProtocol)
	if err != nil {
		t.Fatal(err)
	}
	s.SetDeadline(time.Now().Add(10 * time.Second))
	s.Write(frame([]byte(`{"page":0}`)))
	page := readTestFrame(t, bufio.NewReader(s))
	s.Close()
	var p struct {
		Entries []json.RawMessage `json:"entries"`
	}
	if err := json.Unmarshal(page, &p); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, e := range p.Entries {
		found = found || string(e) == string(own)
	}
	if !found {
		t.Fatalf("index sync altered the signed announcement:\nsigned %s\nserved %s", own, page)
	}

	// Reconciliation: B never saw the gossip and learns the room.
	connect(t, b, a)
	testwait.Until(t, 10*time.Second, "B learns the room by reconciliation", func() bool {
		if e, ok := b.Index.Room(id, b.Clock.Ms()); ok {
			return string(e.Raw) == string(own)
		}
		rctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		b.Fed.Reconcile(rctx, a.Fed.PeerID())
		return false
	})
	// Across B's restart, and a further session finds nothing to exchange.
	b = b.Restart(t)
	if e, ok := b.Index.Room(id, b.Clock.Ms()); !ok || string(e.Raw) != string(own) {
		t.Fatal("the entry changed across B's restart")
	}
	connect(t, b, a)
	testwait.Until(t, 20*time.Second, "a session after the restart finds nothing to exchange", func() bool {
		res, err := b.Fed.Reconcile(ctx, a.Fed.PeerID())
		return err == nil && res.Need == 0 && res.Have == 0
	})
}

func readTestFrame(t *testing.T, r io.Reader) []byte {
	t.Helper()
	var l [4]byte
	if _, err := io.ReadFull(r, l[:]); err != nil {
		t.Fatal(err)
	}
	b := make([]byte, binary.BigEndian.Uint32(l[:]))
	if _, err := io.ReadFull(r, b); err != nil {
		t.Fatal(err)
	}
	return b
}

// Property: reconciliation and index sync serve one peer within its pull
// budget (requests, bytes and answered ids per window, on the node's
// clock), answer each id once per session and one page per sync stream:
// a hostile peer pulling back to back by both protocols gets at most the
// budget, about as many bytes as it sends, until the window refills.
func TestPullBudgetBoundsHostilePeer(t *testing.T) {
	const budgetBytes, budgetIDs = 512 << 10, 200
	clock := adptest.NewClock()
	v := fedtest.Start(t, "V", t.TempDir(), clock, 0, fedtest.Options{Configure: func(_ string, c *federation.Config) {
		c.Limits.Pull = federation.PullLimits{Window: time.Minute, Requests: 1000, Bytes: budgetBytes, IDs: budgetIDs,
			RefuseHold: 5 * time.Millisecond}
	}})
	alice := adptest.NewAgent("alice")
	agenda := strings.Repeat("agenda ", 300)
	var rooms []string
	for i := range 40 {
		now := clock.Ms()
		rooms = append(rooms, fedtest.MustSubmit(t, v, alice, "room.create", "", map[string]any{"topic": fmt.Sprint("room ", i),
			"agenda": agenda, "visibility": room.Public, "start_time": now, "end_time": now + 3_600_000, "tags": []string{}}).Record.RoomID)
	}
	var ids []byte
	testwait.Until(t, 20*time.Second, "V announces its rooms", func() bool {
		own := v.Index.Own()
		ids = ids[:0]
		for _, id := range rooms {
			if own[id] == nil {
				return false
			}
			h := sha256.Sum256(own[id])
			ids = append(ids, h[:]...)
		}
		return true
	})
	r := newRogue(t, "puller", v)
	var sent, got int64
	open := func(proto string) (lp2pnet.Stream, *bufio.Reader) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s, err := r.h.NewStream(ctx, v.Fed.PeerID(), protocol.ID(proto))
		if err != nil {
			t.Fatal(err)
		}
		s.SetDeadline(time.Now().Add(10 * time.Second))
		return s, bufio.NewReader(s)
	}
	exchange := func(s lp2pnet.Stream, br *bufio.Reader, req []byte) ([]byte, error) {
		if _, err := s.Write(frame(req)); err != nil {
			return nil, err
		}
		sent += int64(len(req) + 4)
		var l [4]byte
		if _, err := io.ReadFull(br, l[:]); err != nil {
			return nil, err
		}
		b := make([]byte, binary.BigEndian.Uint32(l[:]))
		if _, err := io.ReadFull(br, b); err != nil {
			return nil, err
		}
		got += int64(len(b) + 4)
		return b, nil
	}
	// A fetch naming each of V's 40 ids six times.
	fetch := []byte{'f'}
	for range 6 {
		fetch = append(fetch, ids...)
	}
	// V's item set is rebuilt at most once a second: until it holds the
	// 40 rooms, a fetch answers fewer. Each id is answered once.
	var list []json.RawMessage
	testwait.Until(t, 20*time.Second, "a fetch answers each of the 40 ids once", func() bool {
		s, br := open(federation.ReconcileProtocol)
		defer s.Close()
		ans, err := exchange(s, br, fetch)
		list = nil
		return err == nil && json.Unmarshal(ans, &list) == nil && len(list) == len(rooms)
	})
	for i := range 100 {
		s, br := open(federation.ReconcileProtocol)
		exchange(s, br, fetch)
		s.Close()
		s, br = open(federation.SyncProtocol)
		_, err := exchange(s, br, []byte(`{"page":0}`))
		if i == 0 {
			if err != nil {
				t.Fatal(err)
			}
			if _, err := exchange(s, br, []byte(`{"page":0}`)); err == nil {
				t.Fatal("a second page on one sync stream")
			}
		}
		s.Close()
	}
	st := v.Fed.Stats()
	t.Logf("puller sent %d B, got %d B; V served %d ids, refused %d requests", sent, got, st.PullIDs.Load(), st.PullRefused.Load())
	if got > budgetBytes || st.PullServed.Load() > budgetBytes {
		t.Fatalf("V served %d B (puller got %d B) in one window, budget %d", st.PullServed.Load(), got, budgetBytes)
	}
	if n := st.PullIDs.Load(); n > budgetIDs {
		t.Fatalf("V answered %d ids in one window, budget %d", n, budgetIDs)
	}
	if ratio := float64(got) / float64(sent); ratio > 1 {
		t.Fatalf("V sent %.1f bytes per byte received", ratio)
	}
	if st.PullRefused.Load() == 0 {
		t.Fatal("nothing refused")
	}
	// The next window: served again.
	clock.Advance(time.Minute)
	s, br := open(federation.SyncProtocol)
	if _, err := exchange(s, br, []byte(`{"page":0}`)); err != nil {
		t.Fatalf("after the window: %v", err)
	}
	s.Close()
}

// Property: a peer that feeds, by reconciliation, a claim gossip would
// reject (on a room ID the node hosts) is penalised as a gossiping one:
// the claim is refused and kept as evidence, and the peer's score goes
// negative; claims fed past the graylist threshold end the session.
func TestReconcileClaimPenalised(t *testing.T) {
	peers := network(t, 1, nil)
	a := peers[0]
	target := createRoom(t, a, adptest.NewAgent("alice"), room.Public, "target")
	r := newRogue(t, "claimer", a)
	r.serveDiscovery(t)
	r.awaitPeer(t, federation.IndexTopic, a.Fed.PeerID())
	now := a.Clock.Ms()
	claim := r.announcement(t, r.signer, r.id.String(), target, room.Public, "", now)
	sess := negentropy.NewSession(negentropy.NewSet([]negentropy.Item{{Timestamp: uint64(now), ID: sha256.Sum256(claim)}}), 0)
	r.h.SetStreamHandler(federation.ReconcileProtocol, func(s lp2pnet.Stream) {
		defer s.Close()
		br := bufio.NewReader(s)
		for {
			var l [4]byte
			if _, err := io.ReadFull(br, l[:]); err != nil {
				return
			}
			b := make([]byte, binary.BigEndian.Uint32(l[:]))
			if _, err := io.ReadFull(br, b); err != nil {
				return
			}
			out := []byte("[" + string(claim) + "]")
			if b[0] == 'n' {
				out, _ = sess.Respond(b[1:])
			}
			s.Write(frame(out))
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// Fed again and again (a session refusing a claim goes on until the
	// peer's penalty reaches the graylist threshold), a session ends at
	// the claim.
	testwait.Until(t, 20*time.Second, "a session ends at the claim", func() bool {
		_, err := a.Fed.Reconcile(ctx, r.id)
		return err != nil && strings.Contains(err.Error(), "gossip would reject")
	})
	if claims := a.Index.Claims(target, a.Clock.Ms()); len(claims) != 0 {
		t.Fatalf("the claim was admitted: %d", len(claims))
	}
	found := false
	for _, c := range a.Fed.Conflicts() {
		found = found || string(c) == string(claim)
	}
	if !found {
		t.Fatal("the claim is not kept as evidence")
	}
	testwait.Until(t, 20*time.Second, "the claimer's score goes negative", func() bool {
		s, ok := a.Fed.PeerScore(r.id)
		return ok && s < 0
	})
}
