//go:build linux && e2e

package node_test

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/adpnode/adpnode/internal/adptest"
	"github.com/adpnode/adpnode/internal/testwait"
	"github.com/adpnode/adpnode/node"
)

// smallTmpfs mounts a tmpfs of size bytes for the test, or skips.
func smallTmpfs(t *testing.T, size int64) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("disk-full test: needs root to mount a small tmpfs")
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", fmt.Sprintf("size=%d", size), "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("disk-full test: mount tmpfs failed: %v %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v %s", dir, err, out)
		}
	})
	return dir
}

func freeSpace(t *testing.T, dir string) int64 {
	t.Helper()
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	return int64(st.Bavail) * st.Bsize
}

// A node on a file system that fills up refuses writes with 503
// disk_full and Retry-After before Badger could run out of space, keeps
// serving reads, takes writes again once space is freed, and restarts
// with every acknowledged record.
func TestDiskFull(t *testing.T) {
	// The least reserve the node takes, and 64 MiB for the store and the
	// filler.
	reserve := node.MinDiskReserve(node.BadgerOptions(""))
	mnt := smallTmpfs(t, reserve+64<<20)
	clock := adptest.NewClock()
	cfg := node.Config{DataDir: filepath.Join(mnt, "data"), DiskReserveBytes: reserve, DiskCheckInterval: 20 * time.Millisecond, Rates: opsRates()}
	h := adptest.StartHostAt(t, cfg, clock)
	alice, bob := adptest.NewAgent("alice"), adptest.NewAgent("bob")
	roomID := h.CreateRoom(t, alice, h.RoomPayload("public"))
	w := &writer{h: h, a: alice, room: roomID, acked: map[int64]string{}, head: serverRecord{Seq: 1}}
	w.head.Hash = h.Head(t, alice, roomID).Hash
	big := strings.Repeat("x", 32<<10)
	post := func(i int) (int, error) {
		env := w.a.Envelope(clock.Ms(), "message.create", roomID, w.head.Seq, w.head.Hash, text(fmt.Sprintf("%d %s", i, big)))
		r := adptest.Do(t, http.MethodPost, h.URL+"/v1/rooms/"+roomID, "", env)
		if r.Status == http.StatusCreated {
			var rec serverRecord
			r.JSON(&rec)
			w.acked[rec.Seq], w.head = rec.Hash, rec
			return r.Status, nil
		}
		if r.Status != http.StatusServiceUnavailable || r.ErrorCode() != "unavailable" || r.ErrorData()["reason"] != "disk_full" ||
			r.Header.Get("Retry-After") != "5" {
			return r.Status, fmt.Errorf("refusal: %s (Retry-After %q)", r, r.Header.Get("Retry-After"))
		}
		return r.Status, nil
	}
	for i := 0; i < 5; i++ {
		if s, err := post(i); s != http.StatusCreated {
			t.Fatalf("write before filling: %d %v", s, err)
		}
	}
	// Fill the file system to 1 MiB above the reserve.
	filler := filepath.Join(mnt, "filler")
	if err := os.WriteFile(filler, make([]byte, freeSpace(t, mnt)-reserve-(1<<20)), 0o600); err != nil {
		t.Fatal(err)
	}
	refused := false
	for i := 5; i < 2000 && !refused; i++ {
		s, err := post(i)
		if err != nil {
			t.Fatal(err)
		}
		refused = s == http.StatusServiceUnavailable
	}
	if !refused {
		t.Fatal("2000 writes of 32 KiB into 1 MiB of headroom were all accepted")
	}
	if free := freeSpace(t, mnt); free < reserve/2 {
		t.Fatalf("only %d bytes free when writes stopped: the reserve did not hold", free)
	}
	// Every write path refuses; reads keep working.
	r := adptest.Do(t, http.MethodPost, h.URL+"/v1/rooms/"+roomID+"/join-requests", bob.Token(h.URL, clock.Ms()), []byte(`{"role":"speaker"}`))
	if r.Status != http.StatusServiceUnavailable || r.ErrorData()["reason"] != "disk_full" {
		t.Fatalf("join request on a full disk: %s", r)
	}
	checkAcked := func(h *adptest.Host) {
		t.Helper()
		ev := adptest.Do(t, http.MethodGet, fmt.Sprintf("%s/v1/rooms/%s/events?after_seq=0&limit=1000", h.URL, roomID), "", nil)
		if ev.Status != http.StatusOK {
			t.Fatalf("read: %s", ev)
		}
		for seq, hash := range w.acked {
			if !bytes.Contains(ev.Body, []byte(`"hash":"`+hash+`"`)) {
				t.Fatalf("acknowledged record %d (%s) missing", seq, hash)
			}
		}
	}
	checkAcked(h)
	// Space comes back: writes succeed again without a restart.
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, 30*time.Second, "writes accepted after space was freed", func() bool {
		s, err := post(10_000)
		if err != nil {
			t.Fatal(err)
		}
		return s == http.StatusCreated
	})
	n := len(w.acked)
	h = h.Restart(t)
	checkAcked(h)
	if got := h.Head(t, alice, roomID); got.Seq != w.head.Seq || got.Hash != w.head.Hash || n < 6 {
		t.Fatalf("after restart head %+v, want %+v", got, w.head)
	}
	h.Close()
}
