//go:build e2e

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Property: backup --data DIR (and peers --data DIR) talk to the node
// serving DIR, found through DIR/serve.url, whatever port it listens on;
// the file is gone once the node stops cleanly (backup then reads the dir
// itself) and names the new port after a restart; a locked dir that names
// no node is an error saying to pass --node, not a request to the default
// port.
func TestBackupFindsTheNodeServingTheDir(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	keys := t.TempDir()
	mustCLI(t, "keygen", "--out", filepath.Join(keys, "alice.key"))
	args := []string{"--listen", "127.0.0.1:0", "--data", data, "--p2p-listen", "/ip4/127.0.0.1/tcp/0", "--mdns=false"}
	urlFile := filepath.Join(data, serveURLFile)

	for round := 0; round < 2; round++ {
		s := startServe(t, nil, args...)
		node := "http://" + s.addr
		if b, err := os.ReadFile(urlFile); err != nil || strings.TrimSpace(string(b)) != node {
			t.Fatalf("round %d: %s holds %q, %v; want %s", round, urlFile, b, err, node)
		}
		mustCLI(t, "room", "create", "--node", node, "--key", filepath.Join(keys, "alice.key"), "--topic", "backed up")
		file := filepath.Join(dir, "online.backup")
		_, _, errOut := cli(t, "backup", "--data", data, "-o", file)
		if !strings.Contains(errOut, "from the running node "+node) {
			t.Fatalf("round %d: backup did not ask the node serving the dir (%s): %s", round, node, errOut)
		}
		restored := filepath.Join(dir, "restored", strings.Repeat("r", round+1))
		mustCLI(t, "restore", "--data", restored, "-i", file)
		if out := mustCLI(t, "check", "--data", restored); !strings.Contains(out, (map[int]string{0: "1 hosted rooms", 1: "2 hosted rooms"})[round]) {
			t.Fatalf("round %d: the restored backup: %s", round, out)
		}
		if out := mustCLI(t, "peers", "--data", data, "--json"); !strings.Contains(out, `"result"`) {
			t.Fatalf("peers --data: %s", out)
		}

		// A locked dir that names no node: say so, ask for --node.
		os.Rename(urlFile, urlFile+".aside")
		wantExit(t, exitNotFound, "pass that node's --node URL", "backup", "--data", data, "-o", file)
		os.Rename(urlFile+".aside", urlFile)

		if err := s.close(); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(urlFile); !os.IsNotExist(err) {
			t.Fatalf("round %d: %s outlives the node: %v", round, urlFile, err)
		}
		_, _, errOut = cli(t, "backup", "--data", data, "-o", filepath.Join(dir, "offline.backup"))
		if !strings.Contains(errOut, "from the data dir") {
			t.Fatalf("round %d: backup of a stopped node's dir: %s", round, errOut)
		}
	}
}
