//go:build e2e

package mirror_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p"
	pubsub "github.com/libp2p/go-libp2p-pubsub"
	pb "github.com/libp2p/go-libp2p-pubsub/pb"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/adpnode/adpnode/adp/assertion"
	"github.com/adpnode/adpnode/adp/identity"
	"github.com/adpnode/adpnode/adp/record"
	"github.com/adpnode/adpnode/adp/room"
	"github.com/adpnode/adpnode/adp/tlogproof"
	"github.com/adpnode/adpnode/adp/tlogwitness"
	"github.com/adpnode/adpnode/directory"
	"github.com/adpnode/adpnode/federation"
	"github.com/adpnode/adpnode/index"
	"github.com/adpnode/adpnode/internal/adptest"
	"github.com/adpnode/adpnode/internal/fedtest"
	"github.com/adpnode/adpnode/internal/testwait"
	"github.com/adpnode/adpnode/mirror"
)

// ---------------------------------------------------------------------------
// Chains built with the kernel, as a host would.

// kernelChain is a room history admitted record by record through the kernel.
type kernelChain struct {
	id   string
	st   *room.State
	recs []*record.Record
	now  int64
}

func newKernelChain(id string, now int64) *kernelChain {
	return &kernelChain{id: id, st: room.New(room.Config{Limits: room.DefaultLimits()}), now: now}
}

// add signs an event by a on the current head, admits it and commits its
// record.
func (c *kernelChain) add(t testing.TB, a *adptest.Agent, typ string, payload any) *record.Record {
	t.Helper()
	roomID := c.id
	if typ == "room.create" {
		roomID = ""
	}
	env, err := identity.OpenEnvelope(a.Envelope(c.now, typ, roomID, c.st.Head.Seq, c.st.Head.Hash, payload))
	if err != nil {
		t.Fatal(err)
	}
	adm, err := c.st.Admit(env, c.now, nil)
	if err != nil {
		t.Fatalf("%s by %s: %v", typ, a.Name, err)
	}
	rec := record.New(c.id, c.st.Seq+1, c.st.LastHash, env, c.now)
	c.st.Commit(adm, rec)
	c.recs = append(c.recs, rec)
	c.now++
	return rec
}

// prefix returns a new chain holding c's first n records, replayed.
func (c *kernelChain) prefix(t testing.TB, n int) *kernelChain {
	t.Helper()
	f := newKernelChain(c.id, c.now)
	for _, r := range c.recs[:n] {
		env, err := identity.OpenEnvelope(r.Envelope)
		if err != nil {
			t.Fatal(err)
		}
		if err := f.st.Apply(r, env, nil); err != nil {
			t.Fatal(err)
		}
		f.recs = append(f.recs, r)
	}
	return f
}

// kernelRoom builds a public room by creator with n messages after the
// create.
func kernelRoom(t testing.TB, id string, now int64, creator *adptest.Agent, n int) *kernelChain {
	t.Helper()
	c := newKernelChain(id, now)
	c.add(t, creator, "room.create", map[string]any{"topic": "byzantine", "visibility": room.Public, "start_time": now,
		"end_time": now + 3_600_000, "tags": []string{"byzantine"}})
	for i := 0; i < n; i++ {
		c.add(t, creator, "message.create", msg(fmt.Sprintf("message %d", i+2)))
	}
	return c
}

func recJSON(r *record.Record) json.RawMessage {
	b, _ := r.MarshalJSON()
	return b
}

// ---------------------------------------------------------------------------
// A raw libp2p peer: a fake host or a rogue, outside federation.Federation.

type rawPeer struct {
	key    ed25519.PrivateKey
	h      host.Host
	id     peer.ID
	signer *assertion.Signer
	ps     *pubsub.PubSub
	topics map[string]*pubsub.Topic
	asked  atomic.Int64 // backfill requests served
	origin string       // its HTTP origin (a discovery document only)
}

// gossipMsgID is federation's message ID: the first 16 bytes of the
// SHA-256 of the data, in hex.
func gossipMsgID(m *pb.Message) string {
	s := sha256.Sum256(m.Data)
	return hex.EncodeToString(s[:16])
}

func seedKey(t testing.TB, s string) ed25519.PrivateKey {
	t.Helper()
	seed := make([]byte, 32)
	copy(seed, s)
	k, err := identity.KeyFromSeed(seed)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// newRawPeer starts a libp2p host on 127.0.0.1 whose identity is key (so
// its peer ID commits to the same key as its assertion signer), with
// gossipsub when gossip is set.
func newRawPeer(t *testing.T, key ed25519.PrivateKey, gossip bool) *rawPeer {
	t.Helper()
	sk, err := crypto.UnmarshalEd25519PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	h, err := libp2p.New(libp2p.Identity(sk), libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0"), libp2p.DisableRelay())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); h.Close() })
	p := &rawPeer{key: key, h: h, id: h.ID(), signer: assertion.NewSigner(key), topics: map[string]*pubsub.Topic{}}
	// A Byzantine host lies about its records, not about its binding: it
	// serves its discovery document, so nodes verify the binding (only
	// verified hosts' announcements are forwarded and mirrored by "all").
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		json.NewEncoder(w).Encode(map[string]string{"host_key": string(p.signer.HostKey()), "peer_id": p.id.String()})
	}))
	t.Cleanup(srv.Close)
	p.origin = srv.URL
	if gossip {
		p.ps, err = pubsub.NewGossipSub(ctx, h, pubsub.WithMessageIdFn(gossipMsgID), pubsub.WithMessageSignaturePolicy(pubsub.StrictSign))
		if err != nil {
			t.Fatal(err)
		}
	}
	return p
}

