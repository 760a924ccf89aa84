//go:build e2e

package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Property: verify names what it was given when it is not an archive (an
// empty file, HTML, JSON that is not an archive, a node's error answer, a
// room resource, JSON Lines without the manifest line, text) and says how
// to get an archive, with verify's "not verifiable" exit code, instead of
// calling everything Markdown; an archive still verifies, and the hashes
// it prints are the ones the node's API shows.
func TestVerifyNamesWhatItGot(t *testing.T) {
	e := newCLIEnv(t)
	id := e.createRoom(t, "public")
	alice := []string{"--node", e.node, "--key", e.key("alice")}
	mustCLI(t, append([]string{"post", id, "hello"}, alice...)...)
	mustCLI(t, append([]string{"room", "close", id}, alice...)...)
	jsonl := filepath.Join(e.dir, "room.jsonl")
	mustCLI(t, "export", "--node", e.node, id, "--format", "jsonl", "-o", jsonl)
	roomJSON := mustCLI(t, "room", "show", "--node", e.node, id)
	var res struct {
		Head struct{ Hash string } `json:"head"`
	}
	if err := json.Unmarshal([]byte(roomJSON), &res); err != nil || res.Head.Hash == "" {
		t.Fatalf("room show: %v\n%s", err, roomJSON)
	}
	out := mustCLI(t, "verify", jsonl)
	if !strings.HasPrefix(out, "OK room "+id) || !strings.Contains(out, "last hash "+res.Head.Hash) {
		t.Fatalf("verify prints the last hash as the node shows it (%s):\n%s", res.Head.Hash, out)
	}

	resp, err := http.Get(e.node + "/v1/rooms/d0000000000000000000/archive")
	if err != nil {
		t.Fatal(err)
	}
	errBody, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	b, _ := os.ReadFile(jsonl)
	_, records, _ := bytes.Cut(b, []byte("\n"))

	for _, c := range []struct {
		name, file string
		body       []byte
		want       string
	}{
		{"empty file", "empty.json", nil, "is empty, not an archive"},
		{"blank file", "blank.jsonl", []byte("\n  \n"), "is empty, not an archive"},
		{"HTML", "room.json", []byte("<!DOCTYPE html>\n<html><head><title>502 Bad Gateway</title></head></html>\n"), "is an HTML page, not an archive"},
		{"XML", "room.json", []byte(`<?xml version="1.0"?><error/>`), "is XML, not an archive"},
		{"JSON that is not an archive", "room.json", []byte(`{"hello":"world"}`), "a JSON object with members hello and no manifest"},
		{"a node's error answer", "room.json", errBody, "a node's error answer (room_not_found"},
		{"the room resource", "room.json", []byte(roomJSON), "a room resource (what adpnode room show prints)"},
		{"a JSON array", "room.json", []byte(`[1,2]`), "is a JSON array, not an archive"},
		{"JSON Lines without the manifest", "room.jsonl", records, "JSON Lines of records without the archive's manifest"},
		{"plain text", "room.txt", []byte("hello\n"), "is not JSON (it begins \"hello\")"},
		{"Markdown", "room.txt", []byte("# CLI public\n\nhello\n"), "Markdown transcripts are not verifiable"},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := filepath.Join(t.TempDir(), c.file)
			os.WriteFile(f, c.body, 0o644)
			errOut := wantExit(t, exitVerifyFailed, c.want, "verify", f)
			if !strings.Contains(errOut, "adpnode export") {
				t.Errorf("verify does not say how to get an archive: %s", errOut)
			}
		})
	}
}
