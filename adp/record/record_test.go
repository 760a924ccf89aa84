package record_test

import (
	"bytes"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/adpnode/adpnode/adp"
	"github.com/adpnode/adpnode/adp/identity"
	"github.com/adpnode/adpnode/adp/record"
)

const roomID = "d8ftedhpqhsusbg00001"

func key(t testing.TB) (ed25519.PrivateKey, identity.AgentID) {
	t.Helper()
	k, err := identity.KeyFromSeed(bytes.Repeat([]byte{7}, 32))
	if err != nil {
		t.Fatal(err)
	}
	return k, identity.AgentIDFromKey(k.Public().(ed25519.PublicKey))
}

// chain returns n records of one room, each a signed message.create.
func chain(t testing.TB, n int) []*record.Record {
	t.Helper()
	k, id := key(t)
	var out []*record.Record
	pre := ""
	for i := 1; i <= n; i++ {
		rid := roomID
		env, err := identity.Sign(k, identity.Event{Protocol: adp.Protocol, Type: "message.create", Actor: id,
			CreatedAt: int64(1_700_000_000_000 + i), Nonce: int64(i), RoomID: &rid,
			Payload: json.RawMessage(`{"content":"hello","content_type":"text/plain"}`)})
		if err != nil {
			t.Fatal(err)
		}
		r := record.New(roomID, int64(i), pre, env, int64(1_700_000_000_100+i))
		out = append(out, r)
		pre = r.Hash
	}
	return out
}

func marshal(t testing.TB, r *record.Record) []byte {
	t.Helper()
	b, err := r.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestParseRoundTrip(t *testing.T) {
	recs := chain(t, 3)
	var prev *record.Record
	for _, r := range recs {
		b := marshal(t, r)
		got, env, err := record.Parse(b)
		if err != nil {
			t.Fatalf("seq %d: %v", r.Seq, err)
		}
		if got.Hash != r.Hash || got.PreHash != r.PreHash || got.Seq != r.Seq || got.ReceivedAt != r.ReceivedAt || !bytes.Equal(got.Envelope, r.Envelope) {
			t.Fatalf("seq %d: parsed %+v, built %+v", r.Seq, got, r)
		}
		if env.Hash != identity.EncodeB64(env.Digest[:]) {
			t.Fatalf("seq %d: envelope hash %s does not match its digest", r.Seq, env.Hash)
		}
		if again := marshal(t, got); !bytes.Equal(again, b) {
			t.Fatalf("seq %d: re-encoding differs:\n%s\n%s", r.Seq, again, b)
		}
		// The canonical form parses too and is in JCS order.
		canon := got.AppendCanonical(nil)
		if c, err := identity.Canonicalize(canon); err != nil || !bytes.Equal(c, canon) {
			t.Fatalf("seq %d: AppendCanonical is not JCS: %v", r.Seq, err)
		}
		if err := record.Link(prev, got); err != nil {
			t.Fatalf("seq %d: %v", r.Seq, err)
		}
		prev = got
	}
	// Escaped member strings decode to the same record: the fast path
	// for strings without a backslash changes nothing accepted.
	b := string(marshal(t, recs[1]))
	esc := strings.Replace(b, `"room_id":"d`, `"room_id":"\u0064`, 1)
	esc = strings.Replace(esc, `"hash":"`+recs[1].Hash[:1], `"hash":"\u00`+fmt.Sprintf("%x", recs[1].Hash[0]), 1)
	if esc == b || !strings.Contains(esc, `"hash":"\u00`) {
		t.Fatal("the escapes did not apply")
	}
	got, _, err := record.Parse([]byte(esc))
	if err != nil || got.RoomID != recs[1].RoomID || got.Hash != recs[1].Hash || got.PreHash != recs[1].PreHash {
		t.Fatalf("escaped record: %+v, %v", got, err)
	}
}

// TestParseRefuses covers hostile records: each must fail with
// invalid_event and the reason given.
func TestParseRefuses(t *testing.T) {
	recs := chain(t, 2)
	one, two := string(marshal(t, recs[0])), string(marshal(t, recs[1]))
	env := string(recs[0].Envelope)
	for _, c := range []struct{ name, in, reason string }{
		{"not JSON", `{"room_id":`, "record_json"},
		{"not an object", `[]`, "record_shape"},
		{"duplicate member", strings.Replace(one, `{"room_id":"`+roomID+`",`, `{"room_id":"`+roomID+`","room_id":"`+roomID+`",`, 1), "record_json"},
		{"unknown member", strings.Replace(one, `{"room_id"`, `{"extra":1,"room_id"`, 1), "record_shape"},
		{"member in other case", strings.Replace(one, `"seq":1`, `"Seq":1`, 1), "record_shape"},
		{"bad room ID", strings.Replace(one, roomID, "D8FTEDHPQHSUSBG00001", 1), "record_room_id"},
		{"seq zero", strings.Replace(one, `"seq":1`, `"seq":0`, 1), "record_seq"},
		{"seq a string", strings.Replace(one, `"seq":1`, `"seq":"1"`, 1), "record_seq"},
		{"seq fractional", strings.Replace(one, `"seq":1`, `"seq":1.0`, 1), "record_seq"},
		{"received_at negative", strings.Replace(one, `"received_at":1700000000101`, `"received_at":-1`, 1), "record_received_at"},
		{"pre_hash missing", strings.Replace(one, `"pre_hash":null,`, ``, 1), "record_pre_hash"},
		{"pre_hash at seq 1", strings.Replace(one, `"pre_hash":null`, `"pre_hash":"`+recs[0].Hash+`"`, 1), "record_pre_hash"},
		{"pre_hash null later", strings.Replace(two, `"pre_hash":"`+recs[0].Hash+`"`, `"pre_hash":null`, 1), "record_pre_hash"},
		{"hash not a digest", strings.Replace(one, recs[0].Hash, "abc", 1), "record_hash"},
		{"hash of another record", strings.Replace(one, `"hash":"`+recs[0].Hash, `"hash":"`+recs[1].Hash, 1), "record_hash"},
		{"received_at changed", strings.Replace(one, `"received_at":1700000000101`, `"received_at":1700000000102`, 1), "record_hash"},
		{"envelope missing", strings.Replace(one, `,"envelope":`+env, ``, 1), "record_envelope"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.in == one || c.in == two {
				t.Fatal("the mutation did not apply")
			}
			_, _, err := record.Parse([]byte(c.in))
			var e *adp.Error
			if !errors.As(err, &e) || e.Code != adp.CodeInvalidEvent || e.Data["reason"] != c.reason {
				t.Fatalf("Parse = %v, want invalid_event %s", err, c.reason)
			}
		})
	}
	// A tampered envelope fails on its own hash or signature.
	tampered := strings.Replace(one, `hello`, `hellp`, 1)
	if _, _, err := record.Parse([]byte(tampered)); err == nil {
		t.Fatal("record with a tampered envelope parsed")
	}
}

