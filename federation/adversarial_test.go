//go:build e2e

package federation_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	lp2pnet "github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/adpnode/adpnode/adp/assertion"
	"github.com/adpnode/adpnode/adp/identity"
	"github.com/adpnode/adpnode/adp/room"
	"github.com/adpnode/adpnode/directory"
	"github.com/adpnode/adpnode/federation"
	"github.com/adpnode/adpnode/index"
	"github.com/adpnode/adpnode/internal/adptest"
	"github.com/adpnode/adpnode/internal/fedtest"
	"github.com/adpnode/adpnode/internal/testwait"
)

// hijack signs an announcement of roomID by the rogue's own key and peer
// ID that claims the real host's origin, with created_at issuedAt,
// last_active lastActive and expires_at expiresAt.
func (r *rogue) hijack(t *testing.T, real *fedtest.Peer, roomID string, issuedAt, lastActive, expiresAt int64) []byte {
	t.Helper()
	sum, ok := real.Node.Summary(roomID)
	if !ok {
		sum = directory.Entry{ID: roomID, URL: real.URL + "/v1/rooms/" + roomID, Host: real.URL[len("http://"):],
			Status: room.StatusActive, Topic: "made up", Visibility: room.Public, StartTime: issuedAt, EndTime: issuedAt + 3_600_000}
	}
	sum.LastActive = lastActive
	a := index.Announcement{Room: sum, Host: index.Binding{Key: r.signer.HostKey(), PeerID: r.id.String(), Origin: real.URL},
		ExpiresAt: expiresAt}
	raw, err := r.signer.Sign(assertion.TypeAnnounce, a, issuedAt)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// captureRelay makes the rogue answer relayed writes with a made-up 201
// and count what it captured.
func (r *rogue) captureRelay() *atomic.Int64 {
	var n atomic.Int64
	r.h.SetStreamHandler(federation.RelayProtocol, func(s lp2pnet.Stream) {
		n.Add(1)
		io.Copy(io.Discard, io.LimitReader(s, 1<<20))
		ans, _ := json.Marshal(map[string]any{"status": 201, "body": []byte(`{"seq":1}`)})
		var l [4]byte
		l[0], l[1], l[2], l[3] = byte(len(ans)>>24), byte(len(ans)>>16), byte(len(ans)>>8), byte(len(ans))
		s.Write(l[:])
		s.Write(ans)
		s.Close()
	})
	return &n
}

func postJSON(t *testing.T, url string, body []byte) (int, map[string]any) {
	t.Helper()
	resp, err := http.Post(url, "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

// A forged announcement: a peer announces another host's room ID with its own
// key and peer ID, claiming the real host's origin, created_at a year
// ahead, expires_at ten years ahead — and, a second time, with a current
// created_at but last_active a year ahead. The victim refuses both (the
// room ID belongs to a verified host), keeps the signed claim as
// evidence, lists the room once, and relays the agent's write to the real
// host: the rogue captures nothing. A room ID only the rogue claims is
// answered relay_failed (unverified_host), never relayed. After a restart
// the evidence and the verified binding are still there. Cost: the
// honest relayed write stays fast.
func TestRoomHijack(t *testing.T) {
	peers := network(t, 2, nil)
	h, v := peers[0], peers[1]
	alice := adptest.NewAgent("alice")
	id := createRoom(t, h, alice, room.Public, "the real room")
	testwait.Until(t, 20*time.Second, "V lists H's room, verified", func() bool {
		s, ok := listed(v, id)
		return ok && s.Verified != nil && *s.Verified
	})

	r := newRogue(t, "hijacker", v)
	captured := r.captureRelay()
	r.awaitPeer(t, federation.IndexTopic, v.Fed.PeerID())
	now := v.Clock.Ms()
	const year = 365 * 24 * 3_600_000
	before := v.Fed.Stats().Rejected.Load()
	r.publish(t, federation.IndexTopic, r.hijack(t, h, id, now+year, now+year, now+10*year))
	r.publish(t, federation.IndexTopic, r.hijack(t, h, id, now, now+year, now+10*year))
	orphan := "d8ftedhpqhsusbg0orph"
	r.publish(t, federation.IndexTopic, r.hijack(t, h, orphan, now, now+year, now+10*year))
	testwait.Until(t, 20*time.Second, "V rejects both hijacks", func() bool { return v.Fed.Stats().Rejected.Load() >= before+2 })
	testwait.Until(t, 20*time.Second, "V stores the orphan claim (unverified)", func() bool {
		_, ok := v.Index.Room(orphan, v.Clock.Ms())
		return ok
	})

	// The directory lists the room once, as H's; the orphan not at all.
	n := 0
	for _, s := range v.Fed.Directory() {
		if s.ID == id {
			n++
			if s.URL != h.URL+"/v1/rooms/"+id || s.LastActive > v.Clock.Ms() {
				t.Errorf("directory entry %+v", s)
			}
		}
		if s.ID == orphan {
			t.Error("an unverified host's room is listed")
		}
	}
	if n != 1 {
		t.Fatalf("room listed %d times", n)
	}
	for _, c := range v.Index.Claims(id, v.Clock.Ms()) {
		if c.Host.Key != h.Fed.HostKey() {
			t.Fatalf("V's index holds the hijacker's claim: %+v", c.Host)
		}
	}
	if len(v.Fed.Conflicts()) == 0 {
		t.Fatal("no conflict evidence kept")
	}
	testwait.Until(t, 20*time.Second, "gossipsub scoring penalises the hijacker", func() bool {
		s, ok := v.Fed.PeerScore(r.id)
		return ok && s < 0
	})
	if e, ok := v.Index.Room(orphan, v.Clock.Ms()); !ok || e.ExpiresAt > v.Clock.Ms()+v.Index.Limits().MaxTTL.Milliseconds() ||
		e.Room.LastActive > v.Clock.Ms() {
		t.Fatalf("orphan entry times not clamped: %+v", e)
	}
	for _, hi := range v.Fed.KnownHosts() {
		if hi.Key == r.signer.HostKey() && hi.Verified {
			t.Fatal("the hijacker's binding shows verified")
		}
	}

	// The agent's write through V reaches H.
	head, _ := h.Node.Room(id, "")
	write := alice.Envelope(v.Clock.Ms(), "message.create", id, head.Head.Seq, head.Head.Hash, map[string]any{"content_type": "text/plain", "content": "hello"})
	status, _ := postJSON(t, v.URL+"/v1/rooms/"+id, write)
	if status != http.StatusCreated {
		t.Fatalf("relayed write: %d", status)
	}
	if got, _ := h.Node.Room(id, ""); got.Head.Seq != head.Head.Seq+1 {
		t.Fatal("the real host did not get the write")
	}
	// The orphan room: relay_failed, nothing relayed.
	status, out := postJSON(t, v.URL+"/v1/rooms/"+orphan, alice.Envelope(v.Clock.Ms(), "message.create", orphan, 1, strings.Repeat("A", 43), map[string]any{"content_type": "text/plain", "content": "x"}))
	e, _ := out["error"].(map[string]any)
	data, _ := e["data"].(map[string]any)
	if status != http.StatusBadGateway || e["code"] != "relay_failed" || data["reason"] != "unverified_host" {
		t.Fatalf("orphan write: %d %v", status, out)
	}
	if n := captured.Load(); n != 0 {
		t.Fatalf("the hijacker captured %d writes", n)
	}

	// Restart V: evidence and binding survive.
	v = v.Restart(t)
	if len(v.Fed.Conflicts()) == 0 {
		t.Fatal("conflict evidence lost across restart")
	}
	if s, ok := listed(v, id); !ok || s.Verified == nil || !*s.Verified {
		t.Fatal("verified binding lost across restart")
	}
}

// One peer announces 5,000 fake rooms. The victim's default
// directory shows none, its "all" mirror takes none, the victim stores at
// most its cap for an unverified host, and none reach a third node. An
// honest room created during the flood still arrives. Cost: heap and
// goroutines of the victim stay within small bounds.
func TestAnnouncementFlood(t *testing.T) {
	if testing.Short() {
		t.Skip("5,000 announcements")
	}
	peers := fedtest.Network(t, 3, [][2]int{{0, 1}, {1, 2}}, fedtest.Options{Mirror: true})
	a, b, c := peers[0], peers[1], peers[2]
	if _, err := b.Mir.AddTarget("all", ""); err != nil {
		t.Fatal(err)
	}
	r := newRogue(t, "flooder", b)
	r.awaitPeer(t, federation.IndexTopic, b.Fed.PeerID())
	runtime.GC()
	var m0 runtime.MemStats
	runtime.ReadMemStats(&m0)
	g0 := runtime.NumGoroutine()

	now := b.Clock.Ms()
	const fakes = 5000
	for i := 0; i < fakes; i++ {
		raw := r.announcement(t, r.signer, r.id.String(), fmt.Sprintf("d8ftedhpqhsusbg%05d", i), room.Public, "", now)
		r.publish(t, federation.IndexTopic, raw)
	}
	alice := adptest.NewAgent("alice")
	honest := createRoom(t, a, alice, room.Public, "honest during the flood")
	testwait.Until(t, 10*time.Second, "the honest room reaches C", func() bool { _, ok := listed(c, honest); return ok })
	testwait.Until(t, 20*time.Second, "B has processed the flood", func() bool {
		st := b.Fed.Stats()
		return st.OverCap.Load()+st.RateLimited.Load() > 0 && b.Index.Len() > lim(b).MaxPerUnverified/2
	})
	t.Logf("B: index %d, ignored %d, over cap %d, rate limited %d", b.Index.Len(), b.Fed.Stats().Ignored.Load(),
		b.Fed.Stats().OverCap.Load(), b.Fed.Stats().RateLimited.Load())
	// A marker after the flood, along the same path: B forwards it to C
	// after whatever of the flood it forwarded, so once C lists it the
	// flood has had its chance to spread.
	marker := createRoom(t, a, alice, room.Public, "after the flood")
	testwait.Until(t, 20*time.Second, "the marker room reaches C", func() bool { _, ok := listed(c, marker); return ok })

	if n, max := b.Index.Len(), lim(b).MaxPerUnverified; n > max+2 { // and the two honest rooms
		t.Errorf("B stores %d entries; the unverified cap is %d", n, max)
	}
	for _, s := range b.Fed.Directory() {
		if s.Host != a.URL[len("http://"):] {
			t.Fatalf("B lists a fake room: %+v", s)
		}
	}
	if n := len(b.Mir.Rooms()); n > 2 {
		t.Errorf("B's all-target mirrors %d rooms (only the two honest ones may be mirrored)", n)
	}
	if n := c.Index.Len(); n > 2 {
		t.Errorf("C holds %d entries: the flood spread", n)
	}
	runtime.GC()
	var m1 runtime.MemStats
	runtime.ReadMemStats(&m1)
	if grew := int64(m1.HeapInuse) - int64(m0.HeapInuse); grew > 64<<20 {
		t.Errorf("heap grew by %d MiB", grew>>20)
	}
	if g := runtime.NumGoroutine(); g > g0+200 {
		t.Errorf("goroutines %d → %d", g0, g)
	}
	// Restart B: the stored unverified entries stay within the cap and out
	// of the directory.
	b = b.Restart(t)
	for _, s := range b.Fed.Directory() {
		if s.Host != a.URL[len("http://"):] {
			t.Fatalf("after restart B lists a fake room: %+v", s)
		}
	}
}

// A rogue peer (three peer IDs) opens 150 index-sync streams each
// and never reads. The victim answers from one cached snapshot, refuses
// streams beyond the per-peer limit, and its heap grows by a small bound;
// an honest node's sync still works meanwhile.
func TestIndexSyncFlood(t *testing.T) {
	if testing.Short() {
		t.Skip("450 streams")
	}
	clock := adptest.NewClock()
	v := fedtest.Start(t, "V", t.TempDir(), clock, 0, fedtest.Options{})
	alice := adptest.NewAgent("alice")
	agenda := make([]byte, 8000)
	for i := range agenda {
		agenda[i] = 'a' + byte(i%26)
	}
	for i := 0; i < 300; i++ {
		now := clock.Ms()
		fedtest.MustSubmit(t, v, alice, "room.create", "", map[string]any{"topic": fmt.Sprint("room ", i), "agenda": string(agenda),
			"visibility": room.Public, "start_time": now, "end_time": now + 3_600_000, "tags": []string{}})
	}
	runtime.GC()
	var m0 runtime.MemStats
	runtime.ReadMemStats(&m0)

	var opened atomic.Int64
	for k := 0; k < 3; k++ {
		r := newRogue(t, fmt.Sprint("syncer", k), v)
		ai, _ := peer.AddrInfoFromString(v.Fed.Addrs()[0])
		for i := 0; i < 150; i++ {
			s, err := r.h.NewStream(context.Background(), ai.ID, federation.SyncProtocol)
			if err != nil {
				continue
			}
			opened.Add(1)
			s.Write([]byte{0, 0, 0, 2, '{', '}'}) // a request, then never read
			t.Cleanup(func() { s.Reset() })
		}
	}
	testwait.Until(t, 10*time.Second, "V refuses the streams over the per-peer limit", func() bool {
		// Streams beyond the per-peer limit are reset by V, or by the
		// resource manager's per-protocol limits before V sees them.
		return v.Fed.Stats().SyncRefused.Load() >= opened.Load()/2
	})
	runtime.GC()
	var m1 runtime.MemStats
	runtime.ReadMemStats(&m1)
	if grew := int64(m1.HeapInuse) - int64(m0.HeapInuse); grew > 64<<20 {
		t.Errorf("heap grew by %d MiB under 450 unread sync streams", grew>>20)
	}
	t.Logf("heap %d → %d MiB under %d unread sync streams (%d refused)", m0.HeapInuse>>20, m1.HeapInuse>>20, opened.Load(),
		v.Fed.Stats().SyncRefused.Load())

	// An honest node syncs meanwhile and learns V's rooms.
	c := fedtest.Start(t, "C", t.TempDir(), clock, 0, fedtest.Options{})
	start := time.Now()
	fedtest.Connect(t, c, v)
	testwait.Until(t, 60*time.Second, "C learns V's 300 rooms by sync", func() bool { return c.Index.Len() == 300 })
	t.Logf("honest sync under attack: %v", time.Since(start))
}

func lim(p *fedtest.Peer) index.Limits { return p.Index.Limits() }

// Property: a room ID claimed by a rogue before its real host was
// verified goes to the real host once it is verified. The rogue (a host
// of its own, whose origin is down at first) claims H's room on V before
// V knows H; V then learns H's room by reconciliation and verifies H;
// later the rogue's origin comes up and its binding is verified too. The
// rogue's claim is in V's evidence, not in its index; a write relayed
// through V reaches H and the rogue captures nothing; the same after a
// restart of V.
func TestRogueClaimBeforeVerification(t *testing.T) {
	clock := adptest.NewClock()
	h := fedtest.Start(t, "H", t.TempDir(), clock, 0, fedtest.Options{})
	v := fedtest.Start(t, "V", t.TempDir(), clock, 0, fedtest.Options{})
	alice := adptest.NewAgent("alice")
	id := createRoom(t, h, alice, room.Public, "the real room")

	r := newRogue(t, "squatter", v)
	var up atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if !up.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		json.NewEncoder(w).Encode(map[string]string{"host_key": string(r.signer.HostKey()), "peer_id": r.id.String()})
	}))
	t.Cleanup(srv.Close)
	r.origin = srv.URL
	captured := r.captureRelay()
	r.awaitPeer(t, federation.IndexTopic, v.Fed.PeerID())
	claim := r.announcement(t, r.signer, r.id.String(), id, room.Public, "", clock.Ms()+1000)
	r.publish(t, federation.IndexTopic, claim)
	rogueKey := r.signer.HostKey()
	holds := func(p *fedtest.Peer, key identity.AgentID) bool {
		for _, c := range p.Index.Claims(id, p.Clock.Ms()) {
			if c.Host.Key == key {
				return true
			}
		}
		return false
	}
	testwait.Until(t, 20*time.Second, "V stores the rogue's claim (unverified)", func() bool { return holds(v, rogueKey) })

	connect(t, v, h)
	testwait.Until(t, 10*time.Second, "V learns H's room and verifies H", func() bool {
		if holds(v, h.Fed.HostKey()) {
			e, _ := v.Index.Room(id, v.Clock.Ms())
			return e != nil && v.Fed.Verified(e.Host) && e.Host.Key == h.Fed.HostKey()
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		v.Fed.Reconcile(ctx, h.Fed.PeerID())
		return false
	})
	// The rogue's origin comes up: its binding is verified now.
	up.Store(true)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := v.Fed.CheckBinding(ctx, index.Binding{Key: rogueKey, PeerID: r.id.String(), Origin: r.origin}); err != nil {
		t.Fatalf("the rogue's binding: %v", err)
	}

	check := func(v *fedtest.Peer) {
		t.Helper()
		if holds(v, rogueKey) {
			t.Fatal("V's index still holds the rogue's claim")
		}
		s, ok := listed(v, id)
		if !ok || s.URL != h.URL+"/v1/rooms/"+id {
			t.Fatalf("V's directory: %+v", s)
		}
		found := false
		for _, c := range v.Fed.Conflicts() {
			found = found || string(c) == string(claim)
		}
		if !found {
			t.Fatal("the rogue's claim is not in V's evidence")
		}
		head, _ := h.Node.Room(id, "")
		write := alice.Envelope(v.Clock.Ms(), "message.create", id, head.Head.Seq, head.Head.Hash,
			map[string]any{"content_type": "text/plain", "content": fmt.Sprintf("hello %d", head.Head.Seq)})
		if status, out := postJSON(t, v.URL+"/v1/rooms/"+id, write); status != http.StatusCreated {
			t.Fatalf("relayed write: %d %v", status, out)
		}
		if got, _ := h.Node.Room(id, ""); got.Head.Seq != head.Head.Seq+1 {
			t.Fatal("the real host did not get the write")
		}
		if n := captured.Load(); n != 0 {
			t.Fatalf("the rogue captured %d writes", n)
		}
	}
	check(v)
	v = v.Restart(t)
	connect(t, v, h)
	check(v)
}
