package verifycmd

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/adpnode/adpnode/adp/archive"
	"github.com/adpnode/adpnode/adp/receipt"
	"github.com/adpnode/adpnode/adp/record"
	"github.com/adpnode/adpnode/adp/rounds"
	"github.com/adpnode/adpnode/adp/seal"
)

// isReceipt reports whether b is one JSON object whose type is the deal
// receipt's (adpnode:deal/1.0).
func isReceipt(b []byte) bool {
	var head struct {
		Type string `json:"type"`
	}
	return json.Unmarshal(b, &head) == nil && head.Type == receipt.Type
}

// IsReceipt reports whether a file is a deal receipt (rather than an
// archive or evidence).
func IsReceipt(b []byte) bool { return isReceipt(b) }

// verifyReceipt checks a receipt file alone: strict shape and both
// signatures. Whether it counts — in the room it names, for an agreed
// round of it, between that round's two parties — takes the room's records
// (ReceiptIn), so it is reported as not checked.
func verifyReceipt(w io.Writer, b []byte) bool {
	r, err := receipt.Check(b)
	if err != nil {
		fmt.Fprintf(w, "FAIL deal receipt: %v\n", err)
		return false
	}
	fmt.Fprintf(w, "OK deal receipt signatures: signed by partyA %s and partyB %s: context %s, ref %s, terms hash %s, ts %d\n",
		r.PartyA, r.PartyB, r.Context, r.Ref, r.TermsHash, r.TS)
	fmt.Fprintf(w, "   not checked: that room %s holds an agreed round %s between these two parties (verify the receipt with --archive and the room's archive)\n",
		r.Context, r.Ref)
	return true
}

// ReceiptIn verifies a receipt file against the archive of the room it
// names: the archive's chain must verify (the kernel's §19 steps), and the
// receipt must count in that room as if posted after the archive's last
// record: receipt.CheckIn over the rounds its records give (in a
// member-only room, with those m opens). Only this receipt is judged: the
// archive's own receipts are verify's business on the archive itself. An
// archive missing later records cannot make a receipt count that would
// not count in the whole room: a round once agreed stays agreed.
func ReceiptIn(w io.Writer, rb []byte, name string, ab []byte, m Member) (ok bool, err error) {
	raws, packs, rep, err := verifyArchiveChain(ab)
	var f *archive.Failure
	if errors.As(err, &f) {
		fmt.Fprintf(w, "FAIL %s\n", f.Error())
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("%s: %w", name, err)
	}
	fmt.Fprintf(w, "OK room %s: %d records, last seq %d, last hash %s (the chain verifies)\n", rep.RoomID, rep.Records, rep.LastSeq, rep.LastHash)
	evs, unopened := roomEvents(rep.RoomID, raws, packs, m)
	r, err := receipt.CheckIn(rep.RoomID, math.MaxInt64, rounds.Derive(turnsOf(evs)), rb)
	if err != nil {
		fmt.Fprintf(w, "FAIL deal receipt in room %s: %v\n", rep.RoomID, err)
		if unopened > 0 && errors.Is(err, receipt.ErrNoRound) {
			fmt.Fprintf(w, "   %d sealed records were not opened: a member-only room's rounds need --key\n", unopened)
		}
		return false, nil
	}
	fmt.Fprintf(w, "OK deal receipt co-signed by %s and %s, the two parties of agreed round %s in room %s: terms hash %s, ts %d\n",
		r.PartyA, r.PartyB, r.Ref, rep.RoomID, r.TermsHash, r.TS)
	return true, nil
}

// verifyArchiveChain parses an archive (either form) and verifies it with
// the kernel, returning its records and pack documents.
func verifyArchiveChain(b []byte) ([][]byte, []archive.PackDoc, *archive.Report, error) {
	if t := bytes.TrimSpace(b); len(t) > 0 && bytes.Contains(t[:bytes.IndexByte(append(t, '\n'), '\n')], []byte(`"manifest"`)) {
		a, err := archive.ParseJSON(b)
		if err != nil {
			return nil, nil, nil, err
		}
		raws := make([][]byte, len(a.Records))
		for i, r := range a.Records {
			raws[i] = r
		}
		rep, err := archive.Verify(a, archive.Options{})
		return raws, a.Packs, rep, err
	}
	man, packs, raws, err := archive.ParseJSONL(b)
	if err != nil {
		return nil, nil, nil, err
	}
	rep, err := archive.VerifyRecords(man, packs, raws, archive.Options{})
	return raws, packs, rep, err
}

// roomEvents returns the custom events of a verified archive's records:
// those in the clear and, with m's keys, the sealed ones m opens.
func roomEvents(roomID string, raws [][]byte, packs []archive.PackDoc, m Member) ([]seal.Event, int) {
	recs := make([]*record.Record, 0, len(raws))
	for _, raw := range raws {
		rec, _, err := record.Parse(raw)
		if err != nil {
			return nil, 0 // the chain verified: not reached
		}
		recs = append(recs, rec)
	}
	if m.Find == nil {
		return seal.Events(recs, nil, nil)
	}
	rd := seal.NewReader(roomID, m.ID, packSource(packs))
	rd.Fold(recs)
	return seal.Events(recs, rd, m.Find)
}

// turnsOf returns the round.turn events of evs as turns (a flagged one
// ignored with its flag), as the client reads them.
func turnsOf(evs []seal.Event) []rounds.Turn {
	var out []rounds.Turn
	for _, e := range evs {
		if e.Type == rounds.EventType {
			out = append(out, rounds.NewTurn(e.Seq, e.Hash, string(e.Actor), e.CreatedAt, e.Payload, e.Flag))
		}
	}
	return out
}

// verifyArchiveReceipts checks every deal.receipt event in the clear of a
// verified archive of room roomID with receipt.CheckIn, over the rounds its
// records in the clear give, printing one line per receipt. It returns
// false when any receipt fails: the chain is sound, but a receipt in it is
// not a co-signed credential of this room.
func verifyArchiveReceipts(w io.Writer, roomID string, raws [][]byte) bool {
	evs, _ := roomEvents(roomID, raws, nil, Member{})
	res := rounds.Derive(turnsOf(evs))
	ok := true
	n, bad := 0, 0
	for _, e := range evs {
		if e.Type != receipt.EventType {
			continue
		}
		n++
		r, err := receipt.CheckIn(roomID, e.Seq, res, e.Payload)
		if err != nil {
			bad++
			ok = false
			fmt.Fprintf(w, "FAIL deal receipt at seq %d (event %s, by %s): %v\n", e.Seq, e.Hash, e.Actor, err)
			continue
		}
		fmt.Fprintf(w, "   deal receipt at seq %d: OK, co-signed by %s and %s, terms hash %s\n", e.Seq, r.PartyA, r.PartyB, r.TermsHash)
	}
	if bad > 0 {
		fmt.Fprintf(w, "FAIL %d of %d deal receipts do not verify (the chain itself verifies)\n", bad, n)
	}
	return ok
}
