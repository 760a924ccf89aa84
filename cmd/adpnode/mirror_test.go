//go:build e2e

package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/adpnode/adpnode/adp/archive"
	"github.com/adpnode/adpnode/adp/room"
	"github.com/adpnode/adpnode/client"
	"github.com/adpnode/adpnode/internal/adptest"
	"github.com/adpnode/adpnode/internal/fedtest"
	"github.com/adpnode/adpnode/internal/optoken"
	"github.com/adpnode/adpnode/internal/testwait"
	"github.com/adpnode/adpnode/mirror"
	istack "github.com/adpnode/adpnode/stack"
)

// An archivist's mirror journey through the CLI against real nodes: room
// targets that cannot be mirrored (restricted, unknown or private, host
// unreachable, bad input) fail fast with the node's code and reason and a
// documented exit code; a public room is added with --wait, which shows
// "verified N of M" and returns once caught up; mirror list --json shows
// it, also after the mirror restarts on the same data dir.
func TestMirrorAddJourney(t *testing.T) {
	// The host keeps its log, as serve does: the mirror's archive embeds
	// the host log's proof of the last record, which verify requires.
	peers := fedtest.Network(t, 2, nil, fedtest.Options{Mirror: true, HostLog: &istack.HostLogConfig{CheckpointInterval: 100 * time.Millisecond}})
	a, b := peers[0], peers[1]
	alice := adptest.NewAgent("alice")
	pub := fedtest.CreateRoom(t, a, alice, room.Public, "mirrored by the CLI")
	for _, s := range []string{"one", "two"} {
		fedtest.MustSubmit(t, a, alice, "message.create", pub, map[string]any{"content_type": "text/plain", "content": s})
	}
	restricted := fedtest.CreateRoom(t, a, alice, room.Restricted, "restricted")
	private := fedtest.CreateRoom(t, a, alice, room.Private, "private")
	op := []string{"--node", b.URL, "--operator-token-file", filepath.Join(b.Dir, optoken.FileName)}
	mirrorCLI := func(args ...string) []string { return append(append([]string{"mirror"}, args...), op...) }

	goroutines := runtime.NumGoroutine()
	errOut := wantExit(t, exitDenied, "room_not_public", mirrorCLI("add", a.Node.RoomURL(restricted), "--wait")...)
	if !strings.Contains(errOut, "permission_denied") || strings.Contains(errOut, "Bad Request") || strings.Contains(errOut, "{") {
		t.Errorf("restricted room: %q", errOut)
	}
	wantExit(t, exitNotFound, "room_not_found", mirrorCLI("add", a.Node.RoomURL(private), "--wait")...)
	closed := "http://" + freeAddr(t) + "/v1/rooms/" + pub // nothing listens there
	wantExit(t, exitUnavailable, "host_unreachable", mirrorCLI("add", closed, "--wait")...)
	wantExit(t, exitUsage, "names no room", mirrorCLI("add", "http://127.0.0.1:1/not-a-room")...)
	wantExit(t, exitUsage, "target kind must be room, host, tag or all", mirrorCLI("add", "--kind", "everything", "x")...)
	other := t.TempDir() // another node's operator token
	if _, err := optoken.LoadOrCreate(other); err != nil {
		t.Fatal(err)
	}
	wantExit(t, exitDenied, "operator_token_required", "mirror", "add", a.Node.RoomURL(pub), "--node", b.URL, "--data", other)
	if len(b.Mir.Targets()) != 0 {
		t.Fatalf("refused targets were stored: %+v", b.Mir.Targets())
	}

	code, out, errOut := cli(t, mirrorCLI("add", a.Node.RoomURL(pub), "--wait", "--timeout", "60s")...)
	if code != 0 || !strings.Contains(out, "mirroring room:"+a.Node.RoomURL(pub)) {
		t.Fatalf("mirror add --wait: exit %d\n%s\n%s", code, out, errOut)
	}
	if !regexp.MustCompile(`caught up: verified 3 of 3\n`).MatchString(errOut) || !strings.Contains(errOut, "verified ") {
		t.Fatalf("mirror add --wait progress: %q", errOut)
	}

	listJSON := func() (targets []mirror.Target, rooms map[string]mirror.Info) {
		t.Helper()
		var v struct {
			Targets []mirror.Target `json:"targets"`
			Rooms   []struct {
				ID     string      `json:"id"`
				Mirror mirror.Info `json:"mirror"`
			} `json:"rooms"`
		}
		if err := json.Unmarshal([]byte(mustCLI(t, mirrorCLI("list", "--json")...)), &v); err != nil {
			t.Fatalf("mirror list --json: %v", err)
		}
		rooms = map[string]mirror.Info{}
		for _, r := range v.Rooms {
			rooms[r.ID] = r.Mirror
		}
		return v.Targets, rooms
	}
	targets, rooms := listJSON()
	if len(targets) != 1 || targets[0].Kind != mirror.TargetRoom || rooms[pub].VerifiedSeq != 3 || rooms[pub].KnownSeq != 3 {
		t.Fatalf("mirror list --json: %+v %+v", targets, rooms)
	}
	if out := mustCLI(t, mirrorCLI("list")...); !strings.Contains(out, "3 of 3") {
		t.Errorf("mirror list: %s", out)
	}

	// The room ends: the mirror's archive verifies and reads as Markdown.
	wantExit(t, exitConflict, "archive_unavailable", "export", "--mirror", "--node", b.URL, pub, "--format", "md")
	last := fedtest.MustSubmit(t, a, alice, "room.close", pub, map[string]any{"reason": "done"}).Record
	dir := t.TempDir()
	file := filepath.Join(dir, "mirror.json")
	testwait.Until(t, 20*time.Second, "B's archive of the room shows its last record", func() bool {
		if code, _, _ := cli(t, "export", "--mirror", "--node", b.URL, pub, "-o", file); code != 0 {
			return false
		}
		doc, _ := os.ReadFile(file)
		arch, err := archive.ParseJSON(doc)
		if err != nil {
			t.Fatal(err)
		}
		rep, err := archive.Verify(arch, archive.Options{})
		if err != nil {
			t.Fatalf("B's archive does not verify: %v", err)
		}
		return rep.LastSeq == last.Seq
	})
	if out := mustCLI(t, "verify", file); !strings.HasPrefix(out, "OK room "+pub) {
		t.Fatalf("verify of the mirror's archive: %s", out)
	}
	mdFile := filepath.Join(dir, "mirror.md")
	mustCLI(t, "export", "--mirror", "--node", b.URL, pub, "--format", "md", "-o", mdFile)
	md, _ := os.ReadFile(mdFile)
	for _, want := range []string{"# mirrored by the CLI", "## Transcript", "### #4 room.close", "```\ntwo\n```"} {
		if !strings.Contains(string(md), want) {
			t.Fatalf("mirror transcript lacks %q:\n%s", want, md)
		}
	}

	b = b.Restart(t)
	targets, rooms = listJSON()
	if len(targets) != 1 || rooms[pub].VerifiedSeq != 4 {
		t.Fatalf("after restart, mirror list --json: %+v %+v", targets, rooms)
	}
	mustCLI(t, "export", "--mirror", "--node", b.URL, pub, "-o", file)
	if arch, err := archive.ParseJSON(must(os.ReadFile(file))); err != nil {
		t.Fatal(err)
	} else if rep, err := archive.Verify(arch, archive.Options{}); err != nil || rep.LastSeq != last.Seq {
		t.Fatalf("after restart, the mirror's archive: %v", err)
	}
	if md2 := mustCLI(t, "export", "--mirror", "--node", b.URL, pub, "--format", "md"); md2 != string(md) {
		t.Errorf("transcript changed across a restart")
	}
	wantExit(t, exitNotFound, "this node does not mirror that room", "export", "--mirror", "--node", b.URL, restricted)

	testwait.Until(t, 10*time.Second, "goroutines of the refused adds are gone", func() bool {
		return runtime.NumGoroutine() <= goroutines+50
	})
}

