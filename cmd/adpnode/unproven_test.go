//go:build e2e

package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
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
// --allow-unproven reads it with a warning and exit 3. After a restart on
// the same data dir the archive exported again is still complete.
func TestVerifyRefusesUnprovenArchive(t *testing.T) {
	addr, data := freeAddr(t), t.TempDir()
	s := startTestStack(t, addr, data)
	defer func() { s.close() }()
	e := cliEnv{node: "http://" + addr, dir: t.TempDir()}
	mustCLI(t, "keygen", "--out", e.key("alice"))
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
		{"tail dropped", save("truncated.json", truncated), "records after it are not ruled out"},
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

	// Restart on the same data dir: the archive exported again is still
	// proven complete.
	if err := s.close(); err != nil {
		t.Fatal(err)
	}
	s = startTestStack(t, addr, data)
	again := filepath.Join(e.dir, "again.json")
	mustCLI(t, "export", "--node", e.node, id, "--format", "json", "-o", again)
	if out := mustCLI(t, "verify", again); !strings.HasPrefix(out, "OK room "+id) || !strings.Contains(out, "complete:") {
		t.Fatalf("verify after a restart: %s", out)
	}
}

// TestVerifyExitCodesDocumented: verify's own exit codes in code are the
// ones docs/archives.md's table and docs/errors.md list.
func TestVerifyExitCodesDocumented(t *testing.T) {
	doc, err := os.ReadFile("../../docs/archives.md")
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile("../../docs/errors.md")
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
		t.Error("docs/errors.md does not list verify's exit code for --allow-unproven")
	}
}

// TestExportWaitsForProof protects: export downloads an archive again
// until its manifest carries the host log's proof of the last record (a
// host covers it seconds after the room ends, a mirror fetches it after
// that), within --proof-wait; an archive still without one is written
// with a warning that verify will not call it complete; a transcript is
// not waited for.
func TestExportWaitsForProof(t *testing.T) {
	const id = "dcafg7tg4asrkhrabra0"
	var mu sync.Mutex
	served := map[string]int{}
	proofAfter := 3 // the third download of archive.json carries the proof
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		served[r.URL.Path]++
		n := served[r.URL.Path]
		mu.Unlock()
		extra := `{"host_key":"did:agent:x"}`
		if strings.HasSuffix(r.URL.Path, "/archive") && n >= proofAfter {
			extra = `{"host_key":"did:agent:x","host_log":{"type":"adp.record-proof"}}`
		}
		manifest := `{"protocol":"adp/1.0","type":"room.archive","extra":` + extra + `}`
		switch {
		case strings.HasSuffix(r.URL.Path, "/archive"):
			io.WriteString(w, `{"manifest":`+manifest+`,"room":null,"packs":[],"records":[]}`)
		case strings.HasSuffix(r.URL.Path, "/archive.jsonl"):
			io.WriteString(w, manifest+"\n{}\n")
		default:
			io.WriteString(w, "# transcript\n")
		}
	}))
	defer srv.Close()
	count := func(path string) int {
		mu.Lock()
		defer mu.Unlock()
		return served["/v1/rooms/"+id+path]
	}
	dir := t.TempDir()

	out := filepath.Join(dir, "a.json")
	code, _, errOut := cli(t, "export", "--node", srv.URL, id, "-o", out)
	b, _ := os.ReadFile(out)
	if code != 0 || !strings.Contains(errOut, "waiting up to 30s") || strings.Contains(errOut, "warning") || !hasHostLogProof(b) {
		t.Fatalf("export json: exit %d, %s\n%s", code, errOut, b)
	}
	if count("/archive") != proofAfter {
		t.Errorf("downloaded %d times, want %d", count("/archive"), proofAfter)
	}

	// The JSONL archive never gets one: written after --proof-wait, with
	// a warning.
	out = filepath.Join(dir, "a.jsonl")
	code, _, errOut = cli(t, "export", "--node", srv.URL, id, "--format", "jsonl", "--proof-wait", "600ms", "-o", out)
	b, _ = os.ReadFile(out)
	if code != 0 || !strings.Contains(errOut, "warning: the archive carries no host log proof") || len(b) == 0 || hasHostLogProof(b) {
		t.Fatalf("export jsonl: exit %d, %s\n%s", code, errOut, b)
	}
	if n := count("/archive.jsonl"); n < 2 || n > 10 {
		t.Errorf("the JSONL archive was downloaded %d times in 600ms", n)
	}
	// --proof-wait 0 does not wait; a transcript is never waited for.
	before := count("/archive.jsonl")
	code, _, errOut = cli(t, "export", "--node", srv.URL, id, "--format", "jsonl", "--proof-wait", "0", "-o", out)
	if code != 0 || count("/archive.jsonl") != before+1 || !strings.Contains(errOut, "warning") {
		t.Fatalf("--proof-wait 0: exit %d, %d downloads, %s", code, count("/archive.jsonl")-before, errOut)
	}
	code, _, errOut = cli(t, "export", "--node", srv.URL, id, "--format", "md", "-o", filepath.Join(dir, "a.md"))
	if code != 0 || count("/archive.md") != 1 || strings.Contains(errOut, "warning") || strings.Contains(errOut, "waiting") {
		t.Fatalf("export md: exit %d, %d downloads, %s", code, count("/archive.md"), errOut)
	}
}
