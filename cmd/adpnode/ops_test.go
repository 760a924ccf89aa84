//go:build e2e

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/adpnode/adpnode/internal/adptest"
	"github.com/adpnode/adpnode/node"
)

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{"0": 0, "1024": 1024, "256MiB": 256 << 20, "1 GiB": 1 << 30, "10kb": 10_000, "5b": 5, "2mib": 2 << 20} {
		if got, err := parseSize(in); err != nil || got != want {
			t.Errorf("parseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "-1", "lots", "1.5GiB", "99999999999GiB", "MiB"} {
		if _, err := parseSize(in); err == nil {
			t.Errorf("parseSize(%q) accepted", in)
		}
	}
}

// runOps runs one storage command and returns the exit code the binary
// would exit with.
func runOps(t *testing.T, args ...string) int {
	t.Helper()
	var out, errOut strings.Builder
	return run(args, &out, &errOut)
}

// backup asks a running node; restore fills a new dir; check judges it;
// exit codes follow the documented contract.
func TestBackupRestoreCheckCLI(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	h := adptest.StartHost(t, node.Config{DataDir: data})
	alice := adptest.NewAgent("alice")
	h.CreateRoom(t, alice, h.RoomPayload("public"))

	if code := runOps(t, "check", "--data", data); code != 2 {
		t.Fatalf("check of a running node's dir: exit %d, want 2", code)
	}
	if code := runOps(t, "check", "--data", data, "--bogus"); code != 2 {
		t.Fatalf("check with a bad flag: exit %d, want 2", code)
	}
	file := filepath.Join(dir, "b.backup")
	if code := runOps(t, "backup", "--data", data, "--node", h.URL, "-o", file); code != 0 {
		t.Fatalf("online backup: exit %d", code)
	}
	h.Close()
	offline := filepath.Join(dir, "offline.backup")
	if code := runOps(t, "backup", "--data", data, "-o", offline); code != 0 {
		t.Fatalf("offline backup: exit %d", code)
	}
	for _, f := range []string{file, offline} {
		restored := filepath.Join(dir, "r-"+filepath.Base(f))
		if code := runOps(t, "restore", "--data", restored, "-i", f); code != 0 {
			t.Fatalf("restore %s: exit %d", f, code)
		}
		if code := runOps(t, "check", "--data", restored); code != 0 {
			t.Fatalf("check of the restored dir: exit %d", code)
		}
		if code := runOps(t, "restore", "--data", restored, "-i", f); code == 0 {
			t.Fatal("restore into a non-empty dir succeeded")
		}
	}
	// A damaged table: check exits 1.
	ssts, _ := filepath.Glob(filepath.Join(data, "*.sst"))
	if len(ssts) == 0 {
		t.Fatal("no table")
	}
	os.Truncate(ssts[0], 10)
	if code := runOps(t, "check", "--data", data); code != 1 {
		t.Fatalf("check of a damaged dir: exit %d, want 1", code)
	}
}
