package evidence_test

import (
	"crypto/ed25519"
	"encoding/json"
	"strings"
	"testing"

	"github.com/adpnode/adpnode/adp"
	"github.com/adpnode/adpnode/adp/assertion"
	"github.com/adpnode/adpnode/adp/evidence"
	"github.com/adpnode/adpnode/adp/identity"
	"github.com/adpnode/adpnode/adp/record"
)

const (
	t0     int64 = 1_780_000_000_000
	roomID       = "d8ftedhpqhsusbg001tg"
)

func key(t testing.TB, name string) ed25519.PrivateKey {
	t.Helper()
	seed := make([]byte, 32)
	copy(seed, name)
	k, err := identity.KeyFromSeed(seed)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func idOf(k ed25519.PrivateKey) identity.AgentID {
	return identity.AgentIDFromKey(k.Public().(ed25519.PublicKey))
}

// world is a host with a room whose chain is: room.create by the creator,
// then n messages by the creator, then (if bad) a message by a non-member,
// which the rules reject.
type world struct {
	host *assertion.Signer
	recs []*record.Record
	raws []json.RawMessage
}

func newWorld(t testing.TB, n int, bad bool) *world {
	t.Helper()
	w := &world{host: assertion.NewSigner(key(t, "host"))}
	creator, stranger := key(t, "creator"), key(t, "stranger")
	nonce := int64(0)
	add := func(k ed25519.PrivateKey, typ string, payload string) {
		nonce++
		now := t0 + nonce
		ev := identity.Event{Protocol: adp.Protocol, Type: typ, Actor: idOf(k), CreatedAt: now, Nonce: nonce, Payload: json.RawMessage(payload)}
		if typ != "room.create" {
			last := w.recs[len(w.recs)-1]
			id, seq, hash := roomID, last.Seq, last.Hash
			ev.RoomID, ev.BaseSeq, ev.BaseHash = &id, &seq, &hash
		}
		env, err := identity.Sign(k, ev)
		if err != nil {
			t.Fatal(err)
		}
		pre := ""
		if len(w.recs) > 0 {
			pre = w.recs[len(w.recs)-1].Hash
		}
		r := record.New(roomID, int64(len(w.recs)+1), pre, env, now)
		b, _ := r.MarshalJSON()
		w.recs, w.raws = append(w.recs, r), append(w.raws, b)
	}
	add(creator, "room.create", `{"end_time":`+itoa(t0+3_600_000)+`,"start_time":`+itoa(t0)+`,"topic":"Review strategy","visibility":"public"}`)
	for i := 0; i < n; i++ {
		add(creator, "message.create", `{"content":"hello","content_type":"text/plain"}`)
	}
	if bad {
		add(stranger, "message.create", `{"content":"let me in","content_type":"text/plain"}`)
	}
	return w
}

func itoa(n int64) string { b, _ := json.Marshal(n); return string(b) }

// checkpoint signs a checkpoint of seq with hash (the record's if empty).
func (w *world) checkpoint(t testing.TB, seq int64, hash string) json.RawMessage {
	t.Helper()
	if hash == "" {
		hash = w.recs[seq-1].Hash
	}
	raw, err := w.host.Sign(assertion.TypeCheckpoint, assertion.Checkpoint{Host: w.host.HostKey(), RoomID: roomID, Seq: seq, Hash: hash, ReceivedAt: t0}, t0+100)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

func (w *world) evidence(kind string, seq int64, cps []json.RawMessage, recs []json.RawMessage) *evidence.Evidence {
	return &evidence.Evidence{Type: evidence.Type, Kind: kind, Host: w.host.HostKey(), RoomID: roomID, Seq: seq,
		Reason: "test", DetectedAt: t0 + 200, Checkpoints: cps, Records: recs}
}

var otherHash = identity.EncodeB64(make([]byte, 32))

// valid returns one valid piece of evidence of each shape.
func valid(t testing.TB) map[string]*evidence.Evidence {
	w := newWorld(t, 2, false)
	bad := newWorld(t, 1, true)
	conflict := newWorld(t, 2, false)
	// A fork right after seq 2: another record 3 whose pre_hash names
	// another record at 2 (built by a host that signed a second chain).
	fork := conflict.recs[2]
	forged := *fork
	forged.PreHash = otherHash
	forged.Hash = record.ComputeHash(forged.RoomID, forged.Seq, forged.PreHash, mustEnv(t, forged.Envelope).Hash, forged.ReceivedAt)
	forgedRaw, _ := forged.MarshalJSON()
	withConflict := conflict.evidence(evidence.KindEquivocation, 2, []json.RawMessage{conflict.checkpoint(t, 2, ""), conflict.checkpoint(t, 3, forged.Hash)}, conflict.raws[1:2])
	withConflict.Conflict = []json.RawMessage{forgedRaw}
	return map[string]*evidence.Evidence{
		"equivocation, checkpoints only": w.evidence(evidence.KindEquivocation, 2, []json.RawMessage{w.checkpoint(t, 2, ""), w.checkpoint(t, 2, otherHash)}, nil),
		"equivocation with records":      w.evidence(evidence.KindEquivocation, 2, []json.RawMessage{w.checkpoint(t, 3, ""), w.checkpoint(t, 2, otherHash)}, w.raws[1:3]),
		"equivocation with a conflict":   withConflict,
		"invalid record":                 bad.evidence(evidence.KindInvalidRecord, 3, []json.RawMessage{bad.checkpoint(t, 3, "")}, bad.raws),
	}
}

func mustEnv(t testing.TB, raw []byte) *identity.Envelope {
	env, err := identity.OpenEnvelope(raw)
	if err != nil {
		t.Fatal(err)
	}
	return env
}

func TestVerifyAccepts(t *testing.T) {
	for name, ev := range valid(t) {
		if err := ev.Verify(); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		// It survives the wire: marshal, strict parse, verify.
		b, err := json.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		got, err := evidence.Parse(b)
		if err != nil {
			t.Fatalf("%s: Parse: %v", name, err)
		}
		if err := got.Verify(); err != nil {
			t.Errorf("%s after a round trip: %v", name, err)
		}
	}
}

// TestVerifyRefuses: evidence that proves nothing against the host.
func TestVerifyRefuses(t *testing.T) {
	w := newWorld(t, 2, false)
	bad := newWorld(t, 1, true)
	other := assertion.NewSigner(key(t, "other host"))
	foreign, err := other.Sign(assertion.TypeCheckpoint, assertion.Checkpoint{Host: other.HostKey(), RoomID: roomID, Seq: 2, Hash: otherHash}, t0)
	if err != nil {
		t.Fatal(err)
	}
	eq := func(cps ...json.RawMessage) *evidence.Evidence {
		return w.evidence(evidence.KindEquivocation, 2, cps, nil)
	}
	wrongType := eq(w.checkpoint(t, 2, ""), w.checkpoint(t, 2, otherHash))
	wrongType.Type = "adp.gossip"
	unknownKind := eq(w.checkpoint(t, 2, ""), w.checkpoint(t, 2, otherHash))
	unknownKind.Kind = "rudeness"
	for name, ev := range map[string]*evidence.Evidence{
		"not evidence":                 wrongType,
		"unknown kind":                 unknownKind,
		"no checkpoint":                eq(),
		"one checkpoint":               eq(w.checkpoint(t, 2, "")),
		"checkpoints agree":            eq(w.checkpoint(t, 2, ""), w.checkpoint(t, 2, "")),
		"checkpoints at two seqs":      eq(w.checkpoint(t, 2, ""), w.checkpoint(t, 3, "")),
		"another host's checkpoint":    eq(w.checkpoint(t, 2, ""), foreign),
		"not a checkpoint":             eq(w.checkpoint(t, 2, ""), w.raws[1]),
		"records not vouched":          w.evidence(evidence.KindEquivocation, 2, []json.RawMessage{w.checkpoint(t, 2, otherHash), w.checkpoint(t, 2, "")}, w.raws[1:2]),
		"records do not chain":         w.evidence(evidence.KindEquivocation, 1, []json.RawMessage{w.checkpoint(t, 3, ""), w.checkpoint(t, 1, otherHash)}, []json.RawMessage{w.raws[0], w.raws[2]}),
		"valid record accused":         w.evidence(evidence.KindInvalidRecord, 3, []json.RawMessage{w.checkpoint(t, 3, "")}, w.raws),
		"accused record not the last":  bad.evidence(evidence.KindInvalidRecord, 3, []json.RawMessage{bad.checkpoint(t, 2, "")}, bad.raws[:2]),
		"chain not from seq 1":         bad.evidence(evidence.KindInvalidRecord, 3, []json.RawMessage{bad.checkpoint(t, 3, "")}, bad.raws[1:]),
		"checkpoint of another record": bad.evidence(evidence.KindInvalidRecord, 3, []json.RawMessage{bad.checkpoint(t, 3, otherHash)}, bad.raws),
	} {
		if err := ev.Verify(); err == nil {
			t.Errorf("%s: verified", name)
		}
	}
}

func TestParseRefuses(t *testing.T) {
	ev := valid(t)["equivocation, checkpoints only"]
	b, _ := json.Marshal(ev)
	s := string(b)
	for name, in := range map[string]string{
		"unknown member":       strings.Replace(s, `{"type"`, `{"extra":1,"type"`, 1),
		"member in other case": strings.Replace(s, `"kind"`, `"Kind"`, 1),
		"duplicate member":     strings.Replace(s, `{"type":"adp.evidence"`, `{"type":"adp.evidence","type":"adp.evidence"`, 1),
		"trailing data":        s + `{}`,
		"not an object":        `["adp.evidence"]`,
		"seq not an integer":   strings.Replace(s, `"seq":2`, `"seq":"2"`, 1),
		"nested duplicate":     strings.Replace(s, `"checkpoints":[{`, `"checkpoints":[{"a":1,"a":2,`, 1),
		"records not an array": strings.Replace(s, `"checkpoints":[`, `"records":{},"checkpoints":[`, 1),
		"invalid UTF-8":        strings.Replace(s, `"test"`, "\"t\xffst\"", 1),
		"deeply nested":        strings.Replace(s, `"reason":"test"`, `"reason":`+strings.Repeat("[", 200)+strings.Repeat("]", 200), 1),
	} {
		if in == s {
			t.Fatalf("%s: mutation did not apply", name)
		}
		if _, err := evidence.Parse([]byte(in)); err == nil {
			t.Errorf("%s: parsed", name)
		}
	}
}

// FuzzEvidence: parsing never panics; what parses and verifies still
// verifies after a marshal → parse round trip (accepted implies verifies).
func FuzzEvidence(f *testing.F) {
	for _, ev := range valid(f) {
		b, _ := json.Marshal(ev)
		f.Add(b)
	}
	f.Add([]byte(`{"type":"adp.evidence","kind":"equivocation","checkpoints":[]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		ev, err := evidence.Parse(b)
		if err != nil {
			return
		}
		if ev.Verify() != nil {
			return
		}
		again, err := json.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		ev2, err := evidence.Parse(again)
		if err != nil {
			t.Fatalf("verified evidence does not re-parse: %v\n%s", err, again)
		}
		if err := ev2.Verify(); err != nil {
			t.Fatalf("verified evidence fails after a round trip: %v", err)
		}
	})
}
