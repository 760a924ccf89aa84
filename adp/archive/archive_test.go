package archive

import (
	"bufio"
	"bytes"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/adpnode/adpnode/adp"
	"github.com/adpnode/adpnode/adp/identity"
	"github.com/adpnode/adpnode/adp/record"
	"github.com/adpnode/adpnode/adp/room"
)

const roomID = "d8ftedhpqhsusbg001tg"

// history is a generated room history, built through the same kernel
// admission a host runs.
type history struct {
	st    *room.State
	recs  []*record.Record
	now   int64
	nonce int64
	keys  []ed25519.PrivateKey
}

func key(i int) ed25519.PrivateKey {
	seed := make([]byte, 32)
	copy(seed, fmt.Sprintf("agent-%d", i))
	k, _ := identity.KeyFromSeed(seed)
	return k
}

func (h *history) add(tb testing.TB, k ed25519.PrivateKey, typ string, payload any, signal bool) error {
	p, _ := json.Marshal(payload)
	canon, err := identity.Canonicalize(p)
	if err != nil {
		tb.Fatal(err)
	}
	h.nonce++
	ev := identity.Event{Protocol: adp.Protocol, Type: typ, Actor: identity.AgentIDFromKey(k.Public().(ed25519.PublicKey)),
		CreatedAt: h.now, Nonce: h.nonce, Payload: canon}
	if typ != "room.create" {
		id := roomID
		seq, hash := h.st.Head.Seq, h.st.Head.Hash
		if signal && h.st.Seq > 1 {
			// anchor signals to a random earlier record
			seq = 1 + int64(h.nonce)%h.st.Seq
			hash, _, _ = h.st.RecordHash(seq)
		}
		ev.RoomID, ev.BaseSeq, ev.BaseHash = &id, &seq, &hash
	}
	env, err := identity.Sign(k, ev)
	if err != nil {
		tb.Fatal(err)
	}
	a, err := h.st.Admit(env, h.now, nil)
	if err != nil {
		return err
	}
	rec := record.New(roomID, h.st.Seq+1, h.st.LastHash, env, h.now)
	h.st.Commit(a, rec)
	h.recs = append(h.recs, rec)
	h.now += 7
	return nil
}

// generate builds a public room with n records of mixed types: joins,
// leaves, role changes, removals, messages, reactions, polls, votes,
// findings, type definitions and updates, ending with room.close.
func generate(tb testing.TB, n int) *history {
	const t0 = 1_780_000_000_000
	h := &history{st: room.New(room.Config{Limits: room.DefaultLimits()}), now: t0}
	for i := 0; i < 40; i++ {
		h.keys = append(h.keys, key(i))
	}
	creator := h.keys[0]
	must := func(err error) {
		if err != nil {
			tb.Helper()
			tb.Fatal(err)
		}
	}
	must(h.add(tb, creator, "room.create", map[string]any{
		"topic": "generated", "visibility": "public", "start_time": h.now, "end_time": h.now + 6*24*3600*1000,
		"tags": []string{"gen"}, "types": []any{map[string]any{"use": "adp:reactions/1.0"}, map[string]any{"use": "adp:deliberation/1.0"}},
	}, false))
	rng := rand.New(rand.NewPCG(1, 2))
	for len(h.recs) < n-1 {
		k := h.keys[1+rng.IntN(len(h.keys)-1)]
		id := identity.AgentIDFromKey(k.Public().(ed25519.PublicKey))
		m, member := h.st.Member(id)
		active := member && m.Active
		var err error
		switch r := rng.IntN(100); {
		case !active:
			role := []string{"speaker", "speaker", "observer"}[rng.IntN(3)]
			err = h.add(tb, k, "room.join", map[string]any{"role": role, "perspective": fmt.Sprintf("p%d", rng.IntN(5))}, true)
		case r < 40 && m.Role != adp.RoleObserver:
			err = h.add(tb, k, "message.create", map[string]any{"content_type": "text/markdown",
				"content": fmt.Sprintf("message %d — ünïcödé ☕ <b>&</b>", len(h.recs)), "references": []string{h.recs[len(h.recs)-1].Hash}}, false)
		case r < 65:
			err = h.add(tb, k, "reaction.create", map[string]any{"event_id": h.recs[rng.IntN(len(h.recs))].Hash,
				"reaction": "agree", "score": 0.5}, true)
		case r < 70 && m.Role != adp.RoleObserver:
			err = h.add(tb, k, "poll.create", map[string]any{"poll_id": fmt.Sprintf("p%d", len(h.recs)), "question": "which?",
				"options": []any{map[string]any{"id": "a", "label": "A"}, map[string]any{"id": "b", "label": "B"}}}, false)
		case r < 78 && m.Role != adp.RoleObserver:
			err = h.add(tb, k, "poll.vote", map[string]any{"poll_event_id": h.recs[len(h.recs)-1].Hash, "option_ids": []string{"a"}}, true)
		case r < 82:
			err = h.add(tb, k, "room.leave", map[string]any{"reason": "break"}, true)
		case r < 86:
			role := []string{"speaker", "observer"}[rng.IntN(2)]
			err = h.add(tb, creator, "room.member.role.update", map[string]any{"member": id, "role": role}, true)
		case r < 88:
			err = h.add(tb, creator, "room.member.remove", map[string]any{"member": id}, true)
		case r < 89:
			err = h.add(tb, creator, "type.define", map[string]any{"type": fmt.Sprintf("gen.t%d", rng.IntN(20)), "kind": "signal",
				"title": "generated", "schema": map[string]any{"type": "object"}}, false)
		case r < 90:
			err = h.add(tb, creator, "room.update", map[string]any{"guidance": fmt.Sprintf("round %d", len(h.recs))}, false)
		default:
			err = h.add(tb, k, "reaction.create", map[string]any{"event_id": h.recs[0].Hash, "reaction": "important"}, true)
		}
		if err != nil {
			// Random choices may break a rule (e.g. max speakers); the
			// generator only keeps what the kernel admits.
			continue
		}
	}
	must(h.add(tb, creator, "room.close", map[string]any{"reason": "done"}, false))
	return h
}

