//go:build e2e

package federation_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	lpnet "github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/p2p/net/swarm"
	"github.com/libp2p/go-libp2p/p2p/protocol/ping"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/adpnode/adpnode/federation"
	"github.com/adpnode/adpnode/internal/adptest"
	"github.com/adpnode/adpnode/internal/fedtest"
)

// The NAT test builds three network namespaces of its own, each with its
// own loopback and no route out of the machine:
//
//	ns A (10.77.1.2) ── veth ── ns R (10.77.1.1 | 10.77.2.1) ── veth ── ns B (10.77.2.2)
//
// R does not forward (ip_forward 0) and A and B have no route to each
// other's subnet, so A and B can reach only R — as two nodes behind NATs
// that admit no inbound connection can reach only a public one. R runs
// the circuit relay v2 service; A and B are nodes with the default NAT
// options and reachability private. Each node is this test binary run
// again inside its namespace (a namespace belongs to an OS thread, and a
// Go process's goroutines move between threads); they exchange peer IDs
// and results through files in a shared directory. These 10.77.x
// addresses exist only inside the namespaces the test creates and
// removes (the one exception to 127.0.0.1-only tests).

const (
	natRoleEnv = "ADP_NAT_ROLE"
	natDirEnv  = "ADP_NAT_DIR"
)

// natResult is what node B found (b.json).
type natResult struct {
	DirectErr  string  `json:"direct_err"`  // dialling A's own address
	GhostErr   string  `json:"ghost_err"`   // dialling, through R, a peer without a reservation
	Circuit    string  `json:"circuit"`     // the address B reached A at
	Tries      int     `json:"tries"`       // relayed dials until A's reservation answered
	ReachedMs  float64 `json:"reached_ms"`  // from B's start
	Relayed    bool    `json:"relayed"`     // every connection to A is a relayed one
	Limited    bool    `json:"limited"`     // and limited (relay v2 limits)
	PingRTTMs  float64 `json:"ping_rtt_ms"` // a ping over the relayed connection
	AgentOfA   string  `json:"agent_of_a"`  // A's identify agent version, seen through R
	ProtocolsA int     `json:"protocols_a"` // protocols A announced through R
}

