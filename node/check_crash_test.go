//go:build e2e

package node_test

import (
	"bytes"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/adpnode/adpnode/internal/adptest"
	"github.com/adpnode/adpnode/node"
)

// A dir left by a node that died (memtable WAL not flushed, no clean
// close) is checked like any other: the records in the WAL count.
func TestCheckAfterCrash(t *testing.T) {
	dir := t.TempDir()
	h := adptest.StartHost(t, node.Config{DataDir: filepath.Join(dir, "live")})
	alice := adptest.NewAgent("alice")
	id := h.CreateRoom(t, alice, h.RoomPayload("public"))
	h.MustPost(t, alice, id, "message.create", text("before the crash"))
	// A copy of the live dir is what a crash leaves behind.
	if out, err := exec.Command("cp", "-r", filepath.Join(dir, "live"), filepath.Join(dir, "copy")).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v %s", err, out)
	}
	rep, err := node.Check(filepath.Join(dir, "copy"))
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() || len(rep.Rooms) != 1 || rep.Rooms[0].Seq != 2 || rep.Note == "" {
		t.Fatalf("crashed dir: %+v", rep)
	}
	// Backup reads it too.
	if out, err := exec.Command("cp", "-r", filepath.Join(dir, "live"), filepath.Join(dir, "copy2")).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v %s", err, out)
	}
	var buf bytes.Buffer
	if err := node.BackupDir(filepath.Join(dir, "copy2"), &buf); err != nil {
		t.Fatal(err)
	}
	if err := node.RestoreDir(filepath.Join(dir, "restored"), bytes.NewReader(buf.Bytes())); err != nil {
		t.Fatal(err)
	}
	if rep, err := node.Check(filepath.Join(dir, "restored")); err != nil || !rep.OK() || rep.Rooms[0].Seq != 2 {
		t.Fatalf("restored from a crashed dir: %+v %v", rep, err)
	}
}
