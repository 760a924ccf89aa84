package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
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
		var fc fileConfig
		dec := yaml.NewDecoder(strings.NewReader(string(b)))
		dec.KnownFields(true)
		if err := dec.Decode(&fc); err != nil {
			t.Errorf("%s: %v", f, err)
		}
		if fc.Listen == "" || fc.Data == "" {
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