func (p *rawPeer) connect(t *testing.T, to *fedtest.Peer) {
	t.Helper()
	ai, err := peer.AddrInfoFromString(to.Fed.Addrs()[0])
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := p.h.Connect(ctx, *ai); err != nil {
		t.Fatalf("connect to %s: %v", to.Name, err)
	}
}

// join joins and subscribes to a topic once.
func (p *rawPeer) join(t *testing.T, topic string) *pubsub.Topic {
	t.Helper()
	tp, ok := p.topics[topic]
	if !ok {
		var err error
		if tp, err = p.ps.Join(topic); err != nil {
			t.Fatal(err)
		}
		if _, err := tp.Subscribe(); err != nil {
			t.Fatal(err)
		}
		p.topics[topic] = tp
	}
	return tp
}

// awaitSubscriber waits until who is known to subscribe to topic.
func (p *rawPeer) awaitSubscriber(t *testing.T, topic string, who *fedtest.Peer) {
	t.Helper()
	p.join(t, topic)
	testwait.Until(t, 10*time.Second, who.Name+" subscribes to "+topic, func() bool {
		return slices.Contains(p.ps.ListPeers(topic), who.Fed.PeerID())
	})
}

func (p *rawPeer) publish(t *testing.T, topic string, data []byte) {
	t.Helper()
	if err := p.join(t, topic).Publish(context.Background(), data); err != nil {
		t.Fatal(err)
	}
}

// checkpoint signs a record.checkpoint assertion for rec with p's key.
func (p *rawPeer) checkpoint(t testing.TB, rec *record.Record, nowMs int64) json.RawMessage {
	t.Helper()
	cp, err := p.signer.Sign(assertion.TypeCheckpoint, assertion.Checkpoint{Host: p.signer.HostKey(), RoomID: rec.RoomID,
		Seq: rec.Seq, Hash: rec.Hash, ReceivedAt: rec.ReceivedAt}, nowMs)
	if err != nil {
		t.Fatal(err)
	}
	return cp
}

// publishRecord publishes rec with its own checkpoint on p's record stream.
func (p *rawPeer) publishRecord(t *testing.T, rec *record.Record, nowMs int64) {
	t.Helper()
	msg, err := json.Marshal(federation.RecordMsg{Record: recJSON(rec), Checkpoint: p.checkpoint(t, rec, nowMs)})
	if err != nil {
		t.Fatal(err)
	}
	p.publish(t, federation.RecordTopic(p.id), msg)
}

// announce publishes a signed index announcement of public room id at seq,
// at the peer's origin (which serves only its discovery document).
func (p *rawPeer) announce(t *testing.T, id string, seq int64, creator identity.AgentID, nowMs int64) {
	t.Helper()
	origin := p.origin
	a := index.Announcement{
		Room: directory.Entry{ID: id, URL: origin + "/v1/rooms/" + id, Host: strings.TrimPrefix(origin, "http://"), Status: room.StatusActive,
			Topic: "byzantine", Visibility: room.Public, Creator: creator, StartTime: nowMs, EndTime: nowMs + 3_600_000,
			Tags: []string{"byzantine"}, Seq: seq},
		Host:      index.Binding{Key: p.signer.HostKey(), PeerID: p.id.String(), Origin: origin},
		ExpiresAt: nowMs + 3_600_000,
	}
	raw, err := p.signer.Sign(assertion.TypeAnnounce, a, nowMs)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := index.Parse(raw); err != nil {
		t.Fatalf("the fake host's announcement does not parse: %v", err)
	}
	p.publish(t, federation.IndexTopic, raw)
}

// rawBackfillRequest is federation's backfill request frame.
type rawBackfillRequest struct {
	RoomID   string `json:"room_id"`
	AfterSeq int64  `json:"after_seq"`
	Limit    int    `json:"limit"`
}

func byzWriteFrame(w io.Writer, b []byte) error {
	var l [4]byte
	binary.BigEndian.PutUint32(l[:], uint32(len(b)))
	if _, err := w.Write(l[:]); err != nil {
		return err
	}
	_, err := w.Write(b)
	return err
}

func byzReadFrame(r io.Reader) ([]byte, error) {
	var l [4]byte
	if _, err := io.ReadFull(r, l[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(l[:])
	if n > 16<<20 {
		return nil, fmt.Errorf("frame of %d bytes", n)
	}
	b := make([]byte, n)
	_, err := io.ReadFull(r, b)
	return b, err
}

// serveBackfill answers federation.BackfillProtocol with fn.
func (p *rawPeer) serveBackfill(fn func(rawBackfillRequest) federation.BackfillBatch) {
	p.h.SetStreamHandler(federation.BackfillProtocol, func(s network.Stream) {
		defer s.Close()
		s.SetDeadline(time.Now().Add(10 * time.Second))
		b, err := byzReadFrame(s)
		if err != nil {
			s.Reset()
			return
		}
		var req rawBackfillRequest
		if err := json.Unmarshal(b, &req); err != nil {
			s.Reset()
			return
		}
		p.asked.Add(1)
		out, _ := json.Marshal(fn(req))
		byzWriteFrame(s, out)
	})
}

// backfill asks peer id for records, as a mirror would.
func (p *rawPeer) backfill(t *testing.T, id peer.ID, req rawBackfillRequest) *federation.BackfillBatch {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := p.h.NewStream(ctx, id, federation.BackfillProtocol)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.SetDeadline(time.Now().Add(10 * time.Second))
	b, _ := json.Marshal(req)
	if err := byzWriteFrame(s, b); err != nil {
		t.Fatal(err)
	}
	s.CloseWrite()
	if b, err = byzReadFrame(s); err != nil {
		t.Fatal(err)
	}
	var batch federation.BackfillBatch
	if err := json.Unmarshal(b, &batch); err != nil || batch.Error != "" {
		t.Fatalf("backfill: %v %s", err, batch.Error)
	}
	return &batch
}

// ---------------------------------------------------------------------------
// The adpnode binary.

// buildAdpnode builds cmd/adpnode into a temporary directory, with -race
// when this test binary has it (so the build reuses the test build's
// cache).
func buildAdpnode(t *testing.T) string {
	t.Helper()
	// go test puts its own GOROOT/bin first on the test's PATH.
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to build adpnode with")
	}
	bin := filepath.Join(t.TempDir(), "adpnode")
	args := []string{"build", "-o", bin}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "-race" && s.Value == "true" {
				args = append(args, "-race")
			}
		}
	}
	cmd := exec.Command(goBin, append(args, "github.com/adpnode/adpnode/cmd/adpnode")...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build adpnode: %v\n%s", err, out)
	}
	return bin
}

