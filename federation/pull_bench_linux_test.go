//go:build e2e

package federation_test

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p"
	lp2pnet "github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"

	"github.com/adpnode/adpnode/adp/room"
	"github.com/adpnode/adpnode/federation"
	"github.com/adpnode/adpnode/internal/adptest"
	"github.com/adpnode/adpnode/internal/fedtest"
	"github.com/adpnode/adpnode/internal/testwait"
)

// pullVictimEnv names the data dir of BenchmarkPullVictimCPU's victim.
const pullVictimEnv = "ADPNODE_PULL_VICTIM"

// TestPullVictimProcess is the victim of BenchmarkPullVictimCPU, run in a
// child process of its own so that its CPU time is its alone: a node with
// default limits and 300 public rooms (a 2 KB agenda each) that prints
// its address and serves until its standard input closes.
func TestPullVictimProcess(t *testing.T) {
	dir := os.Getenv(pullVictimEnv)
	if dir == "" {
		t.Skip("the victim process of BenchmarkPullVictimCPU")
	}
	clock := adptest.NewClock()
	v := fedtest.Start(t, "V", dir, clock, 0, fedtest.Options{})
	alice := adptest.NewAgent("alice")
	agenda := strings.Repeat("agenda ", 300)
	for i := range 300 {
		now := clock.Ms()
		fedtest.MustSubmit(t, v, alice, "room.create", "", map[string]any{"topic": fmt.Sprint("room ", i), "agenda": agenda,
			"visibility": room.Public, "start_time": now, "end_time": now + 3_600_000, "tags": []string{}})
	}
	testwait.Until(t, 30*time.Second, "the rooms announced", func() bool { return len(v.Index.Own()) == 300 })
	// The node's clock runs on (the pull budget refills with it).
	stop := make(chan struct{})
	go func() {
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				clock.Advance(100 * time.Millisecond)
			}
		}
	}()
	defer close(stop)
	fmt.Printf("ADDR %s\n", v.Fed.Addrs()[0])
	io.Copy(io.Discard, os.Stdin)
}

// procCPU returns a process's user + system CPU time.
func procCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * time.Second / 100, nil // USER_HZ
}

// BenchmarkPullVictimCPU: one peer pulls from a victim back to back by
// both directory protocols — a reconciliation fetch of 256 of its ids,
// then index-sync page 0, again and again, each on a new stream — for
// 20 s. The victim runs in a child process; its CPU time is reported as a
// fraction of one core, over the whole run (the pull budget's first
// window included) and over the last 10 s (steady state), with the
// victim's idle figure before the pulling began. Target: under 0.1.
//
//	go test -run '^$' -bench BenchmarkPullVictimCPU -benchtime 1x ./federation
func BenchmarkPullVictimCPU(b *testing.B) {
	cmd := exec.Command(os.Args[0], "-test.run", "^TestPullVictimProcess$", "-test.timeout", "10m")
	cmd.Env = append(os.Environ(), pullVictimEnv+"="+b.TempDir())
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	cmd.Stderr = io.Discard
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() { stdin.Close(); cmd.Wait() }()
	sc := bufio.NewScanner(stdout)
	var addr string
	for sc.Scan() {
		if a, ok := strings.CutPrefix(sc.Text(), "ADDR "); ok {
			addr = a
			break
		}
	}
	go io.Copy(io.Discard, stdout)
	ai, err := peer.AddrInfoFromString(addr)
	if err != nil {
		b.Fatalf("victim address %q: %v", addr, err)
	}
	h, err := libp2p.New(libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0"), libp2p.DisableRelay())
	if err != nil {
		b.Fatal(err)
	}
	defer h.Close()
	ctx := context.Background()
	if err := h.Connect(ctx, *ai); err != nil {
		b.Fatal(err)
	}
	pid := cmd.Process.Pid
	exchange := func(proto string, req []byte) ([]byte, error) {
		s, err := h.NewStream(ctx, ai.ID, protocol.ID(proto))
		if err != nil {
			return nil, err
		}
		defer s.Close()
		s.SetDeadline(time.Now().Add(10 * time.Second))
		return exchangeFrame(s, req)
	}
	// The victim's ids, from a sync page.
	page, err := exchange(federation.SyncProtocol, []byte(`{"page":0}`))
	if err != nil {
		b.Fatal(err)
	}
	var p struct {
		Entries []json.RawMessage `json:"entries"`
	}
	if err := json.Unmarshal(page, &p); err != nil || len(p.Entries) < 256 {
		b.Fatalf("sync page: %d entries, %v", len(p.Entries), err)
	}
	fetch := []byte{'f'}
	for _, e := range p.Entries[:256] {
		h := sha256.Sum256(e)
		fetch = append(fetch, h[:]...)
	}

	idle0, _ := procCPU(pid)
	time.Sleep(2 * time.Second)
	idle1, _ := procCPU(pid)
	idle := (idle1 - idle0).Seconds() / 2

	const run, steady = 20 * time.Second, 10 * time.Second
	b.ResetTimer()
	start := time.Now()
	c0, _ := procCPU(pid)
	var cMid time.Duration
	var midAt time.Time
	var in, out, rounds, refused int64
	for time.Since(start) < run {
		if cMid == 0 && time.Since(start) >= run-steady {
			cMid, _ = procCPU(pid)
			midAt = time.Now()
		}
		for _, q := range []struct {
			proto string
			req   []byte
		}{{federation.ReconcileProtocol, fetch}, {federation.SyncProtocol, []byte(`{"page":0}`)}} {
			ans, err := exchange(q.proto, q.req)
			out += int64(len(q.req) + 4)
			if err != nil {
				refused++
				continue
			}
			in += int64(len(ans) + 4)
		}
		rounds++
	}
	c1, _ := procCPU(pid)
	end := time.Now()
	b.StopTimer()
	whole := (c1 - c0).Seconds() / end.Sub(start).Seconds()
	last := (c1 - cMid).Seconds() / end.Sub(midAt).Seconds()
	b.ReportMetric(whole, "core-frac")
	b.ReportMetric(last, "steady-core-frac")
	b.ReportMetric(idle, "idle-core-frac")
	b.ReportMetric(float64(in)/float64(out), "bytes-out/in")
	b.Logf("victim CPU: %.3f of a core over %v (%.3f over the last %v; idle %.3f); %d rounds, %d refused; it sent %d B for %d B received",
		whole, run, last, steady, idle, rounds, refused, in, out)
}

func exchangeFrame(s lp2pnet.Stream, req []byte) ([]byte, error) {
	var l [4]byte
	binary.BigEndian.PutUint32(l[:], uint32(len(req)))
	if _, err := s.Write(append(l[:], req...)); err != nil {
		return nil, err
	}
	br := bufio.NewReader(s)
	if _, err := io.ReadFull(br, l[:]); err != nil {
		return nil, err
	}
	b := make([]byte, binary.BigEndian.Uint32(l[:]))
	_, err := io.ReadFull(br, b)
	return b, err
}
