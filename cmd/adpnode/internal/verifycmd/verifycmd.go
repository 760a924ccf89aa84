// Package verifycmd is the logic of `adpnode verify`: it checks an archive
// or a piece of evidence offline with the protocol kernel alone. Its
// dependencies are the standard library and adp/... (see deps_test.go), so
// the offline verifier never links storage or networking.
package verifycmd

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/adpnode/adpnode/adp/archive"
	"github.com/adpnode/adpnode/adp/evidence"
	"github.com/adpnode/adpnode/adp/identity"
	"github.com/adpnode/adpnode/adp/record"
	"github.com/adpnode/adpnode/adp/tlogproof"
	"github.com/adpnode/adpnode/adp/tlogwitness"
	"golang.org/x/mod/sumdb/note"
)

// File verifies an archive or evidence file, printing one OK or FAIL
// line to w. ok is false when the file does not verify; err is for files
// that are neither (unreadable, malformed).
func File(w io.Writer, name string, b []byte) (ok bool, err error) {
	return FileAs(w, name, b, Member{})
}

// FileAs is File for a member of a member-only room: with m's keys the
// sealed events of an archive are opened and checked too (Member).
func FileAs(w io.Writer, name string, b []byte, m Member) (ok bool, err error) {
	return FileOpts(w, name, b, m, Options{})
}

// Options tune FileOpts.
type Options struct {
	// AllowUnproven reads an archive whose chain verifies but which is
	// not proven complete (archive.Completeness): it is printed with a
	// warning and FileOpts returns ok with ErrUnproven. Without it such an
	// archive fails.
	AllowUnproven bool
}

// ErrUnproven comes with ok from FileOpts when Options.AllowUnproven let
// an archive that is not proven complete through.
var ErrUnproven = errors.New("the archive is not proven complete")

// FileOpts is FileAs with options.
func FileOpts(w io.Writer, name string, b []byte, m Member, o Options) (ok bool, err error) {
	if isEvidence(b) {
		return verifyEvidence(w, b), nil
	}
	if isRecordProof(b) {
		return verifyRecordProof(w, b), nil
	}
	if isReceipt(b) {
		return verifyReceipt(w, b), nil
	}
	if isMarkdown(name, b) {
		return false, errors.New("Markdown transcripts are not verifiable; use the json or jsonl archive (adpnode export --format json)") //nolint:staticcheck // ST1005: Markdown is a proper noun
	}
	var rep *archive.Report
	var raws [][]byte
	var packs []archive.PackDoc
	if t := bytes.TrimSpace(b); len(t) > 0 && bytes.Contains(t[:bytes.IndexByte(append(t, '\n'), '\n')], []byte(`"manifest"`)) {
		a, perr := archive.ParseJSON(b)
		if perr != nil {
			return false, fmt.Errorf("%s: %w", name, perr)
		}
		packs = a.Packs
		raws = make([][]byte, len(a.Records))
		for i, r := range a.Records {
			raws[i] = r
		}
		p := StartParse(raws)
		rep, err = archive.Verify(a, archive.Options{Parsed: p.Get})
		p.Stop()
	} else {
		man, pk, recs, perr := archive.ParseJSONL(b)
		if perr != nil {
			return false, fmt.Errorf("%s: %w", name, perr)
		}
		raws, packs = recs, pk
		p := StartParse(recs)
		rep, err = archive.VerifyRecords(man, pk, recs, archive.Options{Parsed: p.Get})
		p.Stop()
	}
	var f *archive.Failure
	if errors.As(err, &f) {
		fmt.Fprintf(w, "FAIL %s\n", f.Error())
		return false, nil
	}
	if err != nil {
		return false, err
	}
	unproven := !rep.Complete.Proven()
	if unproven && !o.AllowUnproven {
		fmt.Fprintf(w, "FAIL room %s: the chain verifies (%d records), but the archive is not proven complete: %s (adpnode verify --allow-unproven reads it anyway)\n",
			rep.RoomID, rep.Records, strings.Join(rep.Complete.Unproven, "; "))
		return false, nil
	}
	if unproven {
		printUnproven(w, rep.Complete)
	}
	topic := ""
	if rep.State != nil {
		topic = fmt.Sprintf(" %q", rep.State.Topic)
	}
	fmt.Fprintf(w, "OK room %s%s: %d records, last seq %d, last hash %s, %d members, %d types, status %s%s\n",
		rep.RoomID, topic, rep.Records, rep.LastSeq, rep.LastHash, rep.Members, rep.Types, rep.Status, witnessCount(len(rep.Witnesses)))
	printWitnesses(w, rep.Witnesses)
	if rep.LegacyWitnesses > 0 {
		fmt.Fprintf(w, "   not checked: %d checkpoint.cosign entries in extra.witnesses (a retired format; the host log's witnesses replace it)\n", rep.LegacyWitnesses)
	}
	fmt.Fprintf(w, "   host-asserted (not signed): host %s, url %s\n", rep.HostAsserted.Host, rep.HostAsserted.URL)
	printComplete(w, rep.Complete)
	ok = verifyArchiveReceipts(w, rep.RoomID, raws)
	if !verifySealed(w, rep.RoomID, raws, packs, m) {
		ok = false
	}
	if ok && unproven {
		return true, ErrUnproven
	}
	return ok, nil
}

