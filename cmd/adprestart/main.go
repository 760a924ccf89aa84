// Command adprestart measures what a node's start costs as its history
// grows: it fills a data dir with N records in R rooms through the real
// write path (in process), stops the node cleanly, then starts the real
// adpnode binary on that dir several times and reports the time until it
// answers /readyz and its resident memory once idle.
//
//	go build -o /tmp/adpnode ./cmd/adpnode
//	go run ./cmd/adprestart -bin /tmp/adpnode -records 100000 -rooms 100
//
// A data dir is reused when it already holds at least -records records
// (pass -dir to keep one between runs).
package main

import (
	"context"
	"crypto/ed25519"
	"encoding/binary"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/adpnode/adpnode/adp"
	"github.com/adpnode/adpnode/adp/identity"
	"github.com/adpnode/adpnode/node"
	"github.com/adpnode/adpnode/stack"
)

func main() {
	bin := flag.String("bin", "", "path of the adpnode binary to start (required)")
	records := flag.Int("records", 100_000, "records to write in all")
	rooms := flag.Int("rooms", 0, "rooms to spread them over (default records/1000)")
	dir := flag.String("dir", "", "data dir (default a temporary one, removed at the end)")
	starts := flag.Int("starts", 3, "clean starts to measure")
	idle := flag.Duration("idle", 5*time.Second, "idle time before reading RSS")
	flag.BoolVar(&federate, "federation", true, "start the node with federation on (loopback libp2p, no mDNS), as operators run it")
	bulk := flag.Bool("bulk", false, "fill the data dir with node.BulkLoad (same stored form, no per-write verification or sync) instead of the write path")
	flag.Parse()
	if *bin == "" {
		fmt.Fprintln(os.Stderr, "adprestart: -bin is required (go build -o /tmp/adpnode ./cmd/adpnode)")
		os.Exit(2)
	}
	if *rooms == 0 {
		*rooms = max(1, *records/1000)
	}
	if err := run(*bin, *dir, *records, *rooms, *starts, *idle, *bulk); err != nil {
		fmt.Fprintln(os.Stderr, "adprestart:", err)
		os.Exit(1)
	}
}

