package main

import (
	"bytes"
	"crypto/ed25519"
	"flag"
	"os"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	"go.yaml.in/yaml/v3"

	"github.com/adpnode/adpnode/adp/tlogwitness"
	"github.com/adpnode/adpnode/cmd/adpnode/internal/settings"
	"github.com/adpnode/adpnode/witness"
)

var updateGolden = flag.Bool("update", false, "rewrite configs/reference.yaml and docs/settings.md from serveTable")

const referenceHeader = `# Every setting of ` + "`adpnode serve`" + ` at its default, generated from the
# settings table (go test ./cmd/adpnode -run TestSettingsGenerated -update);
# docs/settings.md lists the same settings.
#
# Precedence: command-line flag > environment variable > this file > default.
# Each setting names its flag and ADPNODE_ variable; repeatable flags take
# comma-separated values in the environment, e.g.
#   ADPNODE_LISTEN=0.0.0.0:8080 ADPNODE_PEER=/ip4/…/p2p/…,/ip4/…/p2p/… adpnode serve
# ` + "`adpnode config check`" + ` prints every effective value and where it came from.
`

const referenceFooter = `Fixed by the protocol or the project's decisions and not configurable here:
live-write window 300 s, payload 64 KiB (256 KiB with type hints), 32 mentions,
schema 16 KiB, 64 types per room, room duration 10 min – 7 days, 100 speakers /
1000 observers, agent status TTL 300 s. They are published in
/.well-known/agent-discourse.`

const settingsIntro = `# Settings of adpnode serve

Generated from the settings table in ` + "`cmd/adpnode/servesettings.go`" + `
(` + "`go test ./cmd/adpnode -run TestSettingsGenerated -update`" + `);
` + "`configs/reference.yaml`" + ` is the same list as a commented configuration file.

Every setting has a YAML key (dots are nesting: ` + "`federation.nat.port_map`" + ` is
` + "`port_map`" + ` under ` + "`nat:`" + ` under ` + "`federation:`" + `), an environment variable and,
for most, a flag. Precedence: flag, then environment variable, then the
configuration file (` + "`--config`" + ` or ` + "`ADPNODE_CONFIG`" + `), then the default. Lists take a
YAML list, a repeatable flag (which replaces the file's list) or comma-separated
values in the environment. Sizes are bytes or a number with KiB, MiB, GiB, KB, MB
or GB; durations are Go durations (` + "`30s`" + `, ` + "`1h`" + `). Unknown keys are errors, and
every error names the setting, e.g. ` + "`max_connections: must be ≥ 1, got 0`" + `.
` + "`adpnode config check`" + ` prints every setting's effective value with its source
(flag, env, file, default, or derived from other settings).
`

