//go:build e2e

package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/adpnode/adpnode/internal/testwait"
)

// serveChild is adpnode serve run as a child process, its stderr kept.
type serveChild struct {
	cmd    *exec.Cmd
	stderr *bytes.Buffer
	node   string
}

func startServeChild(t *testing.T, bin, data string, extra ...string) *serveChild {
	t.Helper()
	addr := freeAddr(t)
	c := &serveChild{stderr: &bytes.Buffer{}, node: "http://" + addr}
	args := append([]string{"serve", "--listen", addr, "--data", data, "--p2p-listen", "/ip4/127.0.0.1/tcp/0", "--mdns=false"}, extra...)
	c.cmd = exec.Command(bin, args...)
	c.cmd.Env = append(os.Environ(), "HOME="+t.TempDir())
	c.cmd.Stderr = c.stderr
	c.cmd.Stdout = c.stderr // serve writes nothing to stdout; anything there must be JSON too
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if c.cmd.ProcessState == nil {
			c.cmd.Process.Kill()
			c.cmd.Wait()
		}
	})
	testwait.Until(t, 60*time.Second, "the node to be ready", func() bool {
		resp, err := http.Get(c.node + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return c
}

// stop sends SIGTERM and waits for a clean exit.
func (c *serveChild) stop(t *testing.T) string {
	t.Helper()
	c.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- c.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("serve exited: %v\n%s", err, c.stderr)
		}
	case <-time.After(60 * time.Second):
		c.cmd.Process.Kill()
		t.Fatalf("serve did not stop on SIGTERM\n%s", c.stderr)
	}
	return c.stderr.String()
}

// Property: everything serve writes is a JSON log line (start-up, an SSE
// client leaving mid-stream, an export waiting for the host log's proof,
// an online backup, a clean stop, a start on a restored data dir), and
// none of those ordinary events logs at level ERROR.
func TestServeLogsAreJSONLines(t *testing.T) {
	bin := adpnodeBinary(t)
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	s := startServeChild(t, bin, data)

	key := filepath.Join(dir, "alice.key")
	mustCLI(t, "keygen", "--out", key)
	id := strings.Fields(mustCLI(t, "room", "create", "--node", s.node, "--key", key, "--topic", "logs"))[0]
	mustCLI(t, "post", id, "hello", "--node", s.node, "--key", key)

	// A member's SSE stream, left after its first frame.
	tok := strings.TrimSpace(mustCLI(t, "token", "--node", s.node, "--key", key))
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.node+"/v1/rooms/"+id+"/events/live", nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bufio.NewReader(resp.Body).ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	cancel()
	resp.Body.Close()
	// A viewer's stream of the public room, left the same way.
	vctx, vcancel := context.WithCancel(context.Background())
	vreq, _ := http.NewRequestWithContext(vctx, http.MethodGet, s.node+"/v1/rooms/"+id+"/events/live", nil)
	if vresp, err := http.DefaultClient.Do(vreq); err == nil {
		bufio.NewReader(vresp.Body).ReadString('\n')
		vcancel()
		vresp.Body.Close()
	}
	vcancel()

	// Close and export at once: the host log's proof is moments away.
	mustCLI(t, "room", "close", id, "--node", s.node, "--key", key)
	archive := filepath.Join(dir, "room.json")
	mustCLI(t, "export", id, "--node", s.node, "-o", archive)
	mustCLI(t, "verify", archive)
	backup := filepath.Join(dir, "node.backup")
	mustCLI(t, "backup", "--data", data, "-o", backup)
	first := s.stop(t)

	restored := filepath.Join(dir, "restored")
	mustCLI(t, "restore", "--data", restored, "-i", backup)
	r := startServeChild(t, bin, restored)
	if out := mustCLI(t, "room", "show", id, "--node", r.node); !strings.Contains(out, `"topic": "logs"`) {
		t.Fatalf("restored room: %s", out)
	}
	second := r.stop(t)

	for run, out := range map[string]string{"first start": first, "start on the restored dir": second} {
		lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
		serving := false
		for _, l := range lines {
			var rec struct {
				Level string `json:"level"`
				Msg   string `json:"msg"`
			}
			if err := json.Unmarshal([]byte(l), &rec); err != nil || rec.Msg == "" {
				t.Errorf("%s: a line that is not a JSON log line: %q", run, l)
				continue
			}
			if strings.Contains(rec.Msg, "superfluous") {
				t.Errorf("%s: a stream's header written twice: %s", run, l)
			}
			if strings.EqualFold(rec.Level, "error") {
				t.Errorf("%s: an ERROR line in an ordinary run: %s", run, l)
			}
			serving = serving || rec.Msg == "adpnode serving"
		}
		if !serving {
			t.Errorf("%s: no \"adpnode serving\" line:\n%s", run, out)
		}
	}
}