func run(bin, dir string, records, rooms, starts int, idle time.Duration, bulk bool) error {
	if dir == "" {
		d, err := os.MkdirTemp("", "adprestart-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(d)
		dir = d
	}
	data := filepath.Join(dir, "data")
	have := countFile(dir)
	if have < records {
		os.RemoveAll(data)
		began := time.Now()
		fillWith := fill
		if bulk {
			fillWith = func(data string, records, rooms int) error {
				return node.BulkLoad(data, rooms, records/rooms, func(n int64) { fmt.Printf("  … %d records\n", n) })
			}
		}
		if err := fillWith(data, records, rooms); err != nil {
			return err
		}
		d := time.Since(began)
		fmt.Printf("wrote %d records in %d rooms in %s (%.0f records/s)\n", records, rooms, d.Round(time.Second), float64(records)/d.Seconds())
		os.WriteFile(filepath.Join(dir, "records"), []byte(strconv.Itoa(records)), 0o644)
	} else {
		records = have
		fmt.Printf("reusing %s with %d records\n", data, have)
	}
	fmt.Printf("data dir: %s\n", humanBytes(dirSize(data)))
	if err := settle(bin, data); err != nil {
		return err
	}
	var times []time.Duration
	var rss, hwm []int64
	for i := 0; i < starts; i++ {
		s, err := start(bin, data)
		if err != nil {
			return err
		}
		time.Sleep(idle)
		r, h, anon, file := memory(s.cmd.Process.Pid)
		if err := s.stop(syscall.SIGTERM); err != nil {
			return err
		}
		times, rss, hwm = append(times, s.ready), append(rss, r), append(hwm, h)
		fmt.Printf("start %d: ready in %s, RSS %s idle (anonymous %s, file-backed %s; peak %s)\n", i+1,
			s.ready.Round(time.Millisecond), humanBytes(r), humanBytes(anon), humanBytes(file), humanBytes(h))
	}
	fmt.Printf("\n| records | rooms | data dir | start (median of %d) | idle RSS (median) | peak RSS |\n", starts)
	fmt.Printf("| ---: | ---: | ---: | ---: | ---: | ---: |\n")
	fmt.Printf("| %d | %d | %s | %s | %s | %s |\n", records, rooms, humanBytes(dirSize(data)),
		median(times).Round(time.Millisecond), humanBytes(medianInt(rss)), humanBytes(medianInt(hwm)))
	return nil
}

// settle runs the node once until Badger's compactions stop (its set of
// tables is unchanged for 15 s), so that the measured starts see the data
// dir as a node that has been running a while would leave it: a freshly
// filled LSM tree compacts for minutes, and tables a process writes stay
// mapped into its memory.
func settle(bin, data string) error {
	s, err := start(bin, data)
	if err != nil {
		return err
	}
	began, last, stable := time.Now(), "", time.Now()
	for time.Since(stable) < 15*time.Second && time.Since(began) < 20*time.Minute {
		time.Sleep(time.Second)
		names, _ := filepath.Glob(filepath.Join(data, "*.sst"))
		if cur := strings.Join(names, ","); cur != last {
			last, stable = cur, time.Now()
		}
	}
	fmt.Printf("settled: compactions quiet after %s\n", time.Since(began).Round(time.Second))
	return s.stop(syscall.SIGTERM)
}

func countFile(dir string) int {
	b, err := os.ReadFile(filepath.Join(dir, "records"))
	if err != nil {
		return 0
	}
	n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return n
}

// fill writes records through node.Submit of a host built as serve builds
// it (stack, without federation and HTTP serving): rooms created
// by their own agents, then messages, each anchored on the head the last
// answer gave. What serve keeps beside the records (attention's mentions)
// is in the data dir too.
func fill(data string, records, rooms int) error {
	st, err := stack.Open(stack.Config{Node: node.Config{DataDir: data, PublicURL: "http://127.0.0.1:8080",
		Rates: node.Rates{Message: 1 << 30, Signal: 1 << 30, Control: 1 << 30, MessageCeiling: 1 << 30,
			SignalCeiling: 1 << 30, ControlCeiling: 1 << 30, AgentStatus: 1 << 30, Create: 1 << 30},
		Log: slog.New(slog.NewTextHandler(io.Discard, nil))}})
	if err != nil {
		return err
	}
	n := st.Node
	per := records / rooms
	var written atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 1)
	next := make(chan int)
	// Enough rooms written at once for group commit to batch many records
	// into each synced write.
	workers := min(rooms, 512)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range next {
				if err := fillRoom(n, r, per, &written); err != nil {
					select {
					case errs <- err:
					default:
					}
					return
				}
			}
		}()
	}
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(10 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				fmt.Printf("  … %d records\n", written.Load())
			}
		}
	}()
	for r := 0; r < rooms; r++ {
		select {
		case next <- r:
		case err := <-errs:
			close(next)
			wg.Wait()
			close(done)
			st.Close()
			return err
		}
	}
	close(next)
	wg.Wait()
	close(done)
	select {
	case err := <-errs:
		st.Close()
		return err
	default:
	}
	return st.Close()
}