func (h *history) archive(tb testing.TB) *Archive {
	m := NewManifest("127.0.0.1:8080", "http://127.0.0.1:8080/v1/rooms/"+roomID, h.recs, h.now)
	res, _ := json.Marshal(h.st.Resource(h.now, m.URL))
	a := &Archive{Manifest: m, Packs: PackDocs(h.st.Imports), Room: res}
	for _, r := range h.recs {
		b, _ := r.MarshalJSON()
		a.Records = append(a.Records, b)
	}
	return a
}

func replay(tb testing.TB, recs []*record.Record) *room.State {
	st := room.New(room.Config{Limits: room.DefaultLimits()})
	for _, r := range recs {
		raw, _ := r.MarshalJSON()
		pr, env, err := record.Parse(raw)
		if err != nil {
			tb.Fatalf("seq %d: %v", r.Seq, err)
		}
		if err := st.Apply(pr, env, nil); err != nil {
			tb.Fatalf("seq %d: %v", r.Seq, err)
		}
	}
	return st
}

// TestReplayDeterministic: a generated history of ≥ 10,000 mixed records
// replays twice to the state the writer had (§15, §19 step 3).
func TestReplayDeterministic(t *testing.T) {
	n := 10_000
	if testing.Short() {
		n = 2_000
	}
	h := generate(t, n)
	if len(h.recs) < n {
		t.Fatalf("generated %d records", len(h.recs))
	}
	counts := h.st.Counts()
	for _, typ := range []string{"room.join", "room.leave", "message.create", "reaction.create", "poll.create", "poll.vote",
		"room.member.role.update", "room.member.remove", "type.define", "room.update", "room.close"} {
		if counts[typ] == 0 {
			t.Errorf("history has no %s", typ)
		}
	}
	want := h.st.Snapshot()
	a, b := replay(t, h.recs), replay(t, h.recs)
	if !bytes.Equal(a.Snapshot(), want) || !bytes.Equal(b.Snapshot(), want) {
		t.Fatal("replayed state differs from the writer's state")
	}
	if _, err := Verify(h.archive(t), Options{}); err != nil {
		t.Fatal(err)
	}
}

// TestByteFlipCaught: flipping any one byte of a record is caught at that
// record's seq (§19 steps 2–4).
func TestByteFlipCaught(t *testing.T) {
	n := 10_000
	flips := 25
	if testing.Short() || raceEnabled {
		flips = 8
	}
	h := generate(t, n)
	a := h.archive(t)
	raws := make([][]byte, len(a.Records))
	for i, r := range a.Records {
		raws[i] = r
	}
	rng := rand.New(rand.NewPCG(3, 4))
	check := func(i, pos int, val byte) {
		t.Helper()
		orig := raws[i]
		flipped := bytes.Clone(orig)
		if flipped[pos] == val {
			return
		}
		flipped[pos] = val
		raws[i] = flipped
		defer func() { raws[i] = orig }()
		_, err := VerifyRecords(&a.Manifest, a.Packs, raws, Options{})
		var f *Failure
		if !errors.As(err, &f) {
			t.Fatalf("record %d byte %d → %q: verification passed", i+1, pos, val)
		}
		if f.Seq != int64(i+1) {
			t.Fatalf("record %d byte %d (%q→%q): failure at seq %d: %v", i+1, pos, orig[pos], val, f.Seq, f)
		}
	}
	// Random records anywhere in the chain, random bytes, random values.
	for k := 0; k < flips; k++ {
		i := rng.IntN(len(raws))
		pos := rng.IntN(len(raws[i]))
		check(i, pos, raws[i][pos]^byte(1+rng.IntN(255)))
	}
	// Every byte of a few records near the start, with a bit flip each.
	short := raws[:40]
	exhaustive := []int{0, 7, 39}
	if raceEnabled {
		exhaustive = []int{0, 39}
	}
	for _, i := range exhaustive {
		for pos := range raws[i] {
			orig := raws
			raws = short
			check(i, pos, raws[i][pos]^0x01)
			raws = orig
		}
	}
}

