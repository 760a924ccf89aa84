//go:build e2e

package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"go.yaml.in/yaml/v3"
)

// logRecords is a slog handler that keeps every record.
type logRecords struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (c *logRecords) Enabled(context.Context, slog.Level) bool { return true }
func (c *logRecords) Handle(_ context.Context, r slog.Record) error {
	c.mu.Lock()
	c.recs = append(c.recs, r.Clone())
	c.mu.Unlock()
	return nil
}
func (c *logRecords) WithAttrs([]slog.Attr) slog.Handler { return c }
func (c *logRecords) WithGroup(string) slog.Handler      { return c }

// count returns how many records at level contain every part.
func (c *logRecords) count(level slog.Level, parts ...string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
next:
	for _, r := range c.recs {
		if r.Level != level {
			continue
		}
		for _, p := range parts {
			if !strings.Contains(r.Message, p) {
				continue next
			}
		}
		n++
	}
	return n
}

// --allow-private-peers is federation's switch; allow_private_packs alone
// (an old config) still opens it, with a deprecation note; an explicit
// allow_private_peers wins.
func TestAllowPrivatePeersResolve(t *testing.T) {
	peersOf := func(args ...string) bool {
		t.Helper()
		var eff struct {
			Packs bool `yaml:"allow_private_packs"`
			Peers bool `yaml:"allow_private_peers"`
		}
		out := mustCLI(t, append([]string{"config", "check"}, args...)...)
		if err := yaml.Unmarshal([]byte(out), &eff); err != nil {
			t.Fatal(err)
		}
		return eff.Peers
	}
	old := writeFile(t, "old.yaml", "listen: 127.0.0.1:8080\ndata: ./d\nallow_private_packs: true\n")
	both := writeFile(t, "both.yaml", "listen: 127.0.0.1:8080\ndata: ./d\nallow_private_packs: true\nallow_private_peers: false\n")
	peersOnly := writeFile(t, "peers.yaml", "listen: 127.0.0.1:8080\ndata: ./d\nallow_private_peers: true\n")
	for _, c := range []struct {
		args []string
		want bool
	}{
		{nil, false},
		{[]string{"--allow-private-peers"}, true},
		{[]string{"--config", old}, true},
		{[]string{"--config", both}, false},
		{[]string{"--config", both, "--allow-private-peers"}, true},
		{[]string{"--config", peersOnly}, true},
		{[]string{"--config", peersOnly, "--allow-private-peers=false"}, false},
	} {
		if got := peersOf(c.args...); got != c.want {
			t.Errorf("%q: allow_private_peers %v, want %v", c.args, got, c.want)
		}
	}
	// Hostile: a non-boolean value is a usage error.
	wantExit(t, exitUsage, "sometimes", "config", "check", "--config",
		writeFile(t, "bad.yaml", "allow_private_peers: sometimes\n"))
}

// On loopback, federation warns once at start with the exact switch, not
// at all once it is set; an old config logs the deprecation once. The
// same holds after a restart on the same data dir.
func TestAllowPrivatePeersWarnings(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	old := writeFile(t, "old.yaml", "allow_private_packs: true\n")
	for _, c := range []struct {
		name            string
		args            []string
		loopback, depre int
	}{
		{"unset", nil, 1, 0},
		{"set", []string{"--allow-private-peers"}, 0, 0},
		{"old config", []string{"--config", old}, 0, 1},
		{"unset again", nil, 1, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			logs := &logRecords{}
			args := append([]string{"--listen", "127.0.0.1:0", "--data", data, "--p2p-listen", "/ip4/127.0.0.1/tcp/0"}, c.args...)
			s := startServe(t, slog.New(logs), args...)
			defer s.close()
			if n := logs.count(slog.LevelWarn, "loopback or private", "--allow-private-peers"); n != c.loopback {
				t.Errorf("%d loopback warnings naming --allow-private-peers, want %d", n, c.loopback)
			}
			if n := logs.count(slog.LevelWarn, "deprecated", "allow_private_peers"); n != c.depre {
				t.Errorf("%d deprecation notes, want %d", n, c.depre)
			}
		})
	}
}

// A second node asked for the libp2p port the first holds fails at start,
// naming the address.
func TestServeLibp2pPortInUse(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	p2p := fmt.Sprintf("/ip4/127.0.0.1/tcp/%d", port)
	first := startServe(t, nil, "--listen", "127.0.0.1:0", "--data", filepath.Join(t.TempDir(), "a"), "--p2p-listen", p2p)
	defer first.close()
	cmd := serveCmd()
	if err := cmd.Flags().Parse([]string{"--listen", "127.0.0.1:0", "--data", filepath.Join(t.TempDir(), "b"), "--p2p-listen", p2p}); err != nil {
		t.Fatal(err)
	}
	ss, err := resolveServe(cmd)
	if err != nil {
		t.Fatal(err)
	}
	ss.cfg.Log = slog.New(slog.DiscardHandler)
	s, err := startStack(ss.cfg, ss.listen, ss.fed, ss.cfg.Log)
	if err == nil {
		s.close()
		t.Fatal("second node started on a libp2p port in use")
	}
	if !strings.Contains(err.Error(), p2p) || !strings.Contains(err.Error(), "in use") {
		t.Fatalf("error %q does not name the address in use", err)
	}
}
