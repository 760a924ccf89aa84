//go:build e2e

package main

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	"go.yaml.in/yaml/v3"

	"github.com/adpnode/adpnode/cmd/adpnode/internal/settings"
	"github.com/adpnode/adpnode/hostapi"
	"github.com/adpnode/adpnode/node"
)

// Every example config parses with the serve command's strict decoder.
func TestExampleConfigs(t *testing.T) {
	files, _ := filepath.Glob("../../configs/*.yaml")
	if len(files) < 5 {
		t.Fatalf("found %d example configs", len(files))
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		v, err := serveTable.Resolve(pflag.NewFlagSet("x", pflag.ContinueOnError), nil, b)
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		if v.Get("listen").Source != settings.FromFile || v.Get("data").Source != settings.FromFile {
			t.Errorf("%s: listen and data must be set", f)
		}
	}
}

// Environment variables fill flags not given on the command line.
func TestEnvOverrides(t *testing.T) {
	t.Setenv("ADPNODE_LISTEN", "127.0.0.1:9999")
	t.Setenv("ADPNODE_PEER", "/ip4/127.0.0.1/tcp/1/p2p/a,/ip4/127.0.0.1/tcp/2/p2p/b")
	cmd := serveCmd()
	if err := cmd.Flags().Parse([]string{"--data", "x"}); err != nil {
		t.Fatal(err)
	}
	t.Setenv("ADPNODE_DATA", "ignored-because-the-flag-was-given")
	if err := applyEnv(cmd); err != nil {
		t.Fatal(err)
	}
	if v, _ := cmd.Flags().GetString("listen"); v != "127.0.0.1:9999" {
		t.Errorf("listen = %q", v)
	}
	if v, _ := cmd.Flags().GetString("data"); v != "x" {
		t.Errorf("data = %q (the flag must win)", v)
	}
	if v, _ := cmd.Flags().GetStringArray("peer"); len(v) != 2 {
		t.Errorf("peer = %q", v)
	}
}