func TestVerifyManifestMismatch(t *testing.T) {
	h := generate(t, 200)
	cases := []struct {
		name string
		mut  func(m *Manifest)
		step int
	}{
		{"events digest", func(m *Manifest) { m.EventsSHA3 = m.LastHash }, 5},
		{"archive root", func(m *Manifest) { m.ArchiveRoot = m.LastHash }, 5},
		{"last hash", func(m *Manifest) { m.LastHash = m.EventsSHA3 }, 4},
		{"event count", func(m *Manifest) { m.EventCount++ }, 0},
		{"room id", func(m *Manifest) { m.RoomID = "d8ftedhpqhsusbg00000" }, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := h.archive(t)
			c.mut(&a.Manifest)
			_, err := Verify(a, Options{})
			var f *Failure
			if !errors.As(err, &f) || f.Step != c.step {
				t.Fatalf("got %v, want a step %d failure", err, c.step)
			}
		})
	}
}

func TestVerifyTruncatedAndReordered(t *testing.T) {
	h := generate(t, 300)
	a := h.archive(t)
	// A dropped record breaks the chain where it was.
	b := *a
	b.Records = append(append([]json.RawMessage{}, a.Records[:100]...), a.Records[101:]...)
	_, err := Verify(&b, Options{})
	var f *Failure
	if !errors.As(err, &f) || f.Seq != 101 {
		t.Fatalf("dropped record: %v", err)
	}
	// A shuffled but complete set is sorted first (§19 step 1).
	c := *a
	c.Records = append([]json.RawMessage{}, a.Records...)
	c.Records[10], c.Records[20] = c.Records[20], c.Records[10]
	if _, err := Verify(&c, Options{}); err != nil {
		t.Fatalf("shuffled archive: %v", err)
	}
}

func TestJSONLRoundTrip(t *testing.T) {
	h := generate(t, 300)
	m := NewManifest("127.0.0.1:8080", "http://127.0.0.1:8080/v1/rooms/"+roomID, h.recs, h.now)
	var buf bytes.Buffer
	w := bufio.NewWriter(&buf)
	if err := WriteJSONL(w, m, PackDocs(h.st.Imports), h.recs); err != nil {
		t.Fatal(err)
	}
	pm, packs, recs, err := ParseJSONL(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	rep, err := VerifyRecords(pm, packs, recs, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Records != int64(len(h.recs)) || rep.Status != room.StatusEnded {
		t.Fatalf("report %+v", rep)
	}
}

// BenchmarkVerifyArchive reports archive verification in records/s next
// to its ceiling measured in the same run: bare ed25519.Verify of each
// record's envelope digest on one core (the kernel is single-threaded).
func BenchmarkVerifyArchive(b *testing.B) {
	h := generate(b, 2_000)
	a := h.archive(b)
	type sig struct{ pub, msg, sig []byte }
	sigs := make([]sig, len(h.recs))
	for i, r := range h.recs {
		_, env, err := record.Parse(a.Records[i])
		if err != nil {
			b.Fatal(err)
		}
		s, _ := identity.DecodeB64Len(env.Signature, 64)
		sigs[i] = sig{env.Event.Actor.PublicKey(), env.Digest[:], s}
		_ = r
	}
	start := time.Now()
	for _, s := range sigs {
		if !ed25519.Verify(s.pub, s.msg, s.sig) {
			b.Fatal("bad signature")
		}
	}
	ceiling := float64(len(sigs)) / time.Since(start).Seconds()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := Verify(a, Options{}); err != nil {
			b.Fatal(err)
		}
	}
	rate := float64(len(a.Records)*b.N) / b.Elapsed().Seconds()
	b.ReportMetric(rate, "records/s")
	b.ReportMetric(ceiling, "ceiling_verifies/s")
	b.ReportMetric(rate/ceiling, "ratio")
}