// runVerify runs `adpnode verify file` and returns its output and exit code.
func runVerify(t *testing.T, bin, file string) (string, int) {
	t.Helper()
	out, err := exec.Command(bin, "verify", file).CombinedOutput()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return string(out), 0
	case errors.As(err, &ee):
		return string(out), ee.ExitCode()
	}
	t.Fatalf("adpnode verify: %v", err)
	return "", -1
}

func writeTemp(t *testing.T, name string, b []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// ---------------------------------------------------------------------------
// 1. An equivocating host.

func evidenceOf(t *testing.T, raw []byte) *mirror.Evidence {
	t.Helper()
	var ev mirror.Evidence
	if err := json.Unmarshal(raw, &ev); err != nil {
		t.Fatal(err)
	}
	return &ev
}

// A fake host announces a public room, streams a valid chain with
// checkpoints, then publishes a second valid record, with its own valid
// checkpoint, for a seq it already published. Mirror B proves it, freezes
// the room and gossips the evidence; C, connected only to B, stores it and
// refuses the host. `adpnode verify` accepts the evidence and rejects
// doctored copies.
func TestEquivocatingHost(t *testing.T) {
	peers := fedtest.Network(t, 2, nil, fedtest.Options{Rates: noRates, Mirror: true})
	b, c := peers[0], peers[1]
	if _, err := b.Mir.AddTarget(mirror.TargetAll, ""); err != nil {
		t.Fatal(err)
	}
	fake := newRawPeer(t, seedKey(t, "byzantine host"), true)
	fake.connect(t, b)
	hostKey := fake.signer.HostKey()

	alice, bob := adptest.NewAgent("alice"), adptest.NewAgent("bob")
	now := b.Clock.Ms()
	hon := kernelRoom(t, "d8ftedhpqhsusbg00e01", now, alice, 0)
	hon.add(t, bob, "room.join", map[string]any{"role": "speaker"})
	for i := 0; i < 6; i++ {
		hon.add(t, []*adptest.Agent{alice, bob}[i%2], "message.create", msg(fmt.Sprintf("honest %d", i)))
	}
	const published = 8 // create, join, six messages
	if len(hon.recs) != published {
		t.Fatalf("chain has %d records", len(hon.recs))
	}
	// The fork: the same first four records, then another message at seq 5.
	const disputed = 5
	fork := hon.prefix(t, disputed-1)
	alt := fork.add(t, bob, "message.create", msg("the other story"))
	if alt.Seq != disputed || alt.Hash == hon.recs[disputed-1].Hash {
		t.Fatal("the fork does not conflict")
	}
	// Two more honest records, published after the equivocation.
	next := hon.add(t, alice, "message.create", msg("after the fork"))
	later := hon.add(t, bob, "message.create", msg("later still"))

	// The fake host also serves its chain to backfill, honestly (a stream
	// message lost in gossip is fetched, not waited for).
	fake.serveBackfill(func(req rawBackfillRequest) federation.BackfillBatch {
		var out federation.BackfillBatch
		if req.RoomID != hon.id {
			out.Error = "room_not_found"
			return out
		}
		for _, r := range hon.recs[min(req.AfterSeq, published):min(req.AfterSeq+int64(req.Limit), published)] {
			out.Records = append(out.Records, recJSON(r))
		}
		if len(out.Records) > 0 {
			out.Checkpoints = []json.RawMessage{fake.checkpoint(t, hon.recs[req.AfterSeq+int64(len(out.Records))-1], now)}
		}
		return out
	})

	// (a) Announce the room (before any record, as at its creation).
	// Gossip is fire-and-forget, so re-announce (as real hosts do
	// periodically) until B has picked the room up.
	fake.awaitSubscriber(t, federation.IndexTopic, b)
	lastAnnounce := time.Time{}
	testwait.Until(t, 10*time.Second, "B mirrors the fake host's room", func() bool {
		if time.Since(lastAnnounce) > 300*time.Millisecond {
			fake.announce(t, hon.id, 0, alice.ID, now)
			lastAnnounce = time.Now()
		}
		_, ok := b.Mir.Room(hon.id, hostKey)
		return ok
	})
	// (b) Stream the chain with checkpoints.
	fake.awaitSubscriber(t, federation.RecordTopic(fake.id), b)
	for _, rec := range hon.recs[:published] {
		fake.publishRecord(t, rec, now)
	}
	br, _ := b.Mir.Room(hon.id, hostKey)
	// A lost tail record is found through the host's re-announcement of
	// its seq (then backfilled), as with real hosts.
	testwait.Until(t, 10*time.Second, "B verified the streamed chain", func() bool {
		if time.Since(lastAnnounce) > 300*time.Millisecond {
			fake.announce(t, hon.id, published, alice.ID, now)
			lastAnnounce = time.Now()
		}
		return br.Tip() == published
	})
	if info := br.Info(); info.Faulty || len(b.Mir.EvidenceList()) != 0 {
		t.Fatalf("B suspects an honest chain: %+v", info)
	}

	// (c) Equivocate.
	lastAlt := time.Time{}
	testwait.Until(t, 10*time.Second, "B stores equivocation evidence", func() bool {
		if time.Since(lastAlt) > 500*time.Millisecond { // gossip may lose one message
			fake.publishRecord(t, alt, now)
			lastAlt = time.Now()
		}
		return len(b.Mir.EvidenceList()) == 1
	})
	evRaw := b.Mir.EvidenceList()[0]
	ev := evidenceOf(t, evRaw)
	if err := ev.Verify(); err != nil {
		t.Fatalf("B's evidence does not verify: %v", err)
	}
	if ev.Type != mirror.EvidenceType || ev.Kind != mirror.KindEquivocation || ev.Host != hostKey || ev.RoomID != hon.id ||
		ev.Seq != disputed || ev.Detector != b.Fed.HostKey() || len(ev.Checkpoints) != 2 {
		t.Fatalf("evidence %s", evRaw)
	}
	testwait.Until(t, 20*time.Second, "B marks the host faulty", func() bool { return b.Mir.Faulty(hostKey) && br.Info().Faulty })
	if n := b.Mir.Stats().Evidence.Load(); n != 1 {
		t.Errorf("B counted %d pieces of evidence", n)
	}

	// The verified seq stays frozen: a further valid record on the chain
	// B holds is not applied. (Accepted counts every gossip message B
	// validates. B's room takes the records of the host's stream one at a
	// time, in the order validated, and notes each one's seq as known
	// before it decides: once it knows the later record's, it has decided
	// on the first.)
	accepted := b.Fed.Stats().Accepted.Load()
	fake.publishRecord(t, next, now)
	testwait.Until(t, 20*time.Second, "B validates the record after the fork", func() bool {
		return b.Fed.Stats().Accepted.Load() > accepted
	})
	fake.publishRecord(t, later, now)
	testwait.Until(t, 20*time.Second, "B's room knows of the later record", func() bool { return br.Info().KnownSeq >= later.Seq })
	if info := br.Info(); info.VerifiedSeq != published || info.FrozenAt != published || !info.Faulty {
		t.Fatalf("B's room after the fork: %+v", info)
	}
	// Replaying the conflict again adds no second piece of evidence.
	if len(b.Mir.EvidenceList()) != 1 {
		t.Fatalf("B holds %d pieces of evidence", len(b.Mir.EvidenceList()))
	}

	// C, connected only to B, gets the evidence by gossip.
	testwait.Until(t, 10*time.Second, "C stores the gossiped evidence", func() bool { return len(c.Mir.EvidenceList()) == 1 })
	cev := evidenceOf(t, c.Mir.EvidenceList()[0])
	if err := cev.Verify(); err != nil || cev.Detector != b.Fed.HostKey() || cev.Seq != disputed || cev.Host != hostKey {
		t.Fatalf("C's evidence: %v %+v", err, cev)
	}
	testwait.Until(t, 20*time.Second, "C marks the host faulty", func() bool { return c.Mir.Faulty(hostKey) })
	// C knows the room from the index but will not mirror a faulty host.
	testwait.Until(t, 10*time.Second, "C indexed the room", func() bool {
		_, ok := c.Index.Room(hon.id, c.Clock.Ms())
		return ok
	})
	if _, err := c.Mir.AddTarget(mirror.TargetAll, ""); err != nil {
		t.Fatal(err)
	}
	if _, ok := c.Mir.Room(hon.id, ""); ok {
		t.Fatal("C mirrors a room of a host proven faulty")
	}

	// The faulty mark survives a restart of B.
	b = b.Restart(t)
	if !b.Mir.Faulty(hostKey) || len(b.Mir.EvidenceList()) != 1 {
		t.Fatal("B forgot the evidence across a restart")
	}
	if r, ok := b.Mir.Room(hon.id, hostKey); !ok || !r.Info().Faulty || r.Tip() != published {
		t.Fatal("B's room is not frozen after a restart")
	}

	// adpnode verify, on the evidence and on doctored copies of it.
	bin := buildAdpnode(t)
	out, code := runVerify(t, bin, writeTemp(t, "evidence.json", evRaw))
	if code != 0 || !strings.HasPrefix(out, "OK evidence: equivocation") || !strings.Contains(out, string(hostKey)) {
		t.Fatalf("adpnode verify evidence: exit %d: %s", code, out)
	}
	doctored := map[string]func(e *mirror.Evidence){
		"same checkpoint twice": func(e *mirror.Evidence) { e.Checkpoints[1] = e.Checkpoints[0] },
		"another seq":           func(e *mirror.Evidence) { e.Seq++ },
		"checkpoint re-signed by another key": func(e *mirror.Evidence) {
			var cp struct {
				Event struct {
					Payload assertion.Checkpoint `json:"payload"`
				} `json:"event"`
			}
			json.Unmarshal(e.Checkpoints[1], &cp)
			cp.Event.Payload.Host = identity.AgentIDFromKey(seedKey(t, "someone").Public().(ed25519.PublicKey))
			e.Checkpoints[1], _ = assertion.NewSigner(seedKey(t, "someone")).Sign(assertion.TypeCheckpoint, cp.Event.Payload, now)
		},
		"changed record byte": func(e *mirror.Evidence) {
			e.Records[0] = bytes.Replace(e.Records[0], []byte("honest"), []byte("Honest"), 1)
		},
	}
	for name, doctor := range doctored {
		e := evidenceOf(t, evRaw)
		doctor(e)
		raw, _ := json.Marshal(e)
		if e.Verify() == nil {
			t.Errorf("%s: doctored evidence verifies", name)
		}
		out, code := runVerify(t, bin, writeTemp(t, "doctored.json", raw))
		if code != 2 || !strings.HasPrefix(out, "FAIL evidence:") {
			t.Errorf("%s: adpnode verify: exit %d: %s", name, code, out)
		}
	}
}

// Evidence.Verify refuses accusations that do not prove the host wrong,
// even with real host checkpoints in them.
func TestEvidenceForgeries(t *testing.T) {
	hostKey := seedKey(t, "honest host")
	hs := assertion.NewSigner(hostKey)
	alice, mallory := adptest.NewAgent("alice"), adptest.NewAgent("mallory")
	const id = "d8ftedhpqhsusbg00e02"
	now := int64(1_780_000_000_000)
	honest := kernelRoom(t, id, now, alice, 5)
	cp := func(r *record.Record) json.RawMessage {
		b, err := hs.Sign(assertion.TypeCheckpoint, assertion.Checkpoint{Host: hs.HostKey(), RoomID: r.RoomID, Seq: r.Seq, Hash: r.Hash,
			ReceivedAt: r.ReceivedAt}, now)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	evidence := func(kind string, seq int64, cps []json.RawMessage, recs []*record.Record) *mirror.Evidence {
		e := &mirror.Evidence{Type: mirror.EvidenceType, Kind: kind, Host: hs.HostKey(), RoomID: id, Seq: seq, Reason: "test",
			DetectedAt: now, Checkpoints: cps}
		for _, r := range recs {
			e.Records = append(e.Records, recJSON(r))
		}
		return e
	}
	last := honest.recs[len(honest.recs)-1]

	// A made-up history under the same room ID, ending with the honest
	// host's real record 6: replaying it fails on the hash chain, which
	// proves nothing against the host.
	madeUp := kernelRoom(t, id, now, mallory, 4)
	framed := append(slices.Clone(madeUp.recs), last)
	if err := evidence(mirror.KindInvalidRecord, last.Seq, []json.RawMessage{cp(last)}, framed).Verify(); err == nil {
		t.Error("invalid_record evidence with a made-up prefix verifies")
	}
	// A vouched record whose received_at goes backwards is the host's fault.
	back3 := honest.prefix(t, 3)
	env4, err := identity.OpenEnvelope(alice.Envelope(back3.now, "message.create", id, back3.st.Head.Seq, back3.st.Head.Hash, msg("early")))
	if err != nil {
		t.Fatal(err)
	}
	early := record.New(id, 4, back3.st.LastHash, env4, back3.recs[2].ReceivedAt-1)
	if err := evidence(mirror.KindInvalidRecord, 4, []json.RawMessage{cp(early)}, append(slices.Clone(back3.recs), early)).Verify(); err != nil {
		t.Errorf("invalid_record evidence of a record back in time: %v", err)
	}
	// The honest chain itself is no evidence.
	if err := evidence(mirror.KindInvalidRecord, last.Seq, []json.RawMessage{cp(last)}, honest.recs).Verify(); err == nil {
		t.Error("invalid_record evidence of a valid chain verifies")
	}
	// A room that imports an external pack cannot be judged offline.
	packRoom := newKernelChain("d8ftedhpqhsusbg00e03", now)
	env, err := identity.OpenEnvelope(alice.Envelope(now, "room.create", "", 0, "", map[string]any{"topic": "packs",
		"visibility": room.Public, "start_time": now, "end_time": now + 3_600_000,
		"types": []any{map[string]any{"pack": "https://packs.example/p.json", "digest": "sha256:" + strings.Repeat("A", 43)}}}))
	if err != nil {
		t.Fatal(err)
	}
	create := record.New(packRoom.id, 1, "", env, now)
	pe := evidence(mirror.KindInvalidRecord, 1, []json.RawMessage{cp(create)}, []*record.Record{create})
	pe.RoomID = packRoom.id
	if err := pe.Verify(); err == nil {
		t.Error("invalid_record evidence against a room with an external pack verifies")
	}
	// Equivocation needs two hashes at one seq.
	if err := evidence(mirror.KindEquivocation, 3, []json.RawMessage{cp(honest.recs[3]), cp(honest.recs[2])},
		honest.recs[2:4]).Verify(); err == nil {
		t.Error("equivocation evidence from one chain verifies")
	}
	// Checkpoints by another key.
	other := assertion.NewSigner(seedKey(t, "other host"))
	ocp, _ := other.Sign(assertion.TypeCheckpoint, assertion.Checkpoint{Host: other.HostKey(), RoomID: id, Seq: 2, Hash: madeUp.recs[1].Hash}, now)
	if err := evidence(mirror.KindEquivocation, 2, []json.RawMessage{cp(honest.recs[1]), ocp}, nil).Verify(); err == nil {
		t.Error("equivocation evidence with another host's checkpoint verifies")
	}
	// The real thing verifies: two host checkpoints for seq 2.
	fake := evidence(mirror.KindEquivocation, 2, []json.RawMessage{cp(honest.recs[1]), cp(madeUp.recs[1])}, nil)
	if err := fake.Verify(); err != nil {
		t.Errorf("two host checkpoints at one seq: %v", err)
	}
	fake.Type = "room.archive"
	if fake.Verify() == nil {
		t.Error("evidence of another type verifies")
	}

	// A fork right after the tip: b vouches for records from seq 4 on whose
	// pre_hash names another record 3 than a's chain.
	forked := honest.prefix(t, 2)
	forked.add(t, mallory, "room.join", map[string]any{"role": "speaker"})
	f4 := forked.add(t, mallory, "message.create", msg("forked 4"))
	f5 := forked.add(t, mallory, "message.create", msg("forked 5"))
	conflict := func(e *mirror.Evidence, recs ...*record.Record) *mirror.Evidence {
		for _, r := range recs {
			e.Conflict = append(e.Conflict, recJSON(r))
		}
		return e
	}
	if err := conflict(evidence(mirror.KindEquivocation, 3, []json.RawMessage{cp(honest.recs[3]), cp(f5)}, honest.recs[2:4]),
		f4, f5).Verify(); err != nil {
		t.Errorf("a fork after seq 3: %v", err)
	}
	if err := conflict(evidence(mirror.KindEquivocation, 3, []json.RawMessage{cp(honest.recs[2]), cp(f4)}, honest.recs[2:3]),
		f4).Verify(); err != nil {
		t.Errorf("a fork right after the tip: %v", err)
	}
	for name, e := range map[string]*mirror.Evidence{
		"the honest continuation": conflict(evidence(mirror.KindEquivocation, 3,
			[]json.RawMessage{cp(honest.recs[2]), cp(honest.recs[3])}, honest.recs[2:3]), honest.recs[3]),
		"b names another record": conflict(evidence(mirror.KindEquivocation, 3,
			[]json.RawMessage{cp(honest.recs[2]), cp(f5)}, honest.recs[2:3]), f4),
		"a gap after the disputed seq": conflict(evidence(mirror.KindEquivocation, 3,
			[]json.RawMessage{cp(honest.recs[2]), cp(f5)}, honest.recs[2:3]), f5),
		"no records for a": conflict(evidence(mirror.KindEquivocation, 3,
			[]json.RawMessage{cp(honest.recs[2]), cp(f4)}, nil), f4),
		"on invalid_record": conflict(evidence(mirror.KindInvalidRecord, last.Seq, []json.RawMessage{cp(last)}, honest.recs), f4),
	} {
		if e.Verify() == nil {
			t.Errorf("conflict evidence verifies: %s", name)
		}
	}

	// Evidence survives encoding/json (which escapes <, > and &) with the
	// records it carries: stored, gossiped and re-marshalled.
	fish := kernelRoom(t, id, now, alice, 0)
	fish.add(t, alice, "message.create", msg("<b>fish & chips</b>"))
	fish.add(t, alice, "message.create", msg("more"))
	chips := fish.prefix(t, 1).add(t, alice, "message.create", msg("chips"))
	ev := evidence(mirror.KindEquivocation, 2, []json.RawMessage{cp(fish.recs[2]), cp(chips)}, fish.recs[1:3])
	if err := ev.Verify(); err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(raw, []byte(`\u003cb\u003efish \u0026 chips`)) {
		t.Fatalf("encoding/json no longer escapes: %s", raw)
	}
	var back mirror.Evidence
	if err := json.Unmarshal(raw, &back); err != nil {
		t.Fatal(err)
	}
	if err := back.Verify(); err != nil {
		t.Errorf("equivocation evidence after a JSON round trip: %v", err)
	}
	inv := kernelRoom(t, id, now, alice, 2)
	bad := inv.prefix(t, 3)
	env, err = identity.OpenEnvelope(alice.Envelope(bad.now, "room.create", "", 0, "", map[string]any{"topic": "<again> & again",
		"visibility": room.Public, "start_time": now, "end_time": now + 3_600_000}))
	if err != nil {
		t.Fatal(err)
	}
	again := record.New(id, 4, bad.st.LastHash, env, bad.now) // a second room.create: the rules reject it
	ie := evidence(mirror.KindInvalidRecord, 4, []json.RawMessage{cp(again)}, append(slices.Clone(bad.recs), again))
	if err := ie.Verify(); err != nil {
		t.Fatalf("invalid_record evidence: %v", err)
	}
	raw, _ = json.Marshal(ie)
	back = mirror.Evidence{}
	if err := json.Unmarshal(raw, &back); err != nil {
		t.Fatal(err)
	}
	if err := back.Verify(); err != nil {
		t.Errorf("invalid_record evidence after a JSON round trip: %v", err)
	}
}

// ---------------------------------------------------------------------------
// 2. Tampered backfill.

// A late mirror asks a rogue peer first (the host is down and the rogue's
// peer ID sorts before the honest mirror's). The rogue answers with
// tampered copies of the honest batch carrying the host's real checkpoint:
// the mirror refuses them, fetches the records from the honest mirror, and
// accuses nobody.
func TestTamperedBackfill(t *testing.T) {
	peers := fedtest.Network(t, 2, nil, fedtest.Options{Rates: noRates, Mirror: true})
	a, h := peers[0], peers[1]
	if _, err := h.Mir.AddTarget(mirror.TargetAll, ""); err != nil {
		t.Fatal(err)
	}
	alice := adptest.NewAgent("alice")
	id := fedtest.CreateRoom(t, a, alice, room.Public, "backfilled")
	const n = 41
	for i := 2; i <= n; i++ {
		fedtest.MustSubmit(t, a, alice, "message.create", id, msg(fmt.Sprintf("message %d", i)))
	}
	testwait.Until(t, 10*time.Second, "H verified the room", func() bool {
		r, ok := h.Mir.Room(id, "")
		return ok && r.Tip() == n
	})
	testwait.Until(t, 10*time.Second, "H's index shows the room's last seq", func() bool {
		e, ok := h.Index.Room(id, h.Clock.Ms())
		return ok && e.Room.Seq == n
	})
	honest, _, err := a.Node.Events(id, "", 0, 1000)
	if err != nil || len(honest) != n {
		t.Fatalf("host events: %d, %v", len(honest), err)
	}
	hostKey := a.Fed.HostKey()
	a.Stop() // the host is down: catch-up must come from peers

	// The rogue: a peer ID that sorts before H's, so it is asked first.
	var rogue *rawPeer
	for i := 0; ; i++ {
		k := seedKey(t, fmt.Sprintf("rogue %d", i))
		pid, _ := federation.PeerIDOf(k.Public().(ed25519.PublicKey))
		if pid.String() < h.Fed.PeerID().String() {
			rogue = newRawPeer(t, k, false)
			break
		}
	}
	// It gets the honest batch, with the host's checkpoint, from H.
	rogue.connect(t, h)
	good := rogue.backfill(t, h.Fed.PeerID(), rawBackfillRequest{RoomID: id, AfterSeq: 0, Limit: 1000})
	if len(good.Records) != n || len(good.Checkpoints) != 1 {
		t.Fatalf("H served %d records, %d checkpoints", len(good.Records), len(good.Checkpoints))
	}
	for i := range honest {
		if !bytes.Equal(good.Records[i], honest[i]) {
			t.Fatalf("H serves another record %d than the host", i+1)
		}
	}
	if cp, err := assertion.OpenCheckpoint(good.Checkpoints[0]); err != nil || cp.Host != hostKey || cp.Seq != n {
		t.Fatalf("H's checkpoint: %+v %v", cp, err)
	}
	// A record nobody vouches for that continues the honest chain.
	replayed := newKernelChain(id, 0)
	for _, raw := range honest {
		rec, env, err := record.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		if err := replayed.st.Apply(rec, env, nil); err != nil {
			t.Fatal(err)
		}
		replayed.recs = append(replayed.recs, rec)
		replayed.now = rec.ReceivedAt
	}
	unvouched := replayed.add(t, adptest.NewAgent("mallory"), "room.join", map[string]any{"role": "speaker"})
	// A whole made-up history under the same room ID.
	madeUp := kernelRoom(t, id, h.Clock.Ms(), adptest.NewAgent("mallory"), n-1)

	clone := func() federation.BackfillBatch {
		return federation.BackfillBatch{Records: slices.Clone(good.Records), Checkpoints: slices.Clone(good.Checkpoints)}
	}
	modes := []struct {
		name    string
		tamper  func() federation.BackfillBatch
		refused bool
	}{
		{"changed payload byte", func() federation.BackfillBatch {
			b := clone()
			b.Records[9] = bytes.Replace(b.Records[9], []byte("message 10"), []byte("message 1O"), 1)
			if bytes.Equal(b.Records[9], good.Records[9]) {
				t.Fatal("nothing tampered")
			}
			return b
		}, true},
		{"reordered records", func() federation.BackfillBatch {
			b := clone()
			b.Records[9], b.Records[10] = b.Records[10], b.Records[9]
			return b
		}, true},
		{"omitted record", func() federation.BackfillBatch {
			b := clone()
			b.Records = slices.Delete(b.Records, 9, 10)
			return b
		}, true},
		{"made-up history", func() federation.BackfillBatch {
			b := clone()
			b.Records = nil
			for _, r := range madeUp.recs {
				b.Records = append(b.Records, recJSON(r))
			}
			return b
		}, true},
		{"checkpoint by the rogue", func() federation.BackfillBatch {
			b := clone()
			b.Checkpoints = []json.RawMessage{rogue.checkpoint(t, replayed.recs[n-1], h.Clock.Ms())}
			return b
		}, true},
		{"unvouched extra record", func() federation.BackfillBatch {
			b := clone()
			b.Records = append(b.Records, recJSON(unvouched))
			return b
		}, false},
	}
	for i, mode := range modes {
		t.Run(mode.name, func(t *testing.T) {
			batch := mode.tamper()
			rogue.serveBackfill(func(req rawBackfillRequest) federation.BackfillBatch {
				if req.RoomID != id || req.AfterSeq != 0 {
					return federation.BackfillBatch{Records: []json.RawMessage{}}
				}
				return batch
			})
			asked := rogue.asked.Load()
			l := fedtest.Start(t, fmt.Sprintf("L%d", i), t.TempDir(), h.Clock, 0, fedtest.Options{Rates: noRates, Mirror: true})
			defer l.Stop()
			fedtest.Connect(t, l, h)
			rogue.connect(t, l)
			testwait.Until(t, 10*time.Second, "L learns the room from H", func() bool {
				_, ok := l.Index.Room(id, l.Clock.Ms())
				return ok
			})
			testwait.Until(t, 20*time.Second, "L sees the rogue first among its peers", func() bool {
				ps := l.Fed.Peers()
				return len(ps) >= 2 && ps[0].PeerID == rogue.id.String() && ps[0].Connected
			})
			// The host is down, so L cannot verify its binding: "all" would
			// not take its rooms; the operator names the host.
			if _, err := l.Mir.AddTarget(mirror.TargetHost, string(hostKey)); err != nil {
				t.Fatal(err)
			}
			lr := func() *mirror.Room { r, _ := l.Mir.Room(id, ""); return r }
			testwait.Until(t, 20*time.Second, "L catches up", func() bool { r := lr(); return r != nil && r.Tip() == n })
			if rogue.asked.Load() == asked {
				t.Fatal("the rogue was never asked")
			}
			st := l.Mir.Stats()
			if mode.refused && st.Refused.Load() == 0 {
				t.Fatal("L accepted a tampered batch")
			}
			if !mode.refused && st.Refused.Load() != 0 {
				t.Fatalf("L refused %d batches", st.Refused.Load())
			}
			if st.Backfilled.Load() != n {
				t.Errorf("L backfilled %d records", st.Backfilled.Load())
			}
			// Verified records are stored by the group committer, so
			// reads may trail the tip for a moment.
			var got []json.RawMessage
			testwait.Until(t, 20*time.Second, "L stored every verified record", func() bool {
				var err error
				got, _, err = lr().Events(0, 1000)
				if err != nil {
					t.Fatal(err)
				}
				return len(got) == n
			})
			for i := range honest {
				if !bytes.Equal(got[i], honest[i]) {
					t.Fatalf("L's record %d differs from the host's", i+1)
				}
			}
			if info := lr().Info(); info.Faulty || info.VerifiedSeq != n || len(l.Mir.EvidenceList()) != 0 || l.Mir.Faulty(hostKey) {
				t.Fatalf("a rogue peer framed the host: %+v", info)
			}
		})
	}
}

// ---------------------------------------------------------------------------
// 3. Witness announcements.

// Mirror B announces its tlog-witness for the hosts it mirrors; A's mirror
// hands B's announcement, which names A's log, to its listener (the
// host's witness submitter). Hostile announcements are refused at the
// topic: one signed by a key other than the publishing peer's, one whose
// vkey is not the signer's key, one that is not an announcement; one
// naming only other logs is not handed on.
func TestWitnessAnnouncements(t *testing.T) {
	peers := fedtest.Network(t, 2, nil, fedtest.Options{Rates: noRates, Mirror: true,
		MirrorConfig: mirror.Config{AnnounceWitnessEvery: 100 * time.Millisecond}})
	a, b := peers[0], peers[1]
	got := make(chan assertion.Witness, 64)
	a.Mir.OnWitness(func(w assertion.Witness) {
		select {
		case got <- w:
		default:
		}
	})
	if _, err := b.Mir.AddTarget(mirror.TargetAll, ""); err != nil {
		t.Fatal(err)
	}
	alice := adptest.NewAgent("alice")
	id := fedtest.CreateRoom(t, a, alice, room.Public, "witnessed")
	fedtest.MustSubmit(t, a, alice, "message.create", id, msg("one"))
	testwait.Until(t, 10*time.Second, "B mirrors the room", func() bool {
		_, ok := b.Mir.Room(id, "")
		return ok
	})
	own := tlogproof.Origin(a.Node.Host())
	var w assertion.Witness
	select {
	case w = <-got:
	case <-time.After(20 * time.Second):
		t.Fatal("A was never told of B's witness")
	}
	if w.Witness != b.Fed.HostKey() || w.VKey != b.Mir.Witness().VerifierKey() || w.URL != b.Node.Origin()+mirror.WitnessPath || !slices.Contains(w.Logs, own) {
		t.Fatalf("announcement %+v (A's log %s)", w, own)
	}

	// Hostile announcements, through the topic's validator as published
	// by X (key xKey): one signed by another key Y, one whose vkey is Y's,
	// one that is not an announcement; each is refused.
	xKey, yKey := seedKey(t, "announcer-x"), seedKey(t, "announcer-y")
	peerOf := func(k ed25519.PrivateKey) peer.ID {
		sk, err := crypto.UnmarshalEd25519PrivateKey(k)
		if err != nil {
			t.Fatal(err)
		}
		id, err := peer.IDFromPrivateKey(sk)
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	vkeyOf := func(k ed25519.PrivateKey) string {
		return tlogwitness.CosignatureVerifierKey("x.test/adp-witness", k.Public().(ed25519.PublicKey))
	}
	sign := func(k ed25519.PrivateKey, payload any) []byte {
		raw, err := assertion.NewSigner(k).Sign(assertion.TypeWitness, payload, a.Clock.Ms())
		if err != nil {
			t.Fatal(err)
		}
		return raw
	}
	xID, yID := identity.AgentIDFromKey(xKey.Public().(ed25519.PublicKey)), identity.AgentIDFromKey(yKey.Public().(ed25519.PublicKey))
	cp, _ := assertion.NewSigner(xKey).Sign(assertion.TypeCheckpoint, assertion.Checkpoint{Host: xID, RoomID: id, Seq: 1, Hash: "AAAA"}, a.Clock.Ms())
	for name, m := range map[string][]byte{
		"signed by another key":  sign(yKey, assertion.Witness{Witness: yID, VKey: vkeyOf(yKey), URL: "http://127.0.0.1:1/v1/witness", Logs: []string{own}}),
		"another key's vkey":     sign(xKey, assertion.Witness{Witness: xID, VKey: vkeyOf(yKey), URL: "http://127.0.0.1:1/v1/witness", Logs: []string{own}}),
		"not an announcement":    cp,
		"a tampered signed body": bytes.Replace(sign(xKey, assertion.Witness{Witness: xID, VKey: vkeyOf(xKey), URL: "http://127.0.0.1:1/v1/witness", Logs: []string{own}}), []byte("127.0.0.1:1"), []byte("127.0.0.1:2"), 1),
	} {
		if a.Mir.ValidateWitnessForTest(peerOf(xKey), m) {
			t.Errorf("%s: accepted", name)
		}
	}
	good := sign(xKey, assertion.Witness{Witness: xID, VKey: vkeyOf(xKey), URL: "http://127.0.0.1:2/v1/witness", Logs: []string{own}})
	if !a.Mir.ValidateWitnessForTest(peerOf(xKey), good) {
		t.Fatal("a well-formed announcement by its own peer is refused")
	}
	// Well-formed: one naming only other logs is not handed on; one
	// naming A's log is.
	for len(got) > 0 {
		<-got
	}
	if err := a.Mir.DeliverWitnessForTest(sign(xKey, assertion.Witness{Witness: xID, VKey: vkeyOf(xKey), URL: "http://127.0.0.1:1/v1/witness", Logs: []string{"elsewhere.test/adp-log"}})); err != nil {
		t.Fatal(err)
	}
	if err := a.Mir.DeliverWitnessForTest(good); err != nil {
		t.Fatal(err)
	}
	for {
		w := <-got // delivery is synchronous
		if w.Witness != xID {
			continue // B's, again
		}
		if w.URL != "http://127.0.0.1:2/v1/witness" {
			t.Fatalf("handed on an announcement that does not name A's log: %+v", w)
		}
		return
	}
}
