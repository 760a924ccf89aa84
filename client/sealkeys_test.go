//go:build e2e

package client_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/adpnode/adpnode/adp/record"
	"github.com/adpnode/adpnode/client"
	"github.com/adpnode/adpnode/internal/adptest"
	"github.com/adpnode/adpnode/node"
)

func wantMode0600(t *testing.T, path string) {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	if !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o600 {
		t.Fatalf("%s: mode %v, want a regular file 0600", path, fi.Mode())
	}
}

// Property: a sealing key file is created, and rewritten on every key
// rotation, as a regular file of mode 0600 whatever is already on disk: a
// leftover temp file of a wider mode, or a symlink where the temp file
// would go, is neither reused nor written through, and no temp file is
// left behind.
func TestSealKeyFileIsPrivateWhateverIsOnDisk(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no permission bits")
	}
	dir := t.TempDir()
	path := client.SealKeyPath(filepath.Join(dir, "bob.key"))
	agent := adptest.SeededClient(t, "http://127.0.0.1:1", adptest.NewClock(), "seal file owner").Key.ID

	// What an earlier, interrupted write (or another user in a shared
	// directory) may have left: a world-readable temp file at the old
	// fixed name, and a symlink at the same name pointing elsewhere.
	stale := path + ".tmp"
	if err := os.WriteFile(stale, []byte("stale"), 0o666); err != nil {
		t.Fatal(err)
	}
	os.Chmod(stale, 0o666)
	ks, err := client.LoadOrCreateSealKeys(path, agent)
	if err != nil {
		t.Fatal(err)
	}
	wantMode0600(t, path)

	outside := filepath.Join(t.TempDir(), "elsewhere")
	if err := os.WriteFile(outside, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	os.Remove(stale)
	if err := os.Symlink(outside, stale); err != nil {
		t.Fatal(err)
	}
	if err := ks.Rotate(agent); err != nil {
		t.Fatal(err)
	}
	wantMode0600(t, path)
	if b, _ := os.ReadFile(outside); len(b) != 0 {
		t.Fatalf("the key file was written through a symlink: %d bytes in %s", len(b), outside)
	}
	// The rotated file holds both keys and loads again.
	again, err := client.LoadSealKeys(path, agent)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again.Public(), ks.Public()) {
		t.Fatal("the rotated key did not reach the file")
	}
	// Only the key file and the planted name are in the directory.
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if n := e.Name(); n != filepath.Base(path) && n != filepath.Base(stale) {
			t.Errorf("left behind: %s", n)
		}
	}
}

// Property: a sealing key file that others than its owner can read or
// write is refused, never used (its keys may have leaked), by both the
// loader that creates and the one that only reads, and the file is left
// as it was; tightened to 0600 it loads.
func TestSealKeyFileWithWideModeIsRefused(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no permission bits")
	}
	path := client.SealKeyPath(filepath.Join(t.TempDir(), "bob.key"))
	agent := adptest.SeededClient(t, "http://127.0.0.1:1", adptest.NewClock(), "seal file owner").Key.ID
	if _, err := client.LoadOrCreateSealKeys(path, agent); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(path)
	for _, mode := range []os.FileMode{0o644, 0o640, 0o604, 0o620} {
		if err := os.Chmod(path, mode); err != nil {
			t.Fatal(err)
		}
		if _, err := client.LoadOrCreateSealKeys(path, agent); !errors.Is(err, client.ErrSealKeyMode) {
			t.Fatalf("mode %04o: LoadOrCreateSealKeys: %v", mode, err)
		}
		if _, err := client.LoadSealKeys(path, agent); !errors.Is(err, client.ErrSealKeyMode) {
			t.Fatalf("mode %04o: LoadSealKeys: %v", mode, err)
		}
		fi, _ := os.Stat(path)
		if after, _ := os.ReadFile(path); fi.Mode().Perm() != mode || !bytes.Equal(after, before) {
			t.Fatalf("mode %04o: the refused file was changed (now %v)", mode, fi.Mode())
		}
	}
	os.Chmod(path, 0o400)
	if _, err := client.LoadSealKeys(path, agent); err != nil {
		t.Fatalf("mode 0400: %v", err)
	}
	os.Chmod(path, 0o600)
	if _, err := client.LoadOrCreateSealKeys(path, agent); err != nil {
		t.Fatalf("mode 0600: %v", err)
	}
}

// Property: reading a member-only room as an agent that is not a member
// (and holds no sealing key) creates no sealing key file, and neither does
// a member's read before it ever sealed or published anything; the first
// write that needs a key makes it, mode 0600.
func TestSealedReadCreatesNoKeyFile(t *testing.T) {
	h := adptest.StartHost(t, node.Config{})
	ctx := context.Background()
	owner := newClient(t, h, "seal-read-owner")
	cr, err := owner.CreateSealedRoom(ctx, h.RoomPayload("public"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := owner.Message(ctx, cr.ID, "text/plain", "sealed for members"); err != nil {
		t.Fatal(err)
	}
	outsider := newClient(t, h, "seal-read-outsider")
	path := client.SealKeyPath(filepath.Join(t.TempDir(), "outsider.key"))
	outsider.SealPath = path
	ms, err := outsider.Messages(ctx, cr.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 1 || !ms[0].Sealed || ms[0].Err == nil {
		t.Fatalf("a non-member's read: %+v", ms)
	}
	if _, _, _, err := outsider.CustomEvents(ctx, cr.ID); err != nil {
		t.Fatal(err)
	}
	if _, _, err := outsider.Open(ctx, cr.ID, lastRecord(t, outsider, cr.ID)); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a non-member's read made %s: %v", path, err)
	}
	if outsider.Seal != nil {
		t.Fatal("a non-member's read made a sealing key in memory")
	}
	// Joining and publishing is the write that makes the key.
	if _, err := outsider.Join(ctx, cr.ID, "speaker", "", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := outsider.PublishSealKey(ctx, cr.ID); err != nil {
		t.Fatal(err)
	}
	wantMode0600(t, path)
}

// lastRecord is the room's last record.
func lastRecord(t *testing.T, c *client.Client, roomID string) *record.Record {
	t.Helper()
	recs, err := c.History(context.Background(), roomID, 0)
	if err != nil || len(recs) == 0 {
		t.Fatal(err)
	}
	return recs[len(recs)-1]
}
