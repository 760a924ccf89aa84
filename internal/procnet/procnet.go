// Package procnet runs adpnode nodes as child processes (`adpnode serve`)
// on 127.0.0.1, with default settings except their ports and
// --allow-private-peers (loopback needs it): the whole-system tests of
// discovery and cmd/adpscale build on it. It reads a node's CPU time and
// resident memory from /proc (Linux).
package procnet

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/adpnode/adpnode/client"
)

// Build compiles adpnode into dir and returns the binary's path. It runs
// the go tool, so the working directory must be inside the module.
func Build(dir string) (string, error) {
	bin := filepath.Join(dir, "adpnode")
	cmd := exec.Command("go", "build", "-o", bin, "github.com/adpnode/adpnode/cmd/adpnode")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build adpnode: %w\n%s", err, out)
	}
	return bin, nil
}

// Node is one adpnode serve child process.
type Node struct {
	Name string
	Dir  string // its data directory; its stderr goes to Dir/../Name.log
	HTTP string // http://127.0.0.1:port
	P2P  string // its libp2p address, /ip4/127.0.0.1/tcp/port/p2p/<id>
	// Args are the serve arguments it was started with (restarts reuse
	// them).
	Args []string

	bin     string
	logPath string
	cmd     *exec.Cmd
	done    chan struct{}
}

// freePort is a TCP port on 127.0.0.1 free a moment ago.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// Start runs `bin serve` for a node named name under root, bootstrapping
// from the nodes in boot, with extra serve flags, and waits (up to
// within) until it answers /readyz and has printed its libp2p address
// (unless extra holds --no-federation).
func Start(bin, root, name string, boot []*Node, within time.Duration, extra ...string) (*Node, error) {
	hp, err := freePort()
	if err != nil {
		return nil, err
	}
	pp, err := freePort()
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(root, name)
	args := []string{"serve", "--data", dir, "--listen", "127.0.0.1:" + strconv.Itoa(hp),
		"--p2p-listen", "/ip4/127.0.0.1/tcp/" + strconv.Itoa(pp), "--allow-private-peers"}
	for _, b := range boot {
		args = append(args, "--bootstrap", b.P2P)
	}
	args = append(args, extra...)
	n := &Node{Name: name, Dir: dir, HTTP: "http://127.0.0.1:" + strconv.Itoa(hp), Args: args, bin: bin,
		logPath: filepath.Join(root, name+".log")}
	return n, n.start(within)
}

func (n *Node) start(within time.Duration) error {
	logf, err := os.OpenFile(n.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	fi, _ := logf.Stat()
	from := fi.Size()
	cmd := exec.Command(n.bin, n.Args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = append(os.Environ(), "GOMAXPROCS=2")
	if err := cmd.Start(); err != nil {
		logf.Close()
		return err
	}
	n.cmd, n.done = cmd, make(chan struct{})
	go func() { // owned by the node: ends when the process does
		_ = cmd.Wait() // a killed node's exit status is expected
		logf.Close()
		close(n.done)
	}()
	deadline := time.Now().Add(within)
	federated := !slices.Contains(n.Args, "--no-federation")
	for {
		if n.P2P == "" && federated {
			n.P2P = readP2P(n.logPath, from)
		}
		if (n.P2P != "" || !federated) && n.ready() {
			return nil
		}
		select {
		case <-n.done:
			return fmt.Errorf("%s exited before it was ready (log %s)", n.Name, n.logPath)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			n.Kill()
			return fmt.Errorf("%s not ready within %v (log %s)", n.Name, within, n.logPath)
		}
	}
}

// readP2P finds the first libp2p address of the JSON "adpnode serving"
// line after offset from.
func readP2P(path string, from int64) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	if _, err := f.Seek(from, io.SeekStart); err != nil {
		return ""
	}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var line struct {
			Msg    string   `json:"msg"`
			Libp2p []string `json:"libp2p"`
		}
		if json.Unmarshal(sc.Bytes(), &line) == nil && line.Msg == "adpnode serving" && len(line.Libp2p) > 0 {
			return line.Libp2p[0]
		}
	}
	return ""
}

var httpc = &http.Client{Timeout: 10 * time.Second}

