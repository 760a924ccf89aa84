//go:build e2e

package federation_test

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p"
	pubsub "github.com/libp2p/go-libp2p-pubsub"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/adpnode/adpnode/adp/assertion"
	"github.com/adpnode/adpnode/adp/identity"
	"github.com/adpnode/adpnode/adp/room"
	"github.com/adpnode/adpnode/directory"
	"github.com/adpnode/adpnode/federation"
	"github.com/adpnode/adpnode/index"
	"github.com/adpnode/adpnode/internal/fedtest"
	"github.com/adpnode/adpnode/internal/testwait"
)

// rogue is a hostile libp2p peer speaking gossipsub directly.
type rogue struct {
	key    ed25519.PrivateKey
	id     peer.ID
	signer *assertion.Signer
	ps     *pubsub.PubSub
	topics map[string]*pubsub.Topic
	origin string // the origin its announcements claim
	h      host.Host
}

// serveDiscovery makes the rogue a host with a real binding: an HTTP
// server on 127.0.0.1 serving its own discovery document.
func (r *rogue) serveDiscovery(t *testing.T) {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		json.NewEncoder(w).Encode(map[string]string{"host_key": string(r.signer.HostKey()), "peer_id": r.id.String()})
	}))
	t.Cleanup(srv.Close)
	r.origin = srv.URL
}

