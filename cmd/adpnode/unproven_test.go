package main

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/adpnode/adpnode/adp/archive"
	"github.com/adpnode/adpnode/adp/record"
	"github.com/adpnode/adpnode/adp/tlogproof"
)

// TestVerifyRefusesUnprovenArchive protects: adpnode verify fails an
// archive it cannot prove complete, and reads one only when asked, loudly
// and with its own exit code. An archive our node exports right after the
// room closes waits for the host log's proof and verifies as complete
// (JSON and JSONL). Then, from that archive: without extra.host_log; with
// its tail dropped (the close record and the last message, the manifest
// recomputed, a generated_at past the end, and the host log's genuine
// proof of the new last record); and claiming another host than the
// signed log names: each chain still verifies, each fails (exit 2), and
// --allow-unproven reads it with a warning and exit 3.
func TestVerifyRefusesUnprovenArchive(t *testing.T) {
	e := newCLIEnv(t)
	id := e.createRoom(t, "public")
	alice := []string{"--node", e.node, "--key", e.key("alice")}
	for _, m := range []string{"one", "two", "three"} {
		mustCLI(t, append([]string{"post", id, m}, alice...)...)
	}
	mustCLI(t, append([]string{"room", "close", id}, alice...)...)

	file := filepath.Join(e.dir, "room.json")
	mustCLI(t, "export", "--node", e.node, id, "--format", "json", "-o", file)
	if out := mustCLI(t, "verify", file); !strings.HasPrefix(out, "OK room "+id) || !strings.Contains(out, "   complete: the last record is in log ") {
		t.Fatalf("verify of the exported archive: %s", out)
	}
	jsonl := filepath.Join(e.dir, "room.jsonl")
	mustCLI(t, "export", "--node", e.node, id, "--format", "jsonl", "-o", jsonl)
	if out := mustCLI(t, "verify", jsonl); !strings.HasPrefix(out, "OK room "+id) || !strings.Contains(out, "complete:") {
		t.Fatalf("verify of the exported JSONL archive: %s", out)
	}

	b, _ := os.ReadFile(file)
	load := func() *archive.Archive {
		a, err := archive.ParseJSON(b)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	save := func(name string, a *archive.Archive) string {
		out, err := json.Marshal(a)
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(e.dir, name)
		os.WriteFile(p, out, 0o644)
		// The chain verifies: only completeness is in question.
		if _, err := archive.Verify(a, archive.Options{}); err != nil {
			t.Fatalf("%s: the chain does not verify: %v", name, err)
		}
		return p
	}

	stripped := load()
	delete(stripped.Manifest.Extra, "host_log")

	truncated := load()
	recs := make([]*record.Record, 0, len(truncated.Records))
	for _, raw := range truncated.Records[:len(truncated.Records)-2] {
		r, _, err := record.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, r)
	}
	m := archive.NewManifest(truncated.Manifest.Host, truncated.Manifest.URL, recs, truncated.Manifest.GeneratedAt+365*24*3600*1000)
	m.Formats, m.Extra["host_key"] = truncated.Manifest.Formats, truncated.Manifest.Extra["host_key"]
	resp, err := http.Get(e.node + "/v1/log/inclusion?record_hash=" + recs[len(recs)-1].Hash)
	if err != nil {
		t.Fatal(err)
	}
	proof, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var pf tlogproof.File
	if resp.StatusCode != http.StatusOK || json.Unmarshal(proof, &pf) != nil {
		t.Fatalf("inclusion proof: %d %s", resp.StatusCode, proof)
	}
	m.Extra["host_log"] = pf
	truncated.Manifest, truncated.Room, truncated.Records = m, nil, truncated.Records[:len(recs)]

	elsewhere := load()
	elsewhere.Manifest.Host = "adp.example"
	elsewhere.Manifest.URL = "https://adp.example/v1/rooms/" + id
	for k := range elsewhere.Manifest.Formats {
		elsewhere.Manifest.Formats[k] = strings.Replace(elsewhere.Manifest.Formats[k], e.node, "https://adp.example", 1)
	}
	elsewhere.Room = nil

	for _, c := range []struct {
		name, file, why string
	}{
		{"no host_log", save("stripped.json", stripped), "no host log proof of the last record"},
		{"tail dropped", save("truncated.json", truncated), "records after the checkpoint are not ruled out"},
		{"another host", save("elsewhere.json", elsewhere), "is not the origin the signed log names"},
	} {
		wantExit(t, exitVerifyFailed, "not proven complete", "verify", c.file)
		code, out, errOut := cli(t, "verify", c.file)
		if !strings.HasPrefix(out, "FAIL room "+id) || !strings.Contains(out, c.why) || !strings.Contains(out, "--allow-unproven") {
			t.Errorf("%s: exit %d\n%s%s", c.name, code, out, errOut)
		}
		code, out, errOut = cli(t, "verify", "--allow-unproven", c.file)
		if code != exitVerifyUnproven || !strings.HasPrefix(out, "WARNING: UNPROVEN ARCHIVE") || !strings.Contains(out, c.why) ||
			!strings.Contains(out, "\nOK room "+id) || !strings.Contains(errOut, "NOT PROVEN COMPLETE") {
			t.Errorf("%s --allow-unproven: exit %d (want %d)\n%s%s", c.name, code, exitVerifyUnproven, out, errOut)
		}
	}
	// The flag changes nothing for a proven archive or a broken one.
	if code, out, _ := cli(t, "verify", "--allow-unproven", file); code != 0 || strings.Contains(out, "WARNING") {
		t.Errorf("--allow-unproven on a proven archive: exit %d\n%s", code, out)
	}
	bad := load()
	bad.Records = bad.Records[1:]
	out, _ := json.Marshal(bad)
	os.WriteFile(filepath.Join(e.dir, "bad.json"), out, 0o644)
	wantExit(t, exitVerifyFailed, "FAIL archive invalid", "verify", "--allow-unproven", filepath.Join(e.dir, "bad.json"))
}

// TestVerifyExitCodesDocumented: verify's own exit codes in code are the
// ones docs/archives.md's table and the README list.
func TestVerifyExitCodesDocumented(t *testing.T) {
	doc, err := os.ReadFile("../../docs/archives.md")
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	for code, words := range map[int]string{exitOK: "the file verifies", exitFailure: "cannot be read",
		exitVerifyFailed: "not proven complete", exitVerifyUnproven: "`--allow-unproven` read"} {
		row := "| " + strconv.Itoa(code) + " | "
		i := strings.Index(string(doc), row)
		if i < 0 || !strings.Contains(strings.SplitN(string(doc[i:]), "\n", 2)[0], words) {
			t.Errorf("docs/archives.md: no row %q saying %q", row, words)
		}
	}
	if !strings.Contains(string(readme), strconv.Itoa(exitVerifyUnproven)+" `--allow-unproven`\nread") &&
		!strings.Contains(string(readme), strconv.Itoa(exitVerifyUnproven)+" `--allow-unproven` read") {
		t.Error("the README does not list verify's exit code for --allow-unproven")
	}
}