// TestNATRelayAcrossNamespaces: two private nodes that cannot reach each
// other connect through a third node's circuit relay v2: A reserves a
// slot on R by itself (auto-relay, default NAT options), B dials
// R/p2p-circuit/A, identify and a ping run over the relayed connection;
// B's direct dial to A fails, and R refuses to relay to a peer that holds
// no reservation. Skipped, saying why, where network
// namespaces cannot be built (not root, no ip command, no netns support).
func TestNATRelayAcrossNamespaces(t *testing.T) {
	if testing.Short() {
		t.Skip("NAT namespace test: skipped in -short mode")
	}
	if os.Geteuid() != 0 {
		t.Skip("NAT namespace test needs root to build network namespaces (CI runs as root): skipped")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("NAT namespace test needs the ip command (iproute2) to build network namespaces: skipped")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ns := buildNATNamespaces(t)
	dir := t.TempDir()
	start := time.Now()
	relay := startNATNode(t, ns["r"], "relay", dir, exe)
	a := startNATNode(t, ns["a"], "a", dir, exe)
	b := startNATNode(t, ns["b"], "b", dir, exe)
	errB := b.wait(3 * time.Minute)
	a.stop()
	relay.stop()
	if errB != nil {
		for _, n := range []*natNode{relay, a, b} {
			t.Logf("--- node %s output:\n%s", n.role, n.out.String())
		}
		t.Fatalf("node b: %v", errB)
	}
	var res natResult
	readNATFile(t, dir, "b", &res)
	t.Logf("B reached A through R after %.0f ms (%d relayed dials), at %s; ping over it %.2f ms; direct dial refused: %s; A's agent %q, %d protocols",
		res.ReachedMs, res.Tries, res.Circuit, res.PingRTTMs, res.DirectErr, res.AgentOfA, res.ProtocolsA)
	if res.DirectErr == "" {
		t.Fatal("B dialled A directly: the namespaces are not isolated")
	}
	if !strings.Contains(res.GhostErr, "NO_RESERVATION") {
		t.Fatalf("dialling a peer without a reservation through R: %q, want NO_RESERVATION", res.GhostErr)
	}
	t.Logf("through R to a peer without a reservation: %s", res.GhostErr)
	if !res.Relayed || !res.Limited {
		t.Fatalf("B's connection to A: relayed %v, limited %v; want a limited relayed connection", res.Relayed, res.Limited)
	}
	if res.PingRTTMs <= 0 || res.ProtocolsA == 0 {
		t.Fatalf("no ping or identify over the relayed connection: %+v", res)
	}
	t.Logf("whole test %v", time.Since(start).Round(time.Millisecond))
}

// buildNATNamespaces creates the namespaces r, a and b and their links;
// it skips the test when the kernel or the container refuses.
func buildNATNamespaces(t *testing.T) map[string]string {
	t.Helper()
	tag := fmt.Sprintf("adpnat%d", os.Getpid()%100000)
	ns := map[string]string{"r": tag + "r", "a": tag + "a", "b": tag + "b"}
	run := func(args ...string) error {
		out, err := exec.Command("ip", args...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
		}
		return nil
	}
	for _, role := range []string{"r", "a", "b"} {
		if err := run("netns", "add", ns[role]); err != nil {
			t.Skipf("NAT namespace test cannot create a network namespace here (%v): skipped", err)
		}
		t.Cleanup(func() { _ = run("netns", "del", ns[role]) })
		if err := run("-n", ns[role], "link", "set", "lo", "up"); err != nil {
			t.Fatal(err)
		}
	}
	for i, side := range []string{"a", "b"} {
		rEnd, sideEnd := tag+"r"+side, tag+side
		steps := [][]string{
			{"link", "add", rEnd, "type", "veth", "peer", "name", sideEnd},
			{"link", "set", rEnd, "netns", ns["r"]},
			{"link", "set", sideEnd, "netns", ns[side]},
			{"-n", ns["r"], "addr", "add", fmt.Sprintf("10.77.%d.1/24", i+1), "dev", rEnd},
			{"-n", ns[side], "addr", "add", fmt.Sprintf("10.77.%d.2/24", i+1), "dev", sideEnd},
			{"-n", ns["r"], "link", "set", rEnd, "up"},
			{"-n", ns[side], "link", "set", sideEnd, "up"},
		}
		for j, s := range steps {
			if err := run(s...); err != nil {
				_ = run("link", "del", rEnd) // if it is still in this namespace
				if j == 0 {
					t.Skipf("NAT namespace test cannot create a veth pair here (%v): skipped", err)
				}
				t.Fatal(err)
			}
		}
	}
	out, err := exec.Command("ip", "netns", "exec", ns["r"], "sh", "-c", "echo 0 > /proc/sys/net/ipv4/ip_forward").CombinedOutput()
	if err != nil {
		t.Fatalf("turning forwarding off in %s: %v: %s", ns["r"], err, out)
	}
	return ns
}

// natNode is one child process: this test binary running
// TestNATNamespaceNode inside a namespace.
type natNode struct {
	role  string
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *bytes.Buffer
	done  chan error
}

func startNATNode(t *testing.T, netns, role, dir, exe string) *natNode {
	t.Helper()
	cmd := exec.Command("ip", "netns", "exec", netns, exe, "-test.run", "^TestNATNamespaceNode$", "-test.v", "-test.timeout", "3m")
	cmd.Env = append(os.Environ(), natRoleEnv+"="+role, natDirEnv+"="+dir)
	n := &natNode{role: role, cmd: cmd, out: &bytes.Buffer{}, done: make(chan error, 1)}
	cmd.Stdout, cmd.Stderr = n.out, n.out
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	n.stdin = stdin
	if err := cmd.Start(); err != nil {
		t.Fatalf("start node %s: %v", role, err)
	}
	go func() { n.done <- cmd.Wait() }()
	t.Cleanup(func() { n.stop() })
	return n
}

// wait waits for the node to exit by itself.
func (n *natNode) wait(within time.Duration) error {
	select {
	case err := <-n.done:
		n.done <- err
		return err
	case <-time.After(within):
		n.cmd.Process.Kill()
		return fmt.Errorf("still running after %v", within)
	}
}

// stop closes the node's stdin (it stops and exits) and waits for it.
func (n *natNode) stop() {
	n.stdin.Close()
	_ = n.wait(30 * time.Second)
}

func writeNATFile(t *testing.T, dir, name string, v any) {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(dir, name+".tmp")
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, name+".json")); err != nil {
		t.Fatal(err)
	}
}

func readNATFile(t *testing.T, dir, name string, v any) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatal(err)
	}
}