func newRogue(t *testing.T, name string, connectTo *fedtest.Peer) *rogue {
	t.Helper()
	seed := make([]byte, 32)
	copy(seed, "rogue "+name)
	key, _ := identity.KeyFromSeed(seed)
	sk, _ := crypto.UnmarshalEd25519PrivateKey(key)
	h, err := libp2p.New(libp2p.Identity(sk), libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0"), libp2p.DisableRelay())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); h.Close() })
	// Flood publishing sends to every known subscriber at once, so a test
	// waits for a subscription (awaitPeer), not for a heartbeat to graft.
	ps, err := pubsub.NewGossipSub(ctx, h, pubsub.WithPeerOutboundQueueSize(8192), pubsub.WithFloodPublish(true))
	if err != nil {
		t.Fatal(err)
	}
	ai, _ := peer.AddrInfoFromString(connectTo.Fed.Addrs()[0])
	if err := h.Connect(ctx, *ai); err != nil {
		t.Fatal(err)
	}
	return &rogue{key: key, id: h.ID(), signer: assertion.NewSigner(key), ps: ps, topics: map[string]*pubsub.Topic{},
		origin: "http://127.0.0.1:9", h: h}
}

func (r *rogue) join(t *testing.T, topic string) *pubsub.Topic {
	t.Helper()
	tp, ok := r.topics[topic]
	if !ok {
		var err error
		if tp, err = r.ps.Join(topic); err != nil {
			t.Fatal(err)
		}
		if _, err := tp.Subscribe(); err != nil {
			t.Fatal(err)
		}
		r.topics[topic] = tp
	}
	return tp
}

// awaitPeer joins topic and waits until the rogue knows p subscribes to
// it: from then on a flood-published message reaches p.
func (r *rogue) awaitPeer(t *testing.T, topic string, p peer.ID) {
	t.Helper()
	r.join(t, topic)
	testwait.Until(t, 10*time.Second, "rogue sees "+p.String()+" on "+topic, func() bool {
		for _, id := range r.ps.ListPeers(topic) {
			if id == p {
				return true
			}
		}
		return false
	})
}

func (r *rogue) publish(t *testing.T, topic string, data []byte) {
	t.Helper()
	if err := r.join(t, topic).Publish(context.Background(), data); err != nil {
		t.Fatal(err)
	}
}

// announcement builds a signed announcement by signer for a made-up room.
func (r *rogue) announcement(t *testing.T, signer *assertion.Signer, peerID string, id, vis, agenda string, nowMs int64) []byte {
	t.Helper()
	origin := r.origin
	a := index.Announcement{
		Room: directory.Entry{ID: id, URL: origin + "/v1/rooms/" + id, Host: strings.TrimPrefix(origin, "http://"), Status: room.StatusActive,
			Topic: "rogue room", Agenda: agenda, Visibility: vis, StartTime: nowMs, EndTime: nowMs + 3_600_000},
		Host:      index.Binding{Key: signer.HostKey(), PeerID: peerID, Origin: origin},
		ExpiresAt: nowMs + 60_000,
	}
	raw, err := signer.Sign(assertion.TypeAnnounce, a, nowMs)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// Forged announcements — bad signature, a key that is not the sender's,
// a private room, oversize — and a forged record are rejected by B and
// never reach C, while an honest announcement by a rogue peer does. Each
// forgery comes from a fresh rogue: peer scoring graylists a peer after a
// couple of invalid messages, which would hide the later ones.
func TestHostilePeer(t *testing.T) {
	peers := network(t, 3, [][2]int{{0, 1}, {1, 2}})
	a, b, c := peers[0], peers[1], peers[2]
	if err := b.Fed.FollowRecords(a.Fed.PeerID(), func(*federation.StreamedRecord) {}); err != nil {
		t.Fatal(err)
	}
	roomN := func(i int) string { return fmt.Sprintf("d8ftedhpqhsusbg%05d", i) }
	otherSeed := make([]byte, 32)
	copy(otherSeed, "someone else")
	other, _ := identity.KeyFromSeed(otherSeed)
	otherPeer, _ := federation.PeerIDOf(other.Public().(ed25519.PublicKey))

	forgeries := []struct {
		name  string
		topic string
		make  func(r *rogue, now int64) []byte
	}{
		{"tampered after signing", federation.IndexTopic, func(r *rogue, now int64) []byte {
			good := r.announcement(t, r.signer, r.id.String(), roomN(1), room.Public, "", now)
			return []byte(strings.Replace(string(good), "rogue room", "rogue ROOM", 1))
		}},
		{"signed by another key", federation.IndexTopic, func(r *rogue, now int64) []byte {
			return r.announcement(t, assertion.NewSigner(other), otherPeer.String(), roomN(2), room.Public, "", now)
		}},
		{"claims A's peer ID", federation.IndexTopic, func(r *rogue, now int64) []byte {
			return r.announcement(t, r.signer, a.Fed.PeerID().String(), roomN(3), room.Public, "", now)
		}},
		{"private room", federation.IndexTopic, func(r *rogue, now int64) []byte {
			return r.announcement(t, r.signer, r.id.String(), roomN(4), room.Private, "", now)
		}},
		{"oversize", federation.IndexTopic, func(r *rogue, now int64) []byte {
			return r.announcement(t, r.signer, r.id.String(), roomN(5), room.Public, strings.Repeat("x", 20_000), now)
		}},
		{"forged record on A's stream", federation.RecordTopic(a.Fed.PeerID()), func(r *rogue, now int64) []byte {
			return []byte(`{"record":{},"checkpoint":{}}`)
		}},
	}
	for i, f := range forgeries {
		r := newRogue(t, fmt.Sprint(i), b)
		before := b.Fed.Stats().Rejected.Load()
		// Join first so the mesh with B exists, then publish.
		r.awaitPeer(t, f.topic, b.Fed.PeerID())
		r.publish(t, f.topic, f.make(r, b.Clock.Ms()))
		testwait.Until(t, 20*time.Second, "B rejects: "+f.name, func() bool { return b.Fed.Stats().Rejected.Load() > before })
	}

	// A well-formed announcement by a peer whose origin does not serve its
	// binding is kept by B (unverified, out of the directory) but not
	// forwarded to C.
	u := newRogue(t, "unverified", b)
	u.awaitPeer(t, federation.IndexTopic, b.Fed.PeerID())
	u.publish(t, federation.IndexTopic, u.announcement(t, u.signer, u.id.String(), roomN(7), room.Public, "", b.Clock.Ms()))
	testwait.Until(t, 20*time.Second, "B stores the unverified host's entry", func() bool { _, ok := b.Index.Room(roomN(7), b.Clock.Ms()); return ok })
	if _, ok := listed(b, roomN(7)); ok {
		t.Error("B lists a room of an unverified host in its directory")
	}

	// Control: an honest announcement by a fresh rogue with a real binding
	// gets through B to C.
	r := newRogue(t, "honest", b)
	r.serveDiscovery(t)
	r.awaitPeer(t, federation.IndexTopic, b.Fed.PeerID())
	r.publish(t, federation.IndexTopic, r.announcement(t, r.signer, r.id.String(), roomN(6), room.Public, "", b.Clock.Ms()))
	testwait.Until(t, 20*time.Second, "honest announcement reaches C through B", func() bool { _, ok := listed(c, roomN(6)); return ok })
	if _, ok := c.Index.Room(roomN(7), c.Clock.Ms()); ok {
		t.Error("B forwarded an unverified host's announcement to C")
	}

	if n := c.Fed.Stats().Rejected.Load(); n != 0 {
		t.Errorf("C saw %d invalid messages: B forwarded forgeries", n)
	}
	for _, p := range []*fedtest.Peer{b, c} {
		for i := 1; i <= 5; i++ {
			if _, ok := p.Index.Room(roomN(i), p.Clock.Ms()); ok {
				t.Errorf("forged announcement %d accepted by %s", i, p.Name)
			}
		}
	}
}
