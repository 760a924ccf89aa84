//go:build e2e

package node_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/adpnode/adpnode/internal/adptest"
	"github.com/adpnode/adpnode/node"
)

// buildDataDir runs a node on a fresh data dir, creates rooms with a few
// messages each, and stops it. It returns the dir and the room IDs.
func buildDataDir(t *testing.T, rooms, msgs int) (string, []string, *adptest.Clock) {
	t.Helper()
	dir := t.TempDir()
	clock := adptest.NewClock()
	h := adptest.StartHostAt(t, node.Config{DataDir: dir}, clock)
	a := adptest.NewAgent("alice")
	var ids []string
	for i := 0; i < rooms; i++ {
		id := h.CreateRoom(t, a, h.RoomPayload("public"))
		for j := 0; j < msgs; j++ {
			h.MustPost(t, a, id, "message.create", map[string]any{"content_type": "text/plain", "content": fmt.Sprintf("room %d message %d", i, j)})
		}
		ids = append(ids, id)
	}
	h.Close()
	return dir, ids, clock
}

func ssts(t *testing.T, dir string) []string {
	t.Helper()
	names, _ := filepath.Glob(filepath.Join(dir, "*.sst"))
	if len(names) == 0 {
		t.Fatal("no .sst in the data dir")
	}
	return names
}

// A damaged table is a clear error naming the file and the way out, never
// a panic; restoring the file makes the node start again.
func TestOpenDamagedTable(t *testing.T) {
	for _, tc := range []struct {
		name   string
		damage func(b []byte) []byte
	}{
		{"truncated", func(b []byte) []byte { return b[:len(b)/2] }},
		{"truncated to a few bytes", func(b []byte) []byte { return b[:3] }},
		{"empty", func(b []byte) []byte { return nil }},
		{"flipped byte", func(b []byte) []byte { c := append([]byte(nil), b...); c[len(c)/3] ^= 0x40; return c }},
		{"garbage tail", func(b []byte) []byte {
			c := append([]byte(nil), b...)
			for i := len(c) - 64; i < len(c); i++ {
				c[i] = byte(i * 7)
			}
			return c
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, _, clock := buildDataDir(t, 2, 3)
			sst := ssts(t, dir)[0]
			orig, err := os.ReadFile(sst)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(sst, tc.damage(orig), 0o644); err != nil {
				t.Fatal(err)
			}
			n, err := node.Open(node.Config{PublicURL: "http://127.0.0.1:1", DataDir: dir, Now: clock.Now})
			if err == nil {
				n.Close()
				t.Fatal("a node opened on a damaged table")
			}
			var se *node.StorageError
			if !errors.As(err, &se) {
				t.Fatalf("error is %T, want *node.StorageError: %v", err, err)
			}
			if se.File != filepath.Base(sst) || !strings.Contains(err.Error(), filepath.Base(sst)) ||
				!strings.Contains(err.Error(), "adpnode check") || !strings.Contains(err.Error(), "backup") {
				t.Fatalf("error does not name %s and the way out: %v", filepath.Base(sst), err)
			}
			// Put the table back: the node starts and serves the rooms.
			if err := os.WriteFile(sst, orig, 0o644); err != nil {
				t.Fatal(err)
			}
			n, err = node.Open(node.Config{PublicURL: "http://127.0.0.1:1", DataDir: dir, Now: clock.Now})
			if err != nil {
				t.Fatalf("restored table: %v", err)
			}
			n.Close()
		})
	}
}

func TestOpenDamagedManifest(t *testing.T) {
	dir, _, clock := buildDataDir(t, 1, 1)
	mf := filepath.Join(dir, "MANIFEST")
	b, err := os.ReadFile(mf)
	if err != nil {
		t.Fatal(err)
	}
	for i := range b[:min(len(b), 16)] {
		b[i] ^= 0xff
	}
	os.WriteFile(mf, b, 0o644)
	n, err := node.Open(node.Config{PublicURL: "http://127.0.0.1:1", DataDir: dir, Now: clock.Now})
	if err == nil {
		n.Close()
		t.Fatal("a node opened on a damaged MANIFEST")
	}
	if !strings.Contains(err.Error(), "MANIFEST") || !strings.Contains(err.Error(), "adpnode check") {
		t.Fatalf("error does not name the MANIFEST: %v", err)
	}
}

// A second process on a running node's dir is told the dir is in use.
func TestOpenLockedDir(t *testing.T) {
	dir := t.TempDir()
	h := adptest.StartHost(t, node.Config{DataDir: dir})
	_ = h
	n, err := node.Open(node.Config{PublicURL: "http://127.0.0.1:1", DataDir: dir})
	if err == nil {
		n.Close()
		t.Fatal("two nodes opened one data dir")
	}
	if !errors.Is(err, node.ErrLocked) {
		t.Fatalf("want ErrLocked, got %v", err)
	}
}

func truncate(t *testing.T, name string) {
	t.Helper()
	fi, err := os.Stat(name)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(name, fi.Size()/2); err != nil {
		t.Fatal(err)
	}
}
