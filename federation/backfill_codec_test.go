package federation

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
)

// TestBackfillCodec: a batch encodes as stored (no compaction, no HTML
// escapes) and decodes to the same records, checkpoints and error; frames
// a hostile peer could send get errors, never a partial batch.
func TestBackfillCodec(t *testing.T) {
	batch := BackfillBatch{
		Records:     []json.RawMessage{[]byte(`{"seq":1,"content":"a <b> & c"}`), []byte(`{"seq":2,"s":"]},\"x"}`)},
		Checkpoints: []json.RawMessage{[]byte(`{"type":"checkpoint","seq":2}`)},
	}
	raw := batch.encode()
	if !bytes.Contains(raw, []byte(`"a <b> & c"`)) {
		t.Fatalf("records are not written as stored: %s", raw)
	}
	got, err := decodeBackfill(raw)
	if err != nil || !reflect.DeepEqual(got, batch) {
		t.Fatalf("round trip: %+v %v", got, err)
	}
	var viaJSON BackfillBatch
	if err := json.Unmarshal(raw, &viaJSON); err != nil || !reflect.DeepEqual(viaJSON, batch) {
		t.Fatalf("encoding/json reads the frame as %+v %v", viaJSON, err)
	}
	for _, c := range []struct {
		name string
		in   BackfillBatch
	}{
		{"empty", BackfillBatch{}},
		{"error only", BackfillBatch{Error: `room_not_found "x"`}},
	} {
		got, err := decodeBackfill(c.in.encode())
		if err != nil || len(got.Records) != len(c.in.Records) || got.Error != c.in.Error {
			t.Errorf("%s: %+v %v", c.name, got, err)
		}
	}
	// A newer peer's extra member is ignored.
	if got, err := decodeBackfill([]byte(`{"records":[{"a":1}],"next":5}`)); err != nil || len(got.Records) != 1 {
		t.Errorf("extra member: %+v %v", got, err)
	}
	for _, bad := range []string{
		``, `[]`, `{"records":{}}`, `{"records":[1,}`, `{"records":[{"a":1,"a":2}]}`, "{\"records\":[\"\xff\"]}",
		`{"records":[],"records":[]}`, `{"error":5}`, `{"records":[1]} x`, `{"checkpoints":"no"}`,
	} {
		if got, err := decodeBackfill([]byte(bad)); err == nil {
			t.Errorf("%q decoded as %+v", bad, got)
		}
	}
}

// FuzzDecodeBackfill: whatever a peer sends, a frame decodeBackfill
// accepts is one encoding/json reads the same way.
func FuzzDecodeBackfill(f *testing.F) {
	for _, s := range []string{`{"records":[{"a":1},{"b":"]"}],"checkpoints":[{}]}`, `{"error":"x"}`, `{"records":null}`, `{}`, `{"records":[1,2],"x":{"y":[3]}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := decodeBackfill(b)
		if err != nil {
			return
		}
		// encoding/json with member names matched exactly (a struct
		// would also take "Records" for "records"; the batch's names are
		// the lower-case ones the encoder writes).
		var members map[string]json.RawMessage
		if err := json.Unmarshal(b, &members); err != nil {
			t.Fatalf("accepted %q, encoding/json: %v", b, err)
		}
		var want BackfillBatch
		for name, to := range map[string]any{"records": &want.Records, "checkpoints": &want.Checkpoints, "error": &want.Error} {
			if v, ok := members[name]; ok {
				if err := json.Unmarshal(v, to); err != nil {
					t.Fatalf("accepted %q, encoding/json's %s: %v", b, name, err)
				}
			}
		}
		if len(got.Records) != len(want.Records) || len(got.Checkpoints) != len(want.Checkpoints) || got.Error != want.Error {
			t.Fatalf("%q: %+v, encoding/json %+v", b, got, want)
		}
		for i := range got.Records {
			if !bytes.Equal(got.Records[i], want.Records[i]) {
				t.Fatalf("%q: record %d %q, encoding/json %q", b, i, got.Records[i], want.Records[i])
			}
		}
		for i := range got.Checkpoints {
			if !bytes.Equal(got.Checkpoints[i], want.Checkpoints[i]) {
				t.Fatalf("%q: checkpoint %d %q, encoding/json %q", b, i, got.Checkpoints[i], want.Checkpoints[i])
			}
		}
	})
}

// BenchmarkBackfillCodec: one batch of 200 records of about 1 KiB, served
// and read: the hand-built frame and strict split against json.Marshal and
// json.Unmarshal of the same batch.
func BenchmarkBackfillCodec(b *testing.B) {
	rec := []byte(`{"envelope":{"event":{"actor":"did:agent:6kpsY-KcUgq-9VB7Ey7F-ZVHdq6-vnuSQh7qaRRG0iw","nonce":17,"payload":{"content":"` +
		string(bytes.Repeat([]byte("word "), 150)) + `","content_type":"text/plain"},"pre_hash":"QmFzZTY0dXJsLXByZXZpb3VzLXJlY29yZC1oYXNoMDA","room":"c3k2m8v9q1r5t7u0w2x4","ts":1796454819431,"type":"message.create"},` +
		`"hash":"QmFzZTY0dXJsLXByZXZpb3VzLXJlY29yZC1oYXNoMDA","signature":"c2lnbmF0dXJlLXNpZ25hdHVyZS1zaWduYXR1cmUtc2lnbmF0dXJlLXNpZ25hdHVyZS1zaWduYXR1cmUtc2ln"},` +
		`"hash":"QmFzZTY0dXJsLXByZXZpb3VzLXJlY29yZC1oYXNoMDA","pre_hash":"QmFzZTY0dXJsLXByZXZpb3VzLXJlY29yZC1oYXNoMDA","received_at":1796454819431,"room_id":"c3k2m8v9q1r5t7u0w2x4","seq":41}`)
	batch := BackfillBatch{Checkpoints: []json.RawMessage{[]byte(`{"type":"checkpoint"}`)}}
	for range 200 {
		batch.Records = append(batch.Records, rec)
	}
	b.Run("handbuilt", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if got, err := decodeBackfill(batch.encode()); err != nil || len(got.Records) != 200 {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			raw, _ := json.Marshal(batch)
			var got BackfillBatch
			if err := json.Unmarshal(raw, &got); err != nil || len(got.Records) != 200 {
				b.Fatal(err)
			}
		}
	})
}
