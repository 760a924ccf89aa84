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
	"sort"
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
	if err := notArchive(name, b); err != nil {
		return false, err
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

// errMarkdown is the answer for a Markdown transcript.
var errMarkdown = errors.New("Markdown transcripts are not verifiable; use the json or jsonl archive (adpnode export --format json)") //nolint:staticcheck // ST1005: Markdown is a proper noun

// exportHint is how to get a file verify can check.
const exportHint = "download the room's archive with: adpnode export ROOM -o FILE (json) or --format jsonl"

// notArchive names what a file that verify cannot check is instead of
// guessing: an empty file, HTML, Markdown, text, a JSON array, a JSON
// object without a manifest (a node's error answer, the room resource, a
// record), JSON Lines without the manifest line. It returns nil for a
// file with the shape of a JSON or JSONL archive; the archive parsers
// then report what is wrong inside it.
func notArchive(name string, b []byte) error {
	t := bytes.TrimSpace(bytes.TrimPrefix(b, []byte("\xef\xbb\xbf")))
	lower := strings.ToLower(name)
	switch {
	case len(t) == 0:
		return fmt.Errorf("%s is empty, not an archive; %s", name, exportHint)
	case strings.HasSuffix(lower, ".md") || t[0] == '#':
		return errMarkdown
	case t[0] == '<':
		kind := "XML"
		if head := strings.ToLower(string(t[:min(len(t), 512)])); strings.Contains(head, "<html") || strings.Contains(head, "<!doctype html") {
			kind = "an HTML page"
		}
		return fmt.Errorf("%s is %s, not an archive (a web page or a proxy's error page saved in its place?); %s", name, kind, exportHint)
	case t[0] == '[':
		return fmt.Errorf("%s is a JSON array, not an archive (an archive is one JSON object with a manifest, or JSON Lines beginning with the manifest); %s", name, exportHint)
	case t[0] != '{':
		return fmt.Errorf("%s is not JSON (it begins %q), so not an archive; %s", name, string(t[:min(len(t), 16)]), exportHint)
	}
	first, _, _ := bytes.Cut(t, []byte("\n"))
	if bytes.Contains(first, []byte(`"manifest"`)) {
		return nil // the JSON form (ParseJSON reports a malformed one)
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(t, &obj) == nil {
		if isManifestLine(obj) {
			return nil // JSON Lines with the manifest line alone
		}
		what := describeObject(obj)
		if strings.HasPrefix(what, "a JSON object with members") {
			what += " and no manifest"
		}
		return fmt.Errorf("%s is %s, not an archive; %s", name, what, exportHint)
	}
	if err := json.Unmarshal(first, &obj); err != nil {
		return fmt.Errorf("%s is neither a JSON archive nor JSON Lines (line 1: %v); %s", name, err, exportHint)
	}
	if isManifestLine(obj) {
		return nil // the JSONL form
	}
	if isRecordShape(obj) {
		return fmt.Errorf("%s holds JSON Lines of records without the archive's manifest, which is the first line of an archive.jsonl and what the records are checked against; %s", name, exportHint)
	}
	return fmt.Errorf("%s is JSON Lines whose first line is %s, not an archive manifest; %s", name, describeObject(obj), exportHint)
}

// isManifestLine reports whether obj is a §19 manifest.
func isManifestLine(obj map[string]json.RawMessage) bool {
	var typ string
	_ = json.Unmarshal(obj["type"], &typ)
	return typ == "room.archive" || obj["events_sha3_256"] != nil && obj["last_hash"] != nil
}

// isRecordShape reports whether obj looks like a server record.
func isRecordShape(obj map[string]json.RawMessage) bool {
	return obj["seq"] != nil && obj["envelope"] != nil
}

// describeObject names a JSON object that is not an archive.
func describeObject(obj map[string]json.RawMessage) string {
	var e struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	}
	var typ string
	_ = json.Unmarshal(obj["type"], &typ)
	switch {
	case obj["error"] != nil && json.Unmarshal(obj["error"], &e) == nil && e.Code != "":
		return fmt.Sprintf("a node's error answer (%s: %s)", e.Code, e.Message)
	case isRecordShape(obj):
		return "one record"
	case obj["id"] != nil && obj["status"] != nil && obj["url"] != nil:
		return "a room resource (what adpnode room show prints)"
	case obj["records"] != nil || obj["events"] != nil:
		return "a JSON object with records but no manifest"
	case typ != "":
		return fmt.Sprintf("a JSON object of type %q (verify checks archives, evidence, record proofs and deal receipts)", typ)
	}
	names := make([]string, 0, len(obj))
	for k := range obj {
		names = append(names, k)
	}
	sort.Strings(names)
	if len(names) > 6 {
		names = append(names[:6], "…")
	}
	if len(names) == 0 {
		return "an empty JSON object"
	}
	return "a JSON object with members " + strings.Join(names, ", ")
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
