package main

import (
	"bytes"
	"flag"
	"os"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	"go.yaml.in/yaml/v3"

	"github.com/adpnode/adpnode/cmd/adpnode/internal/settings"
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