// awaitNATFile waits for another node's file.
func awaitNATFile(t *testing.T, dir, name string, v any) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		if _, err := os.Stat(filepath.Join(dir, name+".json")); err == nil {
			readNATFile(t, dir, name, v)
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s.json within a minute", name)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

type natPeer struct {
	PeerID string `json:"peer_id"`
}

// TestNATNamespaceNode is one node of TestNATRelayAcrossNamespaces, run
// by it inside a network namespace; on its own it skips.
func TestNATNamespaceNode(t *testing.T) {
	role, dir := os.Getenv(natRoleEnv), os.Getenv(natDirEnv)
	if role == "" || dir == "" {
		t.Skip("a node of TestNATRelayAcrossNamespaces, which runs it inside a network namespace")
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	start := time.Now()
	var relay natPeer
	o := fedtest.Options{Log: log}
	switch role {
	case "relay":
		o.P2PListen = []string{"/ip4/10.77.1.1/tcp/4001", "/ip4/10.77.2.1/tcp/4001"}
	case "a":
		o.P2PListen = []string{"/ip4/10.77.1.2/tcp/4001"}
		awaitNATFile(t, dir, "relay", &relay)
	case "b":
		o.P2PListen = []string{"/ip4/10.77.2.2/tcp/4001"}
		awaitNATFile(t, dir, "relay", &relay)
	default:
		t.Fatalf("unknown role %q", role)
	}
	o.Configure = func(_ string, c *federation.Config) {
		c.DHT = federation.DHTOff
		c.AllowPrivateAddrs = true
		switch role {
		case "relay":
			c.NAT = federation.NATOptions{RelayService: true, Reachability: "public"}
		case "a":
			c.NAT = federation.NATOptions{Reachability: "private"}
			c.Peers = []string{"/ip4/10.77.1.1/tcp/4001/p2p/" + relay.PeerID}
		case "b":
			c.NAT = federation.NATOptions{Reachability: "private"}
			c.Peers = []string{"/ip4/10.77.2.1/tcp/4001/p2p/" + relay.PeerID}
		}
	}
	p := fedtest.Start(t, role, t.TempDir(), adptest.NewClock(), 0, o)
	writeNATFile(t, dir, role, natPeer{PeerID: p.Fed.PeerID().String()})
	if role != "b" {
		io.Copy(io.Discard, os.Stdin) // until the parent closes it
		return
	}
	var a natPeer
	awaitNATFile(t, dir, "a", &a)
	aID, err := peer.Decode(a.PeerID)
	if err != nil {
		t.Fatal(err)
	}
	h := federation.LibP2PHost(p.Fed)
	var res natResult
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	err = h.Connect(ctx, peer.AddrInfo{ID: aID, Addrs: []ma.Multiaddr{ma.StringCast("/ip4/10.77.1.2/tcp/4001")}})
	cancel()
	if err == nil {
		res.DirectErr = ""
		writeNATFile(t, dir, "b", res)
		t.Fatal("dialled A directly")
	}
	res.DirectErr = shortErr(err)
	h.Peerstore().ClearAddrs(aID)
	if sw, ok := h.Network().(*swarm.Swarm); ok {
		sw.Backoff().Clear(aID)
	}
	// A peer that holds no reservation on R is not reachable through it.
	ghost, err := peer.Decode("12D3KooWRBhwfeP2Y9CDkFRBAZ1pmxUadH36TKuk3KtKm5XXP8mA")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel = context.WithTimeout(context.Background(), 5*time.Second)
	err = p.Fed.Connect(ctx, "/ip4/10.77.2.1/tcp/4001/p2p/"+relay.PeerID+"/p2p-circuit/p2p/"+ghost.String())
	cancel()
	if err == nil {
		writeNATFile(t, dir, "b", res)
		t.Fatal("R relayed a connection to a peer without a reservation")
	}
	res.GhostErr = shortErr(err)
	res.Circuit = "/ip4/10.77.2.1/tcp/4001/p2p/" + relay.PeerID + "/p2p-circuit/p2p/" + a.PeerID
	// A's reservation comes when its auto-relay runs (10 s after start at
	// the earliest): until then R answers NO_RESERVATION.
	deadline := time.Now().Add(2 * time.Minute)
	for {
		res.Tries++
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err = p.Fed.Connect(ctx, res.Circuit)
		cancel()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no relayed connection to A within 2 min (%d tries): %v", res.Tries, err)
		}
		if sw, ok := h.Network().(*swarm.Swarm); ok {
			sw.Backoff().Clear(aID)
		}
		time.Sleep(500 * time.Millisecond)
	}
	res.ReachedMs = ms(time.Since(start))
	conns := h.Network().ConnsToPeer(aID)
	res.Relayed, res.Limited = len(conns) > 0, len(conns) > 0
	for _, c := range conns {
		if _, err := c.RemoteMultiaddr().ValueForProtocol(ma.P_CIRCUIT); err != nil {
			res.Relayed = false
		}
		if !c.Stat().Limited {
			res.Limited = false
		}
	}
	// Identify runs over limited connections; wait for A's protocols.
	waitDeadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(waitDeadline) {
		if ps, _ := h.Peerstore().GetProtocols(aID); len(ps) > 0 {
			res.ProtocolsA = len(ps)
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if v, err := h.Peerstore().Get(aID, "AgentVersion"); err == nil {
		res.AgentOfA, _ = v.(string)
	}
	pctx, pcancel := context.WithTimeout(lpnet.WithAllowLimitedConn(context.Background(), "nat test"), 10*time.Second)
	r := <-ping.Ping(pctx, h, aID)
	pcancel()
	if r.Error != nil {
		writeNATFile(t, dir, "b", res)
		t.Fatalf("ping A over the relayed connection: %v", r.Error)
	}
	res.PingRTTMs = ms(r.RTT)
	writeNATFile(t, dir, "b", res)
}

// shortErr is an error on one line, at most 300 bytes.
func shortErr(err error) string {
	s := strings.Join(strings.Fields(err.Error()), " ")
	if len(s) > 300 {
		s = s[:300]
	}
	return s
}
