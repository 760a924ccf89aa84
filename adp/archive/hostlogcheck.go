package archive

import (
	"fmt"

	"golang.org/x/mod/sumdb/note"

	"github.com/adpnode/adpnode/adp"
	"github.com/adpnode/adpnode/adp/identity"
	"github.com/adpnode/adpnode/adp/record"
	"github.com/adpnode/adpnode/adp/tlogproof"
	"github.com/adpnode/adpnode/adp/tlogwitness"
)

// HostLogClaim is what a reader knows of a room independently of a host
// log proof offered for its archive: who hosts it, under which log origin,
// and its last record as the reader verified it.
type HostLogClaim struct {
	Host   identity.AgentID // the room's host key, which signs the log
	Origin string           // the host's log origin (tlogproof.Origin of the Room URL's host)
	RoomID string
	Seq    int64  // the last record's seq
	Hash   string // the last record's hash
	// Known are witness verifier keys the reader trusts on its own (its
	// own witness key, witnesses it heard announce this log); a
	// cosignature counts as known only if its key is one of them.
	Known []string
}

// HostLogCheck is what CheckHostLogProof established.
type HostLogCheck struct {
	Checkpoint tlogproof.Checkpoint
	// Witnesses are the verified cosignature/v1 lines of every key the
	// proof lists; Known counts those whose key is in HostLogClaim.Known.
	Witnesses []tlogwitness.Cosigned
	Known     int
}

// Stronger reports whether c is worth more than o as a room's proof: more
// cosignatures of known witnesses, then more verified cosignatures. A
// proof is never replaced by a weaker or equal one, so a host cannot take
// a witnessed proof back by serving an unwitnessed one.
func (c *HostLogCheck) Stronger(o *HostLogCheck) bool {
	if o == nil {
		return true
	}
	if c.Known != o.Known {
		return c.Known > o.Known
	}
	return len(c.Witnesses) > len(o.Witnesses)
}

// CheckHostLogProof checks a record proof file offered as a room's
// extra.host_log (a mirror fetches it from the host) against what the
// reader verified itself: the checkpoint is signed by the room's host key
// and names the host's log origin, the inclusion proof leads from the
// room's last record to the checkpoint's root, and every listed witness's
// cosignature line verifies (the same check Verify applies to an archive,
// so an accepted proof never makes an archive fail). The record hash
// commits to the room ID and seq; a proof that carries the record itself
// must carry that record. It never reads the host's word for which record
// is last: claim does.
func CheckHostLogProof(f tlogproof.File, claim HostLogClaim) (*HostLogCheck, error) {
	refuse := func(format string, args ...any) error {
		return adp.Reason(adp.CodeInvalidRequest, "host_log_refused", fmt.Sprintf(format, args...))
	}
	if f.Type != tlogproof.FileType {
		return nil, refuse("type is %q, not %q", f.Type, tlogproof.FileType)
	}
	if f.RecordHash != claim.Hash {
		return nil, refuse("the proof is for record %s, not the room's last record %s", f.RecordHash, claim.Hash)
	}
	cp, pub, err := tlogproof.VerifyFile(f)
	if err != nil {
		return nil, err
	}
	if got := identity.AgentIDFromKey(pub); got != claim.Host {
		return nil, refuse("the checkpoint is signed by %s, not the room's host %s", got, claim.Host)
	}
	if cp.Origin != claim.Origin {
		return nil, refuse("the checkpoint's origin is %q, not the host's log %q", cp.Origin, claim.Origin)
	}
	if len(f.Record) > 0 {
		rec, _, err := record.Parse(f.Record)
		if err != nil {
			return nil, refuse("the proof's record: %v", err)
		}
		if rec.Hash != claim.Hash || rec.Seq != claim.Seq || rec.RoomID != claim.RoomID {
			return nil, refuse("the proof carries record %s seq %d of room %s, not the room's last record", rec.Hash, rec.Seq, rec.RoomID)
		}
	}
	out := &HostLogCheck{Checkpoint: cp}
	if len(f.Witnesses) == 0 {
		return out, nil
	}
	v, _ := note.NewVerifier(f.VerifierKey) // VerifyFile parsed it
	if out.Witnesses, err = tlogwitness.VerifyCosigned([]byte(f.Checkpoint), v, f.Witnesses); err != nil {
		return nil, err
	}
	known := map[string]bool{}
	for _, k := range claim.Known {
		if cv, err := tlogwitness.NewCosignatureVerifier(k); err == nil {
			known[cv.Key()] = true
		}
	}
	for _, w := range out.Witnesses {
		if known[w.VKey] {
			out.Known++
		}
	}
	return out, nil
}
