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

	"github.com/adpnode/adpnode/adp/archive"
	"github.com/adpnode/adpnode/adp/evidence"
)

// File verifies an archive or evidence file, printing one OK or FAIL
// line to w. ok is false when the file does not verify; err is for files
// that are neither (unreadable, malformed).
func File(w io.Writer, name string, b []byte) (ok bool, err error) {
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
		raws := make([][]byte, len(a.Records))
		for i, r := range a.Records {
			raws[i] = r
		}
		p := StartParse(raws)
		rep, err = archive.Verify(a, archive.Options{Parsed: p.Get})
		p.Stop()
	} else {
		m, packs, recs, perr := archive.ParseJSONL(b)
		if perr != nil {
			return false, fmt.Errorf("%s: %w", name, perr)
		}
		p := StartParse(recs)
		rep, err = archive.VerifyRecords(m, packs, recs, archive.Options{Parsed: p.Get})
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
	fmt.Fprintf(w, "OK evidence: %s by host %s in room %s at seq %d (%d checkpoints, %d records): %s\n",
		ev.Kind, ev.Host, ev.RoomID, ev.Seq, len(ev.Checkpoints), len(ev.Records), ev.Reason)
	return true
}