func (n *Node) ready() bool {
	resp, err := httpc.Get(n.HTTP + "/readyz")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// PID is the process ID (0 when not running).
func (n *Node) PID() int {
	if n.cmd == nil || n.cmd.Process == nil {
		return 0
	}
	return n.cmd.Process.Pid
}

// Running reports whether the process is alive.
func (n *Node) Running() bool {
	if n.done == nil {
		return false
	}
	select {
	case <-n.done:
		return false
	default:
		return true
	}
}

// Kill sends SIGKILL and waits for the process to end.
func (n *Node) Kill() {
	if !n.Running() {
		return
	}
	_ = n.cmd.Process.Signal(syscall.SIGKILL) // fails only if it has already exited
	<-n.done
}

// Stop sends SIGTERM and waits (up to 30 s, then SIGKILL).
func (n *Node) Stop() {
	if !n.Running() {
		return
	}
	_ = n.cmd.Process.Signal(syscall.SIGTERM) // fails only if it has already exited
	select {
	case <-n.done:
	case <-time.After(30 * time.Second):
		n.Kill()
	}
}

// Restart starts the node again with the same data, ports and flags.
func (n *Node) Restart(within time.Duration) error {
	n.Stop()
	return n.start(within)
}

// Log returns what the node wrote to stderr so far.
func (n *Node) Log() string {
	b, _ := os.ReadFile(n.logPath)
	return string(b)
}

// clockTicks is the kernel's USER_HZ, the unit of utime and stime in
// /proc/<pid>/stat (100 on every Linux architecture Go supports).
const clockTicks = 100

// CPU is the CPU time (user + system) the process has used.
func (n *Node) CPU() (time.Duration, error) { return CPU(n.PID()) }

// Wakes is the number of times the process's threads were switched
// out so far (see Wakes).
func (n *Node) Wakes() (int64, error) { return Wakes(n.PID()) }

// Wakes is the number of context switches, voluntary and involuntary,
// of the threads of process pid so far (the sum over
// /proc/<pid>/task/*/status). On an idle process each one is a thread
// that woke to do something (a timer, a poll, the Go runtime's spinning
// M) and went back to sleep, so its rate counts wake-ups: unlike CPU
// time, which a loaded machine inflates (cache misses, frequency, the
// 10 ms accounting tick), it does not depend on what else the machine
// runs. Threads that have exited are not counted.
func Wakes(pid int) (int64, error) {
	v, inv, err := Switches(pid)
	return v + inv, err
}

// Switches is the voluntary and the involuntary context switches of the
// threads of process pid so far. A voluntary one is a thread that went
// to sleep (it had woken for something); an involuntary one is a thread
// preempted while it ran, which grows with what else the machine runs.
func Switches(pid int) (voluntary, involuntary int64, err error) {
	dir := fmt.Sprintf("/proc/%d/task", pid)
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return 0, 0, err
	}
	for _, t := range tasks {
		b, err := os.ReadFile(filepath.Join(dir, t.Name(), "status"))
		if err != nil {
			continue // the thread exited between the listing and the read
		}
		for _, l := range strings.Split(string(b), "\n") {
			k, v, ok := strings.Cut(l, ":")
			if !ok || (k != "voluntary_ctxt_switches" && k != "nonvoluntary_ctxt_switches") {
				continue
			}
			c, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err != nil {
				return 0, 0, fmt.Errorf("%s: %w", k, err)
			}
			if k == "voluntary_ctxt_switches" {
				voluntary += c
			} else {
				involuntary += c
			}
		}
	}
	return voluntary, involuntary, nil
}

// CPU is the CPU time (user + system) process pid has used.
func CPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) is in parentheses and may hold spaces.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, errors.New("unreadable /proc stat")
	}
	f := strings.Fields(s[i+1:])
	// f[0] is field 3 (state): utime is field 14, stime field 15.
	if len(f) < 13 {
		return 0, errors.New("short /proc stat")
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, err
	}
	return time.Duration(ut+st) * time.Second / clockTicks, nil
}

// RSS is the process's resident memory in bytes.
func (n *Node) RSS() (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", n.PID()))
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10, err
		}
	}
	return 0, errors.New("no VmRSS")
}

// GetJSON reads path from the node's HTTP API into v.
func (n *Node) GetJSON(path string, v any) error {
	resp, err := httpc.Get(n.HTTP + path)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %d %s", path, resp.StatusCode, b)
	}
	return json.Unmarshal(b, v)
}

// Peer is one entry of /v1/federation/peers.
type Peer struct {
	PeerID    string `json:"peer_id"`
	Connected bool   `json:"connected"`
	Source    string `json:"source"`
}

// Peers lists the node's connected peers.
func (n *Node) Peers() ([]Peer, error) {
	var out struct {
		Result []Peer `json:"result"`
	}
	if err := n.GetJSON("/v1/federation/peers", &out); err != nil {
		return nil, err
	}
	var conn []Peer
	for _, p := range out.Result {
		if p.Connected {
			conn = append(conn, p)
		}
	}
	return conn, nil
}

// PeerID is the node's libp2p peer ID (from its address).
func (n *Node) PeerID() string {
	_, id, _ := strings.Cut(n.P2P, "/p2p/")
	return id
}

// Lists reports whether the node's GET /v1/rooms/public (local and
// federated) lists roomID, searching by its topic.
func (n *Node) Lists(roomID, topic string) (bool, error) {
	var out struct {
		Result []struct {
			ID string `json:"id"`
		} `json:"result"`
	}
	if err := n.GetJSON("/v1/rooms/public?keyword="+url.QueryEscape(topic), &out); err != nil {
		return false, err
	}
	for _, r := range out.Result {
		if r.ID == roomID {
			return true, nil
		}
	}
	return false, nil
}

// CreateRoom creates a public room with topic on the node, as a fresh
// agent, lasting an hour; it returns the room ID.
func (n *Node) CreateRoom(ctx context.Context, topic string) (string, error) {
	key, err := client.GenerateKey()
	if err != nil {
		return "", err
	}
	c := client.New(n.HTTP, key)
	now := time.Now().UnixMilli()
	created, err := c.CreateRoom(ctx, map[string]any{"topic": topic, "visibility": "public", "start_time": now,
		"end_time": now + 3_600_000, "tags": []string{}})
	if err != nil {
		return "", err
	}
	return created.ID, nil
}
