package node_test

import (
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"testing"

	"github.com/adpnode/adpnode/adp/assertion"
	"github.com/adpnode/adpnode/internal/adptest"
	"github.com/adpnode/adpnode/node"
)

func testSigner(name string) *assertion.Signer {
	seed := make([]byte, ed25519.SeedSize)
	copy(seed, "witness-test:"+name)
	return assertion.NewSigner(ed25519.NewKeyFromSeed(seed))
}

// cosignature is witness's cosignature of host's checkpoint of (room, seq, hash).
func cosignature(t *testing.T, host, witness *assertion.Signer, roomID string, seq int64, hash string, now int64) *assertion.Cosignature {
	t.Helper()
	cp, err := host.Sign(assertion.TypeCheckpoint, assertion.Checkpoint{Host: host.HostKey(), RoomID: roomID, Seq: seq, Hash: hash, ReceivedAt: now}, now)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := witness.Sign(assertion.TypeCosign, assertion.Cosign{Witness: witness.HostKey(), Checkpoint: cp}, now)
	if err != nil {
		t.Fatal(err)
	}
	c, err := assertion.OpenCosign(raw)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// The host keeps, per room and witness, the newest cosignature whose
// checkpoint names one of its records; hostile ones (another hash, a seq
// past the tip, a room it does not host) are refused; the archive manifest
// carries the host key and the cosignatures once AcceptCosignatures is
// called, and they survive a restart on the same data dir. However many
// cosignatures a witness sends, one per room is kept.
func TestHostKeepsCosignatures(t *testing.T) {
	clock := adptest.NewClock()
	h := adptest.StartHostAt(t, node.Config{DataDir: t.TempDir(), Rates: node.NoRates()}, clock)
	alice := adptest.NewAgent("alice")
	id := h.CreateRoom(t, alice, h.RoomPayload("public"))
	for i := 0; i < 3; i++ {
		h.MustPost(t, alice, id, "message.create", map[string]any{"content_type": "text/plain", "content": "hi"})
	}
	h.MustPost(t, alice, id, "room.close", map[string]any{"reason": "done"})
	host, w1, w2 := testSigner("host"), testSigner("w1"), testSigner("w2")
	hash := func(seq int64) string {
		hs, ok := h.Node.RecordHash(id, seq)
		if !ok {
			t.Fatalf("no record %d", seq)
		}
		return hs
	}
	now := clock.Ms()

	for name, c := range map[string]*assertion.Cosignature{
		"another hash":      cosignature(t, host, w1, id, 2, hash(3), now),
		"seq past the tip":  cosignature(t, host, w1, id, 99, hash(5), now),
		"room not hosted":   cosignature(t, host, w1, "00000000000000000000", 1, hash(1), now),
		"empty hash, seq 0": cosignature(t, host, w1, id, 0, "", now),
	} {
		if err := h.Node.KeepCosign(c); !errors.Is(err, node.ErrCosignNotHeld) {
			t.Errorf("%s: KeepCosign = %v, want ErrCosignNotHeld", name, err)
		}
	}
	for seq := int64(1); seq <= 5; seq++ { // w1 cosigns every record; the newest stays
		if err := h.Node.KeepCosign(cosignature(t, host, w1, id, seq, hash(seq), now)); err != nil {
			t.Fatal(err)
		}
	}
	if err := h.Node.KeepCosign(cosignature(t, host, w1, id, 2, hash(2), now)); err != nil { // older: ignored
		t.Fatal(err)
	}
	if err := h.Node.KeepCosign(cosignature(t, host, w2, id, 4, hash(4), now)); err != nil {
		t.Fatal(err)
	}

	extra := func(h *adptest.Host) map[string]any {
		t.Helper()
		a, err := h.Node.Archive(id, "")
		if err != nil {
			t.Fatal(err)
		}
		return a.Manifest.Extra
	}
	if x := extra(h); x["host_key"] != nil || x["witnesses"] != nil {
		t.Fatalf("before AcceptCosignatures the manifest extra is %v", x)
	}
	check := func(h *adptest.Host) {
		t.Helper()
		h.Node.AcceptCosignatures(host.HostKey())
		x := extra(h)
		if x["host_key"] != host.HostKey() {
			t.Fatalf("host_key %v", x["host_key"])
		}
		list, _ := x["witnesses"].([]json.RawMessage)
		seqs := map[string]int64{}
		for _, raw := range list {
			c, err := assertion.OpenCosign(raw)
			if err != nil {
				t.Fatal(err)
			}
			seqs[string(c.Witness)] = c.Checkpoint.Seq
		}
		if len(list) != 2 || seqs[string(w1.HostKey())] != 5 || seqs[string(w2.HostKey())] != 4 {
			t.Fatalf("witnesses %v (%d kept)", seqs, len(list))
		}
	}
	check(h)
	check(h.Restart(t))
}