// printUnproven warns, before anything else is printed, that the archive
// may not be the whole room.
func printUnproven(w io.Writer, c archive.Completeness) {
	fmt.Fprintln(w, "WARNING: UNPROVEN ARCHIVE. Its records verify, but nothing proves they are the whole room:")
	for _, why := range c.Unproven {
		fmt.Fprintf(w, "WARNING:   %s\n", why)
	}
	fmt.Fprintln(w, "WARNING: records may be missing from its end. Read it as a fragment, not as the room's record.")
}

// printComplete says what proves the archive complete.
func printComplete(w io.Writer, c archive.Completeness) {
	if !c.Proven() {
		return
	}
	fmt.Fprintf(w, "   complete: the last record is in log %s at size %d; the room ended at %s, the checkpoint is at least as late as %s\n",
		c.Origin, c.Size, fmtMs(c.EndedAt), fmtMs(c.ProvenAt))
}

func fmtMs(ms int64) string { return time.UnixMilli(ms).UTC().Format(time.RFC3339Nano) }

// isMarkdown reports whether a file is a Markdown transcript rather than a
// JSON or JSONL archive.
func isMarkdown(name string, b []byte) bool {
	if strings.HasSuffix(strings.ToLower(name), ".md") {
		return true
	}
	t := bytes.TrimSpace(b)
	return len(t) > 0 && t[0] != '{'
}

// printWitnesses lists verified cosignatures: which keys to trust is the
// reader's choice, so each is printed with its key.
func printWitnesses(w io.Writer, ws []tlogwitness.Cosigned) {
	for _, c := range ws {
		fmt.Fprintf(w, "   witness %s cosigned the log checkpoint at %s (key %s)\n",
			c.Name, time.Unix(int64(c.Time), 0).UTC().Format(time.RFC3339), c.VKey)
	}
}

func witnessCount(n int) string {
	switch n {
	case 0:
		return ""
	case 1:
		return ", 1 witness"
	}
	return fmt.Sprintf(", %d witnesses", n)
}

// isEvidence reports whether b is one JSON object whose type is
// adp.evidence.
func isEvidence(b []byte) bool {
	var head struct {
		Type string `json:"type"`
	}
	return json.Unmarshal(b, &head) == nil && head.Type == evidence.Type
}

// verifyEvidence checks a piece of evidence strictly (no duplicate or
// unknown members) and with evidence.Evidence.Verify.
func verifyEvidence(w io.Writer, b []byte) bool {
	ev, err := evidence.Parse(b)
	if err == nil {
		err = ev.Verify()
	}
	if err != nil {
		fmt.Fprintf(w, "FAIL evidence: %v\n", err)
		return false
	}
	if ev.Kind == evidence.KindSplitView {
		fmt.Fprintf(w, "OK evidence: %s by host %s (%d checkpoint notes, %d proof hashes): %s\n",
			ev.Kind, ev.Host, len(ev.Notes), len(ev.Proof), ev.Reason)
		return true
	}
	fmt.Fprintf(w, "OK evidence: %s by host %s in room %s at seq %d (%d checkpoints, %d records): %s\n",
		ev.Kind, ev.Host, ev.RoomID, ev.Seq, len(ev.Checkpoints), len(ev.Records), ev.Reason)
	return true
}

// isRecordProof reports whether b is a record proof file (GET
// /v1/log/inclusion's answer, optionally with the record added).
func isRecordProof(b []byte) bool {
	var head struct {
		Type string `json:"type"`
	}
	return json.Unmarshal(b, &head) == nil && head.Type == tlogproof.FileType
}

// verifyRecordProof checks one record against the host log offline: the
// record (when present) recomputes to the proof's record hash and its
// envelope signature verifies, the checkpoint is signed by the verifier
// key, and the inclusion proof leads to the checkpoint's root.
func verifyRecordProof(w io.Writer, b []byte) bool {
	fail := func(err error) bool { fmt.Fprintf(w, "FAIL record proof: %v\n", err); return false }
	var f tlogproof.File
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return fail(err)
	}
	pub, err := tlogproof.HostKey(f.VerifierKey)
	if err != nil {
		return fail(err)
	}
	v, err := note.NewVerifier(f.VerifierKey)
	if err != nil {
		return fail(fmt.Errorf("verifier key: %w", err))
	}
	what := "record hash " + f.RecordHash
	if len(f.Record) > 0 {
		rec, _, err := record.Parse(f.Record)
		if err != nil {
			return fail(err)
		}
		if rec.Hash != f.RecordHash {
			return fail(fmt.Errorf("the record's hash %s is not the proof's %s", rec.Hash, f.RecordHash))
		}
		what = fmt.Sprintf("record %s seq %d (hash %s)", rec.RoomID, rec.Seq, rec.Hash)
	}
	cp, err := tlogproof.VerifyRecord(f.RecordProof, v)
	if err != nil {
		return fail(err)
	}
	var ws []tlogwitness.Cosigned
	if len(f.Witnesses) > 0 {
		if ws, err = tlogwitness.VerifyCosigned([]byte(f.Checkpoint), v, f.Witnesses); err != nil {
			return fail(err)
		}
	}
	fmt.Fprintf(w, "OK %s is leaf %d of log %s at size %d, checkpoint signed by host key %s%s\n",
		what, f.Inclusion.LeafIndex, cp.Origin, cp.Size, identity.AgentIDFromKey(pub), witnessCount(len(ws)))
	printWitnesses(w, ws)
	return true
}
