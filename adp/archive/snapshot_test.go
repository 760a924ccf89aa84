package archive

import (
	"bytes"
	"testing"

	"github.com/adpnode/adpnode/adp/record"
	"github.com/adpnode/adpnode/adp/room"
)

// TestSnapshotRoundTrip: a room state encoded at any point of a long mixed
// history and decoded again is the same state (equal Snapshot, equal
// Encode), and replaying the rest of the chain from it ends exactly where a
// replay from scratch ends. This is what lets a host restart from stored
// snapshots instead of replaying every record.
func TestSnapshotRoundTrip(t *testing.T) {
	n := 4_000
	if testing.Short() {
		n = 1_000
	}
	h := generate(t, n)
	want := h.st.Snapshot()
	hist := room.NewMemHistory()
	cfg := room.Config{Limits: room.DefaultLimits(), History: hist}
	st := room.New(cfg)
	cuts := 0
	for i, r := range h.recs {
		raw, _ := r.MarshalJSON()
		pr, env, err := record.Parse(raw)
		if err != nil {
			t.Fatalf("seq %d: %v", r.Seq, err)
		}
		if err := st.Apply(pr, env, nil); err != nil {
			t.Fatalf("seq %d: %v", r.Seq, err)
		}
		if i%397 == 0 || i == len(h.recs)-1 {
			enc := st.Encode()
			back, err := room.Decode(cfg, enc)
			if err != nil {
				t.Fatalf("decode at seq %d: %v", r.Seq, err)
			}
			if !bytes.Equal(back.Snapshot(), st.Snapshot()) {
				t.Fatalf("seq %d: decoded state differs:\n%s\n%s", r.Seq, back.Snapshot(), st.Snapshot())
			}
			if !bytes.Equal(back.Encode(), enc) {
				t.Fatalf("seq %d: re-encoding differs", r.Seq)
			}
			st = back
			cuts++
		}
	}
	if !bytes.Equal(st.Snapshot(), want) {
		t.Fatal("state continued from snapshots differs from the writer's state")
	}
	if cuts < 5 {
		t.Fatalf("only %d cuts", cuts)
	}
}

// TestSnapshotDecodeHostile: corrupt or foreign snapshot bytes are refused
// with an error, never a panic or a half-built state.
func TestSnapshotDecodeHostile(t *testing.T) {
	h := generate(t, 300)
	enc := h.st.Encode()
	cfg := room.Config{Limits: room.DefaultLimits()}
	for _, bad := range [][]byte{nil, []byte("{}"), []byte(`{"v":99,"id":"x","seq":3}`), enc[:len(enc)/2],
		bytes.Replace(enc, []byte(`"v":1`), []byte(`"v":2`), 1),
		bytes.Replace(enc, []byte(`"types":[`), []byte(`"types":[{"type":"x"},`), 1)} {
		if _, err := room.Decode(cfg, bad); err == nil {
			t.Errorf("decode accepted %.80q", bad)
		}
	}
}