// --wait gives up after --timeout with exit 6 and the last progress line
// when the mirror does not catch up (a node that reports 1 of 5 forever),
// and stops at once when the node calls the room's host faulty.
func TestMirrorWaitBounded(t *testing.T) {
	info := mirror.Info{VerifiedSeq: 1, KnownSeq: 5}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(map[string]any{"mirror": info})
	}))
	defer srv.Close()
	err := waitRoom(srv.URL, "http://127.0.0.1:1/v1/rooms/abc", 300*time.Millisecond, 20*time.Millisecond)
	if exitCode(err) != exitUnavailable || !strings.Contains(err.Error(), "timed out after 300ms: verified 1 of 5") {
		t.Fatalf("waitRoom: %v (exit %d)", err, exitCode(err))
	}
	info.Faulty = true
	if err := waitRoom(srv.URL, "http://127.0.0.1:1/v1/rooms/abc", time.Minute, 20*time.Millisecond); err == nil || !strings.Contains(err.Error(), "faulty") {
		t.Fatalf("waitRoom of a faulty room: %v", err)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// TestInboxReadsMirrorWhenHostDown. Property: a mention in a public room
// that this node mirrors stays readable in `inbox` when the room's host is
// down: the text comes from the node's mirror (verified, and hashing to
// the record the inbox named), marked as such.
func TestInboxReadsMirrorWhenHostDown(t *testing.T) {
	peers := fedtest.Network(t, 2, nil, fedtest.Options{Mirror: true})
	a, b := peers[0], peers[1]
	alice := adptest.NewAgent("alice")
	dir := t.TempDir()
	bobFile := filepath.Join(dir, "bob.key")
	mustCLI(t, "keygen", "--out", bobFile)
	bobKey, err := client.LoadKey(bobFile)
	if err != nil {
		t.Fatal(err)
	}
	pub := fedtest.CreateRoom(t, a, alice, room.Public, "mirrored mentions")
	op := []string{"--node", b.URL, "--operator-token-file", filepath.Join(b.Dir, optoken.FileName)}
	mustCLI(t, append([]string{"mirror", "add", a.Node.RoomURL(pub), "--wait", "--timeout", "60s"}, op...)...)
	head, err := a.Node.Room(pub, alice.ID)
	if err != nil {
		t.Fatal(err)
	}
	ev := alice.Event(a.Clock.Ms(), "message.create", pub, head.Head.Seq, head.Head.Hash,
		map[string]any{"content_type": "text/plain", "content": "Bob, the figures are in"})
	ev.Mentions = []string{string(bobKey.ID)}
	if _, err := a.Node.Submit(context.Background(), alice.Sign(ev), pub); err != nil {
		t.Fatal(err)
	}
	bob := []string{"--node", b.URL, "--key", bobFile}
	var out string
	testwait.Until(t, 30*time.Second, "the mention in bob's inbox on B", func() bool {
		out += mustCLI(t, append([]string{"inbox", "--cursor", filepath.Join(dir, "c1")}, bob...)...)
		return strings.Contains(out, "Bob, the figures are in")
	})
	if strings.Contains(out, "from this node's mirror") {
		t.Fatalf("read from the mirror while the host is up:\n%s", out)
	}

	a.Stop()
	out = mustCLI(t, append([]string{"inbox", "--cursor", filepath.Join(dir, "c2")}, bob...)...)
	if !strings.Contains(out, "(host unreachable; from this node's mirror) ") || !strings.Contains(out, "Bob, the figures are in") {
		t.Fatalf("inbox with the host down does not read the mirror:\n%s", out)
	}
}
