package archive

import (
	"fmt"

	"github.com/adpnode/adpnode/adp/record"
	"github.com/adpnode/adpnode/adp/room"
	"github.com/adpnode/adpnode/adp/tlogproof"
)

// Completeness: a verified chain shows that its records are genuine and
// in order, not that they are the whole room. Anyone can drop the tail
// of an archive and recompute the manifest's digests; the records left
// still verify. An archive is proven complete when the host's signed log
// vouches for its end:
//
//   - extra.host_log proves the archive's last record in the host log
//     (checked by verifyHostLog: the checkpoint signed by the log key,
//     extra.host_key when given, every listed witness's line);
//   - the checkpoint names the log of manifest.host (tlogproof.Origin), so
//     manifest.host and url are the origin the signed log names;
//   - the replayed final state is terminal (ended or cancelled);
//   - the room ended no later than the proof's checkpoint is known to be:
//     the checkpoint covers the archive's last record, so it is at least
//     as late as that record's received_at, and nothing in the archive
//     shows it later. A room closed or cancelled by its last record ended
//     at that record. A room that ended by its end_time, after its last
//     record, is never proven complete: nothing marks its end in the log,
//     and a proof of an earlier record against a later checkpoint is as
//     genuine as the proof of its real last record. Witnesses'
//     cosignature times do not count: the witness keys an archive lists
//     are the archive's word, so anyone cutting its tail can add a
//     cosignature of a key of their own, dated after the end.

// Completeness is what an archive proves about being the whole room.
type Completeness struct {
	// Unproven lists why the archive is not proven complete; empty when
	// it is.
	Unproven []string
	// EndedAt is when the replayed room ended (Unix ms; 0 if it did not).
	EndedAt int64
	// ProvenAt is the latest time the proof's checkpoint is known to be
	// at least as late as: the proven record's received_at (Unix ms; 0
	// without extra.host_log).
	ProvenAt int64
	// Origin and Size are the proof's checkpoint's (empty without
	// extra.host_log).
	Origin string
	Size   uint64
}

// Proven reports whether the archive is proven complete.
func (c Completeness) Proven() bool { return len(c.Unproven) == 0 }

func completeness(m *Manifest, st *room.State, status room.Status, last *record.Record, cp *tlogproof.Checkpoint) Completeness {
	var c Completeness
	terminal := status.Terminal()
	switch {
	case st.Cancelled:
		c.EndedAt = last.ReceivedAt // the room.cancel record: nothing follows it
	case terminal:
		c.EndedAt = st.EndedAt()
	}
	if !terminal {
		c.Unproven = append(c.Unproven, fmt.Sprintf("the final state is %s, not ended or cancelled", status))
	}
	if cp == nil {
		c.Unproven = append(c.Unproven, "no host log proof of the last record (extra.host_log)")
		return c
	}
	c.Origin, c.Size = cp.Origin, cp.Size
	if want := tlogproof.Origin(m.Host); cp.Origin != want {
		c.Unproven = append(c.Unproven, fmt.Sprintf("manifest.host %q (url %s) is not the origin the signed log names: its checkpoint is of log %q, not %q",
			m.Host, m.URL, cp.Origin, want))
	}
	c.ProvenAt = last.ReceivedAt
	if terminal && c.EndedAt > c.ProvenAt {
		c.Unproven = append(c.Unproven, fmt.Sprintf("the room ended by its end_time (Unix ms %d), after the proof's checkpoint is known to be (its last record, Unix ms %d): records after it are not ruled out",
			c.EndedAt, c.ProvenAt))
	}
	return c
}