func TestLink(t *testing.T) {
	recs := chain(t, 3)
	if err := record.Link(nil, recs[0]); err != nil {
		t.Fatal(err)
	}
	other := *recs[1]
	other.RoomID = "d8ftedhpqhsusbg00002"
	wrongPre := *recs[1]
	wrongPre.PreHash = recs[2].Hash
	back := *recs[1]
	back.ReceivedAt = recs[0].ReceivedAt - 1
	for _, c := range []struct {
		name       string
		prev, next *record.Record
		seq        int64
	}{
		{"chain not starting at 1", nil, recs[1], 2},
		{"seq skipped", recs[0], recs[2], 2},
		{"pre_hash of another record", recs[0], &wrongPre, 2},
		{"other room", recs[0], &other, 2},
		{"received_at backwards", recs[0], &back, 2},
	} {
		var ce *record.ChainError
		if err := record.Link(c.prev, c.next); !errors.As(err, &ce) || ce.Seq != c.seq {
			t.Errorf("%s: Link = %v, want a chain error at seq %d", c.name, err, c.seq)
		}
	}
}

// TestParseBoundedAllocs bounds what parsing one record costs.
func TestParseBoundedAllocs(t *testing.T) {
	b := marshal(t, chain(t, 1)[0])
	allocs := testing.AllocsPerRun(20, func() {
		if _, _, err := record.Parse(b); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 40 {
		t.Fatalf("Parse allocates %v times per record", allocs)
	}
}

func BenchmarkParse(b *testing.B) {
	raw := marshal(b, chain(b, 1)[0])
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := record.Parse(raw); err != nil {
			b.Fatal(err)
		}
	}
}

// FuzzParse: whatever Parse accepts re-encodes to bytes that parse to the
// same record (parse → encode → parse), and its hash recomputes.
func FuzzParse(f *testing.F) {
	for _, r := range chain(f, 2) {
		b := marshal(f, r)
		f.Add(b)
		f.Add(r.AppendCanonical(nil))
	}
	f.Add([]byte(`{"room_id":"d8ftedhpqhsusbg00001","seq":1,"pre_hash":null,"hash":"","received_at":0,"envelope":{}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, env, err := record.Parse(b)
		if err != nil {
			if adp.CodeOf(err) == adp.CodeInternal {
				t.Fatalf("Parse error without an ADP code: %v", err)
			}
			return
		}
		if record.ComputeHash(r.RoomID, r.Seq, r.PreHash, env.Hash, r.ReceivedAt) != r.Hash {
			t.Fatal("accepted a record whose hash does not recompute")
		}
		enc := marshal(t, r)
		r2, _, err := record.Parse(enc)
		if err != nil {
			t.Fatalf("re-encoded record does not parse: %v\n%s", err, enc)
		}
		if r2.RoomID != r.RoomID || r2.Seq != r.Seq || r2.PreHash != r.PreHash || r2.Hash != r.Hash || r2.ReceivedAt != r.ReceivedAt || !bytes.Equal(r2.Envelope, r.Envelope) {
			t.Fatalf("round trip changed the record: %+v vs %+v", r, r2)
		}
	})
}