// A partial rates: block keeps the defaults of what it does not
// name, a written 0 disables, and discovery on the running node shows what
// is in force.
func TestPartialRatesKeepDefaults(t *testing.T) {
	parse := func(doc string) (node.Rates, error) {
		t.Helper()
		v, err := serveTable.Resolve(pflag.NewFlagSet("x", pflag.ContinueOnError), nil, []byte(doc))
		if err != nil {
			return node.Rates{}, err
		}
		return ratesOf(v), nil
	}
	rates, err := parse("rates: {message: 10}\n")
	if err != nil {
		t.Fatal(err)
	}
	def := node.DefaultRates()
	want := def
	want.Message = 10
	if rates != want {
		t.Fatalf("rates: {message: 10} gave %+v, want %+v", rates, want)
	}
	s, err := startStack(node.Config{PublicURL: "http://127.0.0.1:0", DataDir: t.TempDir(), Rates: rates, Log: slog.New(slog.DiscardHandler)},
		"127.0.0.1:0", fedSettings{}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	resp, err := http.Get("http://" + s.addr + "/.well-known/agent-discourse")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var doc struct {
		Limits struct {
			Rates   map[string]int `json:"rates_per_minute"`
			Conns   int            `json:"connections"`
			PerAddr int            `json:"connections_per_address"`
		} `json:"limits"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil {
		t.Fatal(err)
	}
	got := doc.Limits.Rates
	if got["message"] != 10 || got["signal"] != def.Signal || got["control"] != def.Control || got["room_create"] != def.Create {
		t.Fatalf("discovery rates %v", got)
	}
	if doc.Limits.Conns != hostapi.DefaultMaxConnections || doc.Limits.PerAddr != hostapi.DefaultMaxConnectionsPerAddress {
		t.Fatalf("discovery connections %d, per address %d", doc.Limits.Conns, doc.Limits.PerAddr)
	}

	// 0 spelled out disables that limit only; everything 0 disables all.
	if r, _ := parse("rates: {signal: 0}\n"); r.Signal != 0 || r.Message != def.Message || r.Control != def.Control {
		t.Fatalf("rates: {signal: 0} gave %+v", r)
	}
	r, _ := parse("rates: {message: 0, signal: 0, control: 0, message_ceiling: 0, signal_ceiling: 0, control_ceiling: 0, agent_status: 0, room_create: 0, join_requests_per_hour: 0}\n")
	cfg := node.Config{Rates: r}
	cfg.Defaults()
	if cfg.Rates.Message != 0 || cfg.Rates.Create != 0 {
		t.Fatalf("all-zero rates were replaced by defaults: %+v", cfg.Rates)
	}
	// Hostile values are refused with a clear error.
	if _, err := parse("rates: {message: -1}\n"); err == nil || !strings.Contains(err.Error(), "rates.message") {
		t.Fatalf("negative rate: %v", err)
	}
}

// config check prints the effective settings: public_url follows --listen
// when the file only restates http://<its listen>; flag peers replace the
// file's; --mdns=false turns the file's mdns off.
func TestConfigCheckEffective(t *testing.T) {
	file := writeFile(t, "node.yaml", `listen: 127.0.0.1:8080
public_url: http://127.0.0.1:8080
data: ./data
federation:
  mdns: true
  peers:
    - /ip4/127.0.0.1/tcp/4101/p2p/12D3KooWFilePeer
`)
	out := mustCLI(t, "config", "check", "--config", file, "--listen", "127.0.0.1:18401",
		"--peer", "/ip4/127.0.0.1/tcp/4102/p2p/12D3KooWFlagPeer", "--mdns=false")
	var eff struct {
		Listen     string `yaml:"listen"`
		PublicURL  string `yaml:"public_url"`
		Federation struct {
			Peers []string `yaml:"peers"`
			MDNS  bool     `yaml:"mdns"`
		} `yaml:"federation"`
	}
	if err := yaml.Unmarshal([]byte(out), &eff); err != nil {
		t.Fatal(err, out)
	}
	if eff.Listen != "127.0.0.1:18401" || eff.PublicURL != "http://127.0.0.1:18401" {
		t.Errorf("listen %q public_url %q", eff.Listen, eff.PublicURL)
	}
	if len(eff.Federation.Peers) != 1 || !strings.HasSuffix(eff.Federation.Peers[0], "FlagPeer") {
		t.Errorf("peers %q: flags must replace the file's", eff.Federation.Peers)
	}
	if eff.Federation.MDNS {
		t.Error("--mdns=false did not turn the file's mdns off")
	}
	// Without flags, the file's settings stand.
	out = mustCLI(t, "config", "check", "--config", file)
	yaml.Unmarshal([]byte(out), &eff)
	if eff.PublicURL != "http://127.0.0.1:8080" || !eff.Federation.MDNS || len(eff.Federation.Peers) != 1 {
		t.Errorf("file settings lost: %s", out)
	}
	// A public_url the file sets to something else wins over the listen
	// address (a node behind a proxy).
	proxied := writeFile(t, "proxied.yaml", "listen: 127.0.0.1:8080\npublic_url: https://adp.example.org\ndata: ./d\n")
	out = mustCLI(t, "config", "check", "--config", proxied, "--listen", "127.0.0.1:9000")
	yaml.Unmarshal([]byte(out), &eff)
	if eff.PublicURL != "https://adp.example.org" {
		t.Errorf("explicit public_url lost: %s", out)
	}
}

// Hostile and broken files: unknown keys, bad values, placeholders.
func TestConfigCheckRejects(t *testing.T) {
	for name, body := range map[string]string{
		"unknown key":      "listen: 127.0.0.1:8080\nlisten_port: 9\n",
		"nested unknown":   "federation:\n  peer: []\n",
		"bad duration":     "federation:\n  announce_interval: soon\n",
		"placeholder peer": "federation:\n  peers: ['/ip4/127.0.0.1/tcp/4101/p2p/<node1-peer-id>']\n",
		"bad public_url":   "public_url: 127.0.0.1:8080\n",
		"bad log level":    "log_level: loud\n",
		"not yaml":         "{{{{",
		"negative body":    "max_body_bytes: -1\n",
	} {
		t.Run(name, func(t *testing.T) {
			code, _, errOut := cli(t, "config", "check", "--config", writeFile(t, "c.yaml", body))
			if code != exitUsage || errOut == "" {
				t.Errorf("exit %d, stderr %q", code, errOut)
			}
		})
	}
	wantExit(t, exitNotFound, "no such file", "config", "check", "--config", filepath.Join(t.TempDir(), "missing.yaml"))
	// A listen address with a bad port names listen, not the public_url derived from it.
	for _, l := range []string{"127.0.0.1:notaport", "127.0.0.1:70000", "127.0.0.1:-1"} {
		errOut := wantExit(t, exitUsage, "the port must be a number", "config", "check", "--listen", l)
		if strings.Contains(errOut, "public_url") {
			t.Errorf("--listen %s: the error blames public_url: %s", l, errOut)
		}
	}
}

// Every shipped config passes config check, and none carries a peer that
// can never be dialled.
func TestShippedConfigsCheck(t *testing.T) {
	files, _ := filepath.Glob("../../configs/*.yaml")
	for _, f := range files {
		mustCLI(t, "config", "check", "--config", f)
	}
}

// Property: the per-address connection cap has a YAML key, a flag (which
// wins) and a default, and config check prints it with the total cap.
func TestConfigConnectionCaps(t *testing.T) {
	var eff struct {
		Conns   int `yaml:"max_connections"`
		PerAddr int `yaml:"max_connections_per_address"`
	}
	get := func(args ...string) {
		t.Helper()
		eff.Conns, eff.PerAddr = 0, 0
		if err := yaml.Unmarshal([]byte(mustCLI(t, append([]string{"config", "check"}, args...)...)), &eff); err != nil {
			t.Fatal(err)
		}
	}
	get()
	if eff.Conns != hostapi.DefaultMaxConnections || eff.PerAddr != hostapi.DefaultMaxConnectionsPerAddress {
		t.Fatalf("defaults: %+v", eff)
	}
	file := writeFile(t, "caps.yaml", "max_connections: 1000\nmax_connections_per_address: 64\n")
	get("--config", file)
	if eff.Conns != 1000 || eff.PerAddr != 64 {
		t.Fatalf("from the file: %+v", eff)
	}
	get("--config", file, "--max-connections-per-address", "32")
	if eff.PerAddr != 32 {
		t.Fatalf("the flag must win: %+v", eff)
	}
	wantExit(t, exitUsage, "max_connections_per_address: must be ≥ 1, got 0", "config", "check", "--max-connections-per-address", "0")
	wantExit(t, exitUsage, "max_connections_per_address: must be ≥ 1, got -1", "config", "check", "--config", writeFile(t, "neg.yaml", "max_connections_per_address: -1\n"))
}

// Property: serve refuses at start, before opening anything, a disk
// reserve below what the store may grow by at once, and says why and how
// much is needed; 0 (the check off) and the least reserve are accepted.
func TestServeRefusesSmallDiskReserve(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	errOut := wantExit(t, exitUsage, "at least 240MiB", "serve", "--data", data, "--listen", "127.0.0.1:0", "--no-federation",
		"--disk-reserve", "4MiB")
	if !strings.Contains(errOut, "SIGBUS") || !strings.Contains(errOut, "2 × ValueLogFileSize") {
		t.Fatalf("the refusal does not explain itself: %s", errOut)
	}
	if _, err := os.Stat(data); !os.IsNotExist(err) {
		t.Fatalf("the refused start touched the data dir: %v", err)
	}
	wantExit(t, exitUsage, "at least 240MiB", "config", "check", "--config", writeFile(t, "small.yaml", "disk_reserve: 4MiB\n"))
	for _, r := range []string{"0", "240MiB"} {
		mustCLI(t, "config", "check", "--disk-reserve", r)
	}
}

// TestListenPortZeroPublicURL. Property: a node told to listen on port 0
// with no public_url of its own advertises the port it got, not port 0:
// its origin and the discovery document name a URL one can reach.
func TestListenPortZeroPublicURL(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	s, err := startStack(node.Config{PublicURL: "http://127.0.0.1:0", DataDir: t.TempDir(), Log: log}, "127.0.0.1:0", fedSettings{}, log)
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	want := "http://" + s.addr
	if got := s.n.Origin(); got != want {
		t.Fatalf("origin %s, want %s (the address it listens on)", got, want)
	}
	resp, err := http.Get(want + "/.well-known/agent-discourse")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if strings.Contains(string(body), "127.0.0.1:0") {
		t.Fatalf("discovery document names port 0: %s", body)
	}
}