func fillRoom(n *node.Node, r, records int, written *atomic.Int64) error {
	seed := make([]byte, 32)
	binary.BigEndian.PutUint64(seed, uint64(r)+1)
	copy(seed[8:], "adprestart")
	key, _ := identity.KeyFromSeed(seed)
	actor := identity.AgentIDFromKey(key.Public().(ed25519.PublicKey))
	var nonce int64
	sign := func(typ, room string, seq int64, hash string, payload string) ([]byte, error) {
		now := time.Now().UnixMilli()
		nonce = identity.NextNonce(nonce, now)
		ev := identity.Event{Protocol: adp.Protocol, Type: typ, Actor: actor, CreatedAt: now, Nonce: nonce, Payload: json.RawMessage(payload)}
		if room != "" {
			ev.RoomID, ev.BaseSeq, ev.BaseHash = &room, &seq, &hash
		}
		env, err := identity.Sign(key, ev)
		if err != nil {
			return nil, err
		}
		return env.Raw, nil
	}
	now := time.Now().UnixMilli()
	create := fmt.Sprintf(`{"end_time":%d,"start_time":%d,"tags":["bench"],"topic":"restart bench %d","types":[{"use":"adp:reactions/1.0"}],"visibility":"public"}`,
		now+6*24*3600*1000, now, r)
	env, err := sign("room.create", "", 0, "", create)
	if err != nil {
		return err
	}
	res, err := n.Submit(context.Background(), env, "")
	if err != nil {
		return fmt.Errorf("room.create: %w", err)
	}
	room, seq, hash := res.Record.RoomID, res.Record.Seq, res.Record.Hash
	written.Add(1)
	for i := 1; i < records; i++ {
		env, err := sign("message.create", room, seq, hash,
			fmt.Sprintf(`{"content":"restart bench message %d of room %d, long enough to look like a sentence someone wrote","content_type":"text/plain"}`, i, r))
		if err != nil {
			return err
		}
		res, err := n.Submit(context.Background(), env, room)
		if err != nil {
			return fmt.Errorf("message %d: %w", i, err)
		}
		seq, hash = res.Record.Seq, res.Record.Hash
		written.Add(1)
	}
	return nil
}

type child struct {
	cmd   *exec.Cmd
	done  chan error
	ready time.Duration
}

// start runs adpnode serve on data and waits for /readyz.
// federate is whether measured nodes run federation (-federation).
var federate bool

func start(bin, data string) (*child, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := l.Addr().String()
	l.Close()
	args := []string{"serve", "--data", data, "--listen", addr, "--public-url", "http://" + addr}
	if federate {
		args = append(args, "--p2p-listen", "/ip4/127.0.0.1/tcp/0", "--mdns=false")
	} else {
		args = append(args, "--no-federation")
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = io.Discard, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	began := time.Now()
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	c := &child{cmd: cmd, done: make(chan error, 1)}
	go func() { c.done <- cmd.Wait() }()
	hc := &http.Client{Timeout: time.Second}
	for deadline := began.Add(10 * time.Minute); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		select {
		case err := <-c.done:
			return nil, fmt.Errorf("adpnode exited before it was ready: %v", err)
		default:
		}
		resp, err := hc.Get("http://" + addr + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				c.ready = time.Since(began)
				return c, nil
			}
		}
	}
	cmd.Process.Kill()
	return nil, fmt.Errorf("adpnode not ready after 10 minutes")
}

func (c *child) stop(sig syscall.Signal) error {
	c.cmd.Process.Signal(sig)
	select {
	case <-c.done:
		return nil
	case <-time.After(2 * time.Minute):
		c.cmd.Process.Kill()
		return fmt.Errorf("adpnode did not stop on %v", sig)
	}
}

// memory reads VmRSS, VmHWM (peak), RssAnon (heap, stacks) and RssFile
// (file pages mapped in: the binary, Badger's memory-mapped tables) of
// pid, in bytes.
func memory(pid int) (rss, hwm, anon, file int64) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, 0, 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		v, _ := strconv.ParseInt(f[1], 10, 64)
		switch f[0] {
		case "VmRSS:":
			rss = v << 10
		case "VmHWM:":
			hwm = v << 10
		case "RssAnon:":
			anon = v << 10
		case "RssFile:":
			file = v << 10
		}
	}
	return rss, hwm, anon, file
}

func dirSize(dir string) int64 {
	var n int64
	filepath.Walk(dir, func(_ string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() {
			n += info.Size()
		}
		return nil
	})
	return n
}

func humanBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.0f MiB", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%d KiB", n>>10)
}

func median(d []time.Duration) time.Duration {
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

func medianInt(v []int64) int64 {
	s := append([]int64(nil), v...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}
