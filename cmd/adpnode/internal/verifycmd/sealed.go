package verifycmd

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/adpnode/adpnode/adp/archive"
	"github.com/adpnode/adpnode/adp/identity"
	"github.com/adpnode/adpnode/adp/receipt"
	"github.com/adpnode/adpnode/adp/record"
	"github.com/adpnode/adpnode/adp/rounds"
	"github.com/adpnode/adpnode/adp/seal"
)

// Member is who opens a member-only room's sealed events: an Agent ID and
// its sealing keys. The zero value opens nothing.
type Member struct {
	ID   identity.AgentID
	Find seal.KeyFinder
}

// verifySealed reports the sealed records of a verified archive. The chain
// covers their ciphertext, so without a member's keys they are counted as
// not checked. With them (verify --key) each is opened with seal.Reader,
// the code the client reads with; an opened event must pass the room's
// rules at its seq, and an opened deal receipt receipt.CheckIn over the
// rounds of the events in the clear and opened. It returns false when an
// opened event is flagged or a sealed receipt fails.
func verifySealed(w io.Writer, roomID string, raws [][]byte, packs []archive.PackDoc, m Member) bool {
	recs := make([]*record.Record, 0, len(raws))
	sealed := 0
	for _, raw := range raws {
		rec, env, err := record.Parse(raw)
		if err != nil {
			return false // the chain verified: not reached
		}
		recs = append(recs, rec)
		if env.Event.Type == "message.create" && isSealed(env.Event.Payload) {
			sealed++
		}
	}
	if m.Find == nil {
		if sealed > 0 {
			fmt.Fprintf(w, "   not checked: %d sealed records (a member-only room; a member opens them with verify --key)\n", sealed)
		}
		return true
	}
	rd := seal.NewReader(roomID, m.ID, packSource(packs))
	rd.Fold(recs)
	// Every epoch key wrapped for this member must open with the sealing
	// key it names: a bad one is the signer's doing (seal.BadWrap).
	ok := true
	for _, b := range rd.CheckWraps(m.Find) {
		ok = false
		fmt.Fprintf(w, "FAIL bad epoch key wrap in epoch %d: the wrap for %s in the seal.epoch at seq %d, signed by %s, %s\n",
			b.Epoch, b.Member, b.Seq, b.Wrapper, b.Reason)
	}
	if sealed == 0 {
		return ok
	}
	evs, unopened := seal.Events(recs, rd, m.Find)
	res := rounds.Derive(turnsOf(evs))
	n, bad := 0, 0
	for _, e := range evs {
		if !e.Sealed {
			continue
		}
		n++
		if e.Flag != nil {
			bad++
			ok = false
			fmt.Fprintf(w, "FAIL sealed event at seq %d (event %s, by %s): %v\n", e.Seq, e.Hash, e.Actor, e.Flag)
			continue
		}
		if e.Type != receipt.EventType {
			continue
		}
		r, err := receipt.CheckIn(roomID, e.Seq, res, e.Payload)
		if err != nil {
			bad++
			ok = false
			fmt.Fprintf(w, "FAIL sealed deal receipt at seq %d (event %s, by %s): %v\n", e.Seq, e.Hash, e.Actor, err)
			continue
		}
		fmt.Fprintf(w, "   sealed deal receipt at seq %d: OK, co-signed by %s and %s, terms hash %s\n", e.Seq, r.PartyA, r.PartyB, r.TermsHash)
	}
	fmt.Fprintf(w, "   opened as %s: %d of %d sealed records (%d events, %d failing); %d not opened (epochs not given to this member, or with a bad wrap)\n",
		m.ID, sealed-unopened, sealed, n, bad, unopened)
	return ok
}

func isSealed(payload []byte) bool {
	var p struct {
		ContentType string `json:"content_type"`
	}
	return json.Unmarshal(payload, &p) == nil && p.ContentType == seal.ContentType
}

// packSource serves the archive's external pack documents to the reader's
// replay (the archive's verification has already checked them).
type packSource []archive.PackDoc

func (ps packSource) ExternalPack(uri, digest string) ([]byte, error) {
	for _, p := range ps {
		if p.Pack == uri && p.Digest == digest {
			return []byte(p.Content), nil
		}
	}
	return nil, fmt.Errorf("the archive does not carry pack %s", uri)
}
