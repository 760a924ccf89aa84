//go:build e2e

package main

import (
	"encoding/json"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

type capsOut struct {
	MaxBodyBytes   int64 `yaml:"max_body_bytes"`
	MirrorMaxRooms int   `yaml:"mirror_max_rooms"`
	MirrorMaxBytes int64 `yaml:"mirror_max_bytes"`
}

func checkCaps(t *testing.T, args ...string) capsOut {
	t.Helper()
	var c capsOut
	out := mustCLI(t, append([]string{"config", "check"}, args...)...)
	if err := yaml.Unmarshal([]byte(out), &c); err != nil {
		t.Fatal(err, out)
	}
	return c
}

// The body and mirror caps are flags and config keys, in bytes or with
// KiB/MiB/GiB; flags win over the file; config check shows them.
func TestCapsFlagsAndKeys(t *testing.T) {
	if c := checkCaps(t); c != (capsOut{1 << 20, 1000, 10 << 30}) {
		t.Errorf("defaults %+v", c)
	}
	file := writeFile(t, "caps.yaml", "max_body_bytes: 2097152\nmirror_max_rooms: 7\nmirror_max_bytes: 1GiB\n")
	if c := checkCaps(t, "--config", file); c != (capsOut{2 << 20, 7, 1 << 30}) {
		t.Errorf("file %+v", c)
	}
	if c := checkCaps(t, "--config", file, "--max-body-bytes", "4MiB", "--mirror-max-rooms", "3", "--mirror-max-bytes", "10GiB"); c != (capsOut{4 << 20, 3, 10 << 30}) {
		t.Errorf("flags over file %+v", c)
	}
	t.Setenv("ADPNODE_MIRROR_MAX_BYTES", "512MiB")
	if c := checkCaps(t, "--config", file); c.MirrorMaxBytes != 512<<20 {
		t.Errorf("environment over file %+v", c)
	}
}

// Hostile values: negative or malformed caps are usage errors naming the
// setting.
func TestCapsRejected(t *testing.T) {
	for _, args := range [][]string{
		{"--max-body-bytes", "-1"},
		{"--max-body-bytes", "lots"},
		{"--mirror-max-rooms", "-5"},
		{"--mirror-max-bytes", "-1GiB"},
		{"--mirror-max-bytes", "99999999999GiB"},
		{"--config", writeFile(t, "c.yaml", "mirror_max_rooms: -1\n")},
		{"--config", writeFile(t, "c.yaml", "mirror_max_bytes: huge\n")},
		{"--config", writeFile(t, "c.yaml", "max_body_bytes: -1\n")},
	} {
		code, _, errOut := cli(t, append([]string{"config", "check"}, args...)...)
		name := strings.TrimPrefix(args[0], "--")
		if name == "config" {
			name = ""
		}
		if code != exitUsage || !strings.Contains(errOut, strings.ReplaceAll(name, "-", "_")) {
			t.Errorf("%q: exit %d, stderr %q", args, code, errOut)
		}
	}
}

// The caps reach the running node: discovery shows the body cap and a
// body over it is refused with 413; the mirror holds the given caps; and
// a restart on the same data dir with other flags takes the new values.
func TestCapsReachTheNode(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	for _, c := range []capsOut{{4 << 10, 2, 64 << 20}, {8 << 10, 3, 1 << 30}} {
		s := startServe(t, nil, "--listen", "127.0.0.1:0", "--data", data, "--p2p-listen", "/ip4/127.0.0.1/tcp/0",
			"--max-body-bytes", sizeArg(c.MaxBodyBytes), "--mirror-max-rooms", itoa(c.MirrorMaxRooms), "--mirror-max-bytes", sizeArg(c.MirrorMaxBytes))
		resp, err := http.Get("http://" + s.addr + "/.well-known/agent-discourse")
		if err != nil {
			t.Fatal(err)
		}
		var doc struct {
			Limits struct {
				Body int64 `json:"request_body_bytes"`
			} `json:"limits"`
		}
		json.NewDecoder(resp.Body).Decode(&doc)
		resp.Body.Close()
		if doc.Limits.Body != c.MaxBodyBytes {
			t.Errorf("discovery request_body_bytes %d, want %d", doc.Limits.Body, c.MaxBodyBytes)
		}
		resp, err = http.Post("http://"+s.addr+"/rooms", "application/json", strings.NewReader(strings.Repeat(" ", int(c.MaxBodyBytes)+1)))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestEntityTooLarge {
			t.Errorf("body over the cap: %d, want 413", resp.StatusCode)
		}
		if rooms, bytes := s.mir.Limits(); rooms != c.MirrorMaxRooms || bytes != c.MirrorMaxBytes {
			t.Errorf("mirror limits %d rooms %d bytes, want %+v", rooms, bytes, c)
		}
		if err := s.close(); err != nil {
			t.Fatal(err)
		}
	}
}

func sizeArg(n int64) string {
	if n%(1<<30) == 0 {
		return itoa(int(n>>30)) + "GiB"
	}
	if n%(1<<20) == 0 {
		return itoa(int(n>>20)) + "MiB"
	}
	return itoa(int(n>>10)) + "KiB"
}

func itoa(n int) string { return strconv.Itoa(n) }