// Property: configs/reference.yaml and docs/settings.md are generated
// from the one settings table, and the reference file, read back, sets
// every setting to its default.
func TestSettingsGenerated(t *testing.T) {
	for _, g := range []struct {
		path string
		want []byte
	}{
		{"../../configs/reference.yaml", serveTable.Reference(referenceHeader, referenceFooter)},
		{"../../docs/settings.md", serveTable.Markdown(settingsIntro)},
	} {
		if *updateGolden {
			if err := os.WriteFile(g.path, g.want, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(g.path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, g.want) {
			t.Errorf("%s is not what the settings table generates; run go test ./cmd/adpnode -run TestSettingsGenerated -update", g.path)
		}
	}
	ref, err := os.ReadFile("../../configs/reference.yaml")
	if err != nil {
		t.Fatal(err)
	}
	fromRef, err := serveTable.Resolve(pflag.NewFlagSet("ref", pflag.ContinueOnError), nil, ref)
	if err != nil {
		t.Fatal(err)
	}
	defaults, err := serveTable.Resolve(pflag.NewFlagSet("none", pflag.ContinueOnError), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range serveTable {
		if s.Kind == settings.Group {
			continue
		}
		a, b := yamlOf(t, fromRef.Get(s.Key).V), yamlOf(t, defaults.Get(s.Key).V)
		if a != b {
			t.Errorf("%s: reference.yaml sets %s, the default is %s", s.Key, a, b)
		}
		if s.Example == "" && s.Default != "" && fromRef.Get(s.Key).Source != settings.FromFile {
			t.Errorf("%s: missing from reference.yaml", s.Key)
		}
	}
}

func yamlOf(t *testing.T, v any) string {
	b, err := yaml.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// Property: every setting is declared once and used: its flag is
// registered with the table's default, its environment variable is its
// own, and resolveServe applies every setting (none is declared and then
// ignored).
func TestSettingsDeclaredOnce(t *testing.T) {
	cmd := serveCmd()
	envs, keys := map[string]string{}, map[string]bool{}
	for _, s := range serveTable {
		if keys[s.Key] {
			t.Errorf("%s declared twice", s.Key)
		}
		keys[s.Key] = true
		if s.Kind == settings.Group {
			continue
		}
		if prev, ok := envs[s.Env()]; ok {
			t.Errorf("%s and %s share %s", prev, s.Key, s.Env())
		}
		envs[s.Env()] = s.Key
		if !strings.Contains(s.Key, ".") || s.Kind == settings.Group {
			continue
		}
		parent := s.Key[:strings.LastIndex(s.Key, ".")]
		if p, ok := serveTable.Lookup(parent); !ok || p.Kind != settings.Group {
			t.Errorf("%s: its group %s is not declared", s.Key, parent)
		}
	}
	for _, s := range serveTable {
		if s.Flag == "" {
			continue
		}
		f := cmd.Flags().Lookup(s.Flag)
		if f == nil {
			t.Errorf("%s: flag --%s not registered", s.Key, s.Flag)
			continue
		}
		want := s.Default
		if s.Invert {
			want = "false"
		}
		if s.Kind == settings.List {
			want = "[" + want + "]"
		}
		if f.DefValue != want {
			t.Errorf("--%s default %q, table %q", s.Flag, f.DefValue, want)
		}
	}
	if err := cmd.Flags().Parse(nil); err != nil {
		t.Fatal(err)
	}
	ss, err := resolveServe(cmd)
	if err != nil {
		t.Fatal(err)
	}
	if u := ss.vals.Unread(); len(u) > 0 {
		t.Errorf("declared but never applied: %v", u)
	}
}

// resolveArgs resolves a serve command line as serve does.
func resolveArgs(t *testing.T, args ...string) (*serveSettings, error) {
	t.Helper()
	cmd := serveCmd()
	if err := cmd.Flags().Parse(args); err != nil {
		t.Fatal(err)
	}
	return resolveServe(cmd)
}

// Property: --witness has a YAML key, witnesses, validated like the flag
// (the error names the key), and the flag replaces the file's list.
func TestWitnessYAMLKey(t *testing.T) {
	_, k1, _ := ed25519.GenerateKey(nil)
	_, k2, _ := ed25519.GenerateKey(nil)
	c1, _ := tlogwitness.NewCosigner("witness.test/one", k1)
	c2, _ := tlogwitness.NewCosigner("witness.test/two", k2)
	w1 := "https://one.example.org/add-checkpoint=" + c1.VerifierKey()
	w2 := "https://two.example.org/add-checkpoint=" + c2.VerifierKey()
	file := writeFile(t, "w.yaml", "witnesses:\n  - "+w1+"\n")
	ss, err := resolveArgs(t, "--config", file)
	if err != nil {
		t.Fatal(err)
	}
	if len(ss.fed.witnesses) != 1 || !strings.HasPrefix(ss.fed.witnesses[0].URL, "https://one.") {
		t.Fatalf("witnesses from the file: %+v", ss.fed.witnesses)
	}
	ss, err = resolveArgs(t, "--config", file, "--witness", w2)
	if err != nil {
		t.Fatal(err)
	}
	if len(ss.fed.witnesses) != 1 || !strings.HasPrefix(ss.fed.witnesses[0].URL, "https://two.") {
		t.Fatalf("the flag must replace the file's witnesses: %+v", ss.fed.witnesses)
	}
	wantExit(t, exitUsage, "witnesses: \"nokey\"", "config", "check", "--config", writeFile(t, "bad.yaml", "witnesses: [nokey]\n"))
	many := "witnesses:\n" + strings.Repeat("  - "+w1+"\n", witness.MaxTargets+1)
	wantExit(t, exitUsage, "witnesses: at most", "config", "check", "--config", writeFile(t, "many.yaml", many))
}

// Property: config check prints every declared setting with the value the
// node runs with (limits whose 0 means "the default" show that default)
// and its source: flag, env, file, default or derived.
func TestConfigCheckEverySetting(t *testing.T) {
	t.Setenv("ADPNODE_MAX_BODY_BYTES", "2MiB")
	file := writeFile(t, "n.yaml", "data: ./d\nfederation:\n  conn_high: 0\n  max_conns: 100\n")
	out := mustCLI(t, "config", "check", "--config", file, "--listen", "127.0.0.1:18402")
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err, out)
	}
	find := func(key string) *yaml.Node {
		n := doc.Content[0]
	parts:
		for _, p := range strings.Split(key, ".") {
			for i := 0; i+1 < len(n.Content); i += 2 {
				if n.Content[i].Value == p {
					n = n.Content[i+1]
					continue parts
				}
			}
			return nil
		}
		return n
	}
	for _, s := range serveTable {
		if s.Kind != settings.Group && find(s.Key) == nil {
			t.Errorf("config check does not print %s", s.Key)
		}
	}
	for key, want := range map[string]string{
		"listen": "127.0.0.1:18402 # flag", "public_url": "http://127.0.0.1:18402 # derived",
		"max_body_bytes": "2097152 # env ADPNODE_MAX_BODY_BYTES", "data": "./d # file", "log_level": "info # default",
		"federation.conn_low": "64 # default", "federation.conn_high": "128 # file", "federation.max_conns": "100 # file",
		"federation.max_conns_per_peer": "8 # default", "federation.max_entries_per_host": "10000 # default",
		"federation.announce_interval": "30s # default", "join_request_ttl": "1h0m0s # default",
		"rates.join_requests_per_hour": "10 # default", "mirror_max_rooms": "1000 # default",
	} {
		n := find(key)
		if n == nil {
			continue
		}
		if got := n.Value + " " + n.LineComment; got != want {
			t.Errorf("%s: %q, want %q", key, got, want)
		}
	}
}

// Property: a bad value, from the file, a flag or the environment, is a
// usage error that names the setting (and where it came from), never a
// Go type; unknown, repeated and misshapen keys are refused by name.
func TestSettingErrorsNameTheSetting(t *testing.T) {
	for _, c := range []struct {
		file, env, envVal string
		args              []string
		want              string
	}{
		{file: "federation:\n  max_conns: many\n", want: `federation.max_conns: want a whole number, got "many"`},
		{file: "max_connections: 0\n", want: "max_connections: must be ≥ 1, got 0"},
		{args: []string{"--max-connections", "0"}, want: "max_connections: must be ≥ 1, got 0 (flag --max-connections)"},
		{env: "ADPNODE_MAX_BODY_BYTES", envVal: "lots", want: `max_body_bytes: size "lots"`},
		{env: "ADPNODE_FEDERATION_CONN_LOW", envVal: "-3", want: "federation.conn_low: must be ≥ 0, got -3 (ADPNODE_FEDERATION_CONN_LOW)"},
		{file: "rates: {message: -1}\n", want: "rates.message: must be ≥ 0, got -1"},
		{file: "join_request_ttl: -5m\n", want: "join_request_ttl: want a positive duration"},
		{file: "federation:\n  announce_interval: soon\n", want: `federation.announce_interval: want a duration such as 30s or 1h, got "soon"`},
		{file: "allow_private_peers: sometimes\n", want: `allow_private_peers: want true or false, got "sometimes"`},
		{file: "federation:\n  peers: /ip4/127.0.0.1/tcp/1/p2p/x\n", want: "federation.peers: want a list"},
		{file: "listen: 127.0.0.1:1\nlisten_port: 9\n", want: "unknown setting listen_port (line 2)"},
		{file: "federation:\n  peer: []\n", want: "unknown setting federation.peer"},
		{file: "listen: 127.0.0.1:1\nlisten: 127.0.0.1:2\n", want: "listen: given twice"},
		{file: "federation: [a]\n", want: "federation: want a mapping"},
		{file: "listen: &l 127.0.0.1:1\ndata: {a: *l}\n", want: "data: want a single string value"},
		{file: "federation:\n  nat:\n    reachability: maybe\n", want: `federation.nat.reachability: want one of "", "public", "private", got "maybe"`},
		{file: "federation:\n  conn_low: 200\n  conn_high: 100\n", want: "federation.conn_low 200 / federation.conn_high 100"},
	} {
		args := append([]string{"config", "check"}, c.args...)
		if c.file != "" {
			args = append(args, "--config", writeFile(t, "c.yaml", c.file))
		}
		if c.env != "" {
			t.Setenv(c.env, c.envVal)
		}
		errOut := wantExit(t, exitUsage, c.want, args...)
		for _, goType := range []string{"!!", "unmarshal", " int", "time.Duration", "strconv", "yaml: line"} {
			if strings.Contains(errOut, goType) {
				t.Errorf("%q: the error speaks Go (%q): %s", c.want, goType, errOut)
			}
		}
		if c.env != "" {
			os.Unsetenv(c.env)
		}
	}
}

// Property: every setting, including those without a flag, follows flag >
// environment > file > default, and the source is reported.
func TestSettingsPrecedence(t *testing.T) {
	file := writeFile(t, "p.yaml", "max_body_bytes: 3MiB\nfederation:\n  conn_low: 10\n  conn_high: 20\n")
	check := func(key string, want any, src settings.Source, args ...string) {
		t.Helper()
		ss, err := resolveArgs(t, args...)
		if err != nil {
			t.Fatal(err)
		}
		if v := ss.vals.Get(key); v.V != want || v.Source != src {
			t.Errorf("%q: %s = %v from %s, want %v from %s", args, key, v.V, v.Source, want, src)
		}
	}
	check("max_body_bytes", int64(1<<20), settings.FromDefault)
	check("max_body_bytes", int64(3<<20), settings.FromFile, "--config", file)
	check("federation.conn_low", 10, settings.FromFile, "--config", file)
	t.Setenv("ADPNODE_MAX_BODY_BYTES", "5MiB")
	t.Setenv("ADPNODE_FEDERATION_CONN_LOW", "15")
	check("max_body_bytes", int64(5<<20), settings.FromEnv, "--config", file)
	check("federation.conn_low", 15, settings.FromEnv, "--config", file)
	check("max_body_bytes", int64(7<<20), settings.FromFlag, "--config", file, "--max-body-bytes", "7MiB")
	ss, err := resolveArgs(t, "--config", file)
	if err != nil {
		t.Fatal(err)
	}
	if ss.fed.limits.ConnLow != 15 || ss.fed.limits.ConnHigh != 20 || ss.cfg.MaxBodyBytes != 5<<20 {
		t.Errorf("the node gets conn_low %d, conn_high %d, max body %d", ss.fed.limits.ConnLow, ss.fed.limits.ConnHigh, ss.cfg.MaxBodyBytes)
	}
	// --no-federation inverts federation.enabled, from the flag and its variable.
	check("federation.enabled", false, settings.FromFlag, "--no-federation")
	t.Setenv("ADPNODE_NO_FEDERATION", "true")
	check("federation.enabled", false, settings.FromEnv)
}

// Property: config check prints the DHT mode the node will run in, not
// only the one configured: auto serves unless the node is private.
func TestConfigCheckEffectiveDHT(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "server unless AutoNAT finds this node private"},
		{[]string{"--dht", "client"}, "client"},
		{[]string{"--dht", "off"}, `"off"`},
	} {
		out := mustCLI(t, append([]string{"config", "check", "--listen", "127.0.0.1:18403"}, c.args...)...)
		if !strings.Contains(out, "dht_effective: "+c.want+" # derived") {
			t.Errorf("%v: config check does not say dht_effective %q:\n%s", c.args, c.want, out)
		}
	}
	file := writeFile(t, "pub.yaml", "federation:\n  nat:\n    reachability: private\n")
	if out := mustCLI(t, "config", "check", "--config", file, "--listen", "127.0.0.1:18404"); !strings.Contains(out, "dht_effective: client # derived") {
		t.Errorf("auto on a private node: %s", out)
	}
}
