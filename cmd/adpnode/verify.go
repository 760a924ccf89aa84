package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/adpnode/adpnode/adp/archive"
	"github.com/adpnode/adpnode/adp/identity"
	"github.com/adpnode/adpnode/mirror"
)

func verifyCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "verify <archive or evidence file>",
		Short: "Verify an archive (JSON or JSONL) or a piece of misbehaviour evidence offline, kernel only",
		Long: `verify runs the five ADP §19 steps on an archive file with nothing but the
protocol kernel: every envelope hash and signature, a full replay of the room
with the type definitions in force at each seq, the pre_hash chain, last_hash
and events_sha3_256, and the witness cosignatures the manifest lists. It
prints OK with counts, or the first failing seq and why.

A JSON file whose "type" is "adp.evidence" (as a mirror stores and gossips
it, GET /v1/mirrors/evidence) is checked instead as proof that a host
misbehaved: host-signed checkpoints, agent-signed records and a replay.

Every field the archive shows a reader must follow from the verified chain:
the room resource and the pack documents must equal what the replay
produces, and the manifest's url and format links must be this room's on
manifest.host. The host and URL themselves are printed as host-asserted:
no signature in the archive covers them (the witnesses bind extra.host_key).

Markdown transcripts (archive.md) are for reading and cannot be verified.

Exit status (verify's own): 0 when the file verifies; 2 when it does not,
or is not a verifiable archive (Markdown, malformed JSON); 1 on other
errors (for example an unreadable file).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			b, err := os.ReadFile(args[0])
			if err != nil {
				return withCode(exitFailure, err)
			}
			ok, err := verifyFile(cmd.OutOrStdout(), args[0], b)
			if err != nil {
				return withCode(exitVerifyFailed, err)
			}
			if !ok {
				return &exitError{code: exitVerifyFailed, err: errSilent}
			}
			return nil
		},
	}
}

// verifyFile verifies an archive or evidence file, printing one OK or FAIL
// line to w. ok is false when the file does not verify; err is for files
// that are neither (unreadable, malformed).
func verifyFile(w io.Writer, name string, b []byte) (ok bool, err error) {
	if isEvidence(b) {
		return verifyEvidence(w, b), nil
	}
	if isMarkdown(name, b) {
		return false, errors.New("Markdown transcripts are not verifiable; use the json or jsonl archive (adpnode export --format json)")
	}
	var rep *archive.Report
	if t := bytes.TrimSpace(b); len(t) > 0 && bytes.Contains(t[:bytes.IndexByte(append(t, '\n'), '\n')], []byte(`"manifest"`)) {
		a, perr := archive.ParseJSON(b)
		if perr != nil {
			return false, fmt.Errorf("%s: %w", name, perr)
		}
		rep, err = archive.Verify(a, archive.Options{})
	} else {
		m, packs, recs, perr := archive.ParseJSONL(b)
		if perr != nil {
			return false, fmt.Errorf("%s: %w", name, perr)
		}
		rep, err = archive.VerifyRecords(m, packs, recs, archive.Options{})
	}
	var f *archive.Failure
	if errors.As(err, &f) {
		fmt.Fprintf(w, "FAIL %s\n", f.Error())
		return false, nil
	}
	if err != nil {
		return false, err
	}
	topic := ""
	if rep.State != nil {
		topic = fmt.Sprintf(" %q", rep.State.Topic)
	}
	fmt.Fprintf(w, "OK room %s%s: %d records, last seq %d, last hash %s, %d members, %d types, status %s%s\n",
		rep.RoomID, topic, rep.Records, rep.LastSeq, rep.LastHash, rep.Members, rep.Types, rep.Status, witnessCount(len(rep.Witnesses)))
	fmt.Fprintf(w, "   host-asserted (not signed): host %s, url %s\n", rep.HostAsserted.Host, rep.HostAsserted.URL)
	return true, nil
}

// isMarkdown reports whether a file is a Markdown transcript rather than a
// JSON or JSONL archive.
func isMarkdown(name string, b []byte) bool {
	if strings.HasSuffix(strings.ToLower(name), ".md") {
		return true
	}
	t := bytes.TrimSpace(b)
	return len(t) > 0 && t[0] != '{'
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
	return json.Unmarshal(b, &head) == nil && head.Type == mirror.EvidenceType
}

// verifyEvidence checks a piece of evidence strictly (no duplicate or
// unknown members) and with mirror.Evidence.Verify.
func verifyEvidence(w io.Writer, b []byte) bool {
	ev, err := parseEvidence(b)
	if err == nil {
		err = ev.Verify()
	}
	if err != nil {
		fmt.Fprintf(w, "FAIL evidence: %v\n", err)
		return false
	}
	fmt.Fprintf(w, "OK evidence: %s by host %s in room %s at seq %d (%d checkpoints, %d records): %s\n",
		ev.Kind, ev.Host, ev.RoomID, ev.Seq, len(ev.Checkpoints), len(ev.Records), ev.Reason)
	return true
}

func parseEvidence(b []byte) (*mirror.Evidence, error) {
	if err := identity.CheckJSON(b); err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var ev mirror.Evidence
	if err := dec.Decode(&ev); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, errors.New("trailing data after the evidence object")
	}
	return &ev, nil
}
