package archive

import (
	"crypto/ed25519"
	"strings"
	"testing"

	"github.com/adpnode/adpnode/adp/identity"
	"github.com/adpnode/adpnode/adp/record"
	"github.com/adpnode/adpnode/adp/tlogproof"
	"github.com/adpnode/adpnode/adp/tlogwitness"
)

// provedLog is a host log whose last leaf is an archive's last record,
// after leaves of other rooms, signed with key under origin.
type provedLog struct {
	pub    ed25519.PublicKey
	key    ed25519.PrivateKey
	origin string
}

// proof returns extra.host_log for the last of recs, the log holding two
// other leaves and then recs.
func (l provedLog) proof(t *testing.T, recs []*record.Record) *tlogproof.File {
	t.Helper()
	all := [][32]byte{{1}, {2}}
	for _, r := range recs {
		leaf, _ := tlogproof.RecordLeaf(r.Hash)
		all = append(all, leaf)
	}
	n := len(all)
	signed, err := tlogproof.Sign(tlogproof.Checkpoint{Origin: l.origin, Size: uint64(n), Hash: tlogproof.Root(all)}, l.key)
	if err != nil {
		t.Fatal(err)
	}
	vkey, _ := tlogproof.VerifierKey(l.origin, l.pub)
	// The proof of the last leaf: the roots of the perfect subtrees to its
	// left, nearest first.
	var hs []string
	for lo, size := 0, 1<<20; size > 0; size /= 2 {
		if lo+size <= n-1 {
			r := tlogproof.Root(all[lo : lo+size])
			hs = append([]string{tlogproof.EncodeHashes([][]byte{r[:]})[0]}, hs...)
			lo += size
		}
	}
	return &tlogproof.File{Type: tlogproof.FileType, VerifierKey: vkey, RecordProof: tlogproof.RecordProof{
		RecordHash: recs[len(recs)-1].Hash, Checkpoint: string(signed),
		Inclusion: tlogproof.InclusionProof{LeafIndex: uint64(n - 1), TreeSize: uint64(n), Hashes: hs}}}
}

// cosign adds a witness's cosignature/v1 line at unix seconds to f.
func cosign(t *testing.T, f *tlogproof.File, unix uint64) {
	t.Helper()
	_, wk, _ := ed25519.GenerateKey(nil)
	w, _ := tlogwitness.NewCosigner("w.test/adp-witness", wk)
	body, _, _ := strings.Cut(f.Checkpoint, "\n\n")
	f.Checkpoint += w.Cosign([]byte(body+"\n"), unix)
	f.Witnesses = append(f.Witnesses, w.VerifierKey())
}

// archiveOf is the JSONL-form archive (no room resource) of recs,
// generated at genAt, served by host 127.0.0.1:8080.
func archiveOf(h *history, recs []*record.Record, genAt int64) *Archive {
	m := NewManifest("127.0.0.1:8080", "http://127.0.0.1:8080/v1/rooms/"+roomID, recs, genAt)
	a := &Archive{Manifest: m, Packs: PackDocs(h.st.Imports)}
	for _, r := range recs {
		b, _ := r.MarshalJSON()
		a.Records = append(a.Records, b)
	}
	return a
}

// TestCompleteness protects: an archive is proven complete only when the
// host log's signed proof covers its last record, the log is the origin
// manifest.host names, the final state is terminal and the room ended no
// later than the proof's checkpoint is known to be. An archive with its
// tail dropped (the close record and after, the manifest recomputed, a
// genuine proof of its new last record) still verifies as a chain but is
// unproven, whatever generated_at it claims and whatever witness it adds;
// a room that ended by its end_time is never proven complete.
func TestCompleteness(t *testing.T) {
	h := generate(t, 60)
	pub, key, _ := ed25519.GenerateKey(nil)
	lg := provedLog{pub, key, tlogproof.Origin("127.0.0.1:8080")}
	endTime := h.st.EndTime
	verify := func(a *Archive, withKey bool) Completeness {
		t.Helper()
		if withKey {
			a.Manifest.Extra["host_key"] = string(identity.AgentIDFromKey(pub))
		}
		rep, err := Verify(a, Options{})
		if err != nil {
			t.Fatalf("the chain does not verify: %v", err)
		}
		return rep.Complete
	}
	wantUnproven := func(name string, c Completeness, reason string) {
		t.Helper()
		if c.Proven() || !strings.Contains(strings.Join(c.Unproven, "; "), reason) {
			t.Errorf("%s: unproven %q, want a reason containing %q", name, c.Unproven, reason)
		}
	}

	// The closed room, whole, with its proof: proven, with or without
	// extra.host_key.
	full := archiveOf(h, h.recs, h.now)
	full.Manifest.Extra["host_log"] = lg.proof(t, h.recs)
	if c := verify(full, true); !c.Proven() || c.EndedAt != h.recs[len(h.recs)-1].ReceivedAt || c.Origin != lg.origin {
		t.Fatalf("whole closed room: %+v", c)
	}
	// The same without the proof: unproven.
	wantUnproven("no host_log", verify(archiveOf(h, h.recs, h.now), false), "no host log proof")
	// The proof of another host's log (the same key, another origin).
	other := archiveOf(h, h.recs, h.now)
	other.Manifest.Extra["host_log"] = provedLog{pub, key, tlogproof.Origin("other.example")}.proof(t, h.recs)
	wantUnproven("another origin", verify(other, true), "not the origin the signed log names")

	// The tail dropped: the close record and the last ten records.
	cut := h.recs[:len(h.recs)-11]
	for _, genAt := range []int64{cut[len(cut)-1].ReceivedAt, endTime + 1, endTime + 1_000_000} {
		tr := archiveOf(h, cut, genAt)
		tr.Manifest.Extra["host_log"] = lg.proof(t, cut)
		c := verify(tr, true)
		if genAt < endTime {
			wantUnproven("truncated, generated before end_time", c, "not ended or cancelled")
		} else {
			wantUnproven("truncated, generated after end_time", c, "records after it are not ruled out")
		}
		// A witness of the cutter's own, cosigning after end_time, proves
		// nothing more.
		cosign(t, tr.Manifest.Extra["host_log"].(*tlogproof.File), uint64(endTime/1000+60))
		if c := verify(tr, true); c.Proven() {
			t.Errorf("truncated, with a witness dated after end_time, generated at %d: proven", genAt)
		}
	}

	// A room that ended by its end_time (no close record) is not proven
	// complete, witnessed after the end or not.
	open := h.recs[:len(h.recs)-1]
	timed := archiveOf(h, open, endTime+5_000)
	f := lg.proof(t, open)
	timed.Manifest.Extra["host_log"] = f
	wantUnproven("time-ended", verify(timed, true), "ended by its end_time")
	cosign(t, f, uint64(endTime/1000+2))
	if c := verify(timed, true); c.Proven() || c.EndedAt != endTime || c.ProvenAt != open[len(open)-1].ReceivedAt {
		t.Fatalf("time-ended, witnessed after the end: %+v", c)
	}
}
