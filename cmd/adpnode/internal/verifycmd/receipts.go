package verifycmd

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/adpnode/adpnode/adp/receipt"
	"github.com/adpnode/adpnode/adp/record"
)

// isReceipt reports whether b is one JSON object whose type is the deal
// receipt's (adpnode:deal/1.0).
func isReceipt(b []byte) bool {
	var head struct {
		Type string `json:"type"`
	}
	return json.Unmarshal(b, &head) == nil && head.Type == receipt.Type
}

// verifyReceipt checks a receipt file: strict shape and both signatures.
func verifyReceipt(w io.Writer, b []byte) bool {
	r, err := receipt.Check(b)
	if err != nil {
		fmt.Fprintf(w, "FAIL deal receipt: %v\n", err)
		return false
	}
	fmt.Fprintf(w, "OK deal receipt co-signed by %s and %s: context %s, ref %s, terms hash %s, ts %d\n",
		r.PartyA, r.PartyB, r.Context, r.Ref, r.TermsHash, r.TS)
	return true
}

// verifyArchiveReceipts checks every deal.receipt event of a verified
// archive's records, printing one line per receipt. It returns false when
// any receipt fails: the chain is sound, but a receipt in it is not a
// co-signed credential.
func verifyArchiveReceipts(w io.Writer, raws [][]byte) bool {
	ok := true
	n, bad := 0, 0
	for _, raw := range raws {
		rec, env, err := record.Parse(raw)
		if err != nil || env.Event.Type != receipt.EventType {
			continue
		}
		n++
		r, err := receipt.Check(env.Event.Payload)
		if err != nil {
			bad++
			ok = false
			fmt.Fprintf(w, "FAIL deal receipt at seq %d (event %s, by %s): %v\n", rec.Seq, env.Hash, env.Event.Actor, err)
			continue
		}
		fmt.Fprintf(w, "   deal receipt at seq %d: OK, co-signed by %s and %s, terms hash %s\n", rec.Seq, r.PartyA, r.PartyB, r.TermsHash)
	}
	if bad > 0 {
		fmt.Fprintf(w, "FAIL %d of %d deal receipts do not verify (the chain itself verifies)\n", bad, n)
	}
	return ok
}
