//go:build e2e

package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The guides whose sh blocks TestGuides runs, in this order; docs/README.md
// ("Shell blocks are tested") states the conventions.
var guides = []struct {
	name, path string
	node       bool             // the page expects a node at 127.0.0.1:8080
	want       []*regexp.Regexp // in the page's output
	// wantPending are in the output once the block they name (its
	// number among the page's sh blocks) is no longer pending.
	wantPending map[int]*regexp.Regexp
}{
	{"README", "README.md", false, []*regexp.Regexp{
		regexp.MustCompile(`(?m)^\S+\s+active\s+public\s+\d+\s+Hello, federation\s+http://127\.0\.0\.1:\d+/v1/rooms/\S+$`), // node 3's directory
		regexp.MustCompile(`(?m)^12D3KooW\S+\s+did:agent:\S+\s+true\s+true`),                                               // node 3's static peer, connected
		regexp.MustCompile(`@@block 4`), // the nodes were stopped at the end
	}, map[int]*regexp.Regexp{
		3: regexp.MustCompile(`(?m)^#\d+ .*message\.create .*Hello from node 3\.`), // bob's post, relayed, in node 1's chain
	}},
	{"operator", "docs/operator.md", false, []*regexp.Regexp{
		regexp.MustCompile(`"status":"ready"`),
		regexp.MustCompile(`(?m)^adpnode \S+`), // adpnode version
		regexp.MustCompile(`listen: 127\.0\.0\.1:9091\s+# flag`),
		regexp.MustCompile(`(?m)^1 hosted rooms?, 0 mirrored rooms, 0 storage faults`), // check of the restored dir
		regexp.MustCompile(`(?m)^adp_build_info\{`),
	}, nil},
	{"agent", "docs/agent.md", true, []*regexp.Regexp{
		regexp.MustCompile(`tail: room ended`),
		regexp.MustCompile(`(?m)^1\s+appeared\s+\S+`),                // watch saw the new room
		regexp.MustCompile(`(?m)^1\s+\S+\s+message\.create\s+seq 2`), // carol's inbox
		regexp.MustCompile(`"seq":3,.*"head":\{"seq":2,`),            // the walkthrough's room resource
		regexp.MustCompile(`sealed \(epoch 2\) \[opened round\.turn\]`),
		regexp.MustCompile(`opened\.json: 2 opened`),
	}, map[int]*regexp.Regexp{
		7: regexp.MustCompile(`(?m)^OK room \S+ "Pricing"`), // the sealed room's archive verifies
	}},
	{"archivist", "docs/archivist.md", false, []*regexp.Regexp{
		regexp.MustCompile(`caught up: verified 2 of 2`),
		regexp.MustCompile(`(?m)^OK room \S+ "Minutes": 3 records`),
		regexp.MustCompile(`complete: the last record is in log`),
	}, nil},
}

// pendingBlocks are blocks that fail today because of a bug another
// change fixes. Each entry names its page, a line of the block, and why;
// the block still runs, its failure is logged, and once it passes the
// test says so: delete the entry then.
var pendingBlocks = []struct{ path, line, reason string }{}

// guideBlock is one sh block of a page.
type guideBlock struct {
	n       int    // 1-based among the page's sh blocks
	line    int    // line of the opening fence
	text    string // the block, ending in a newline
	notRun  string // reason from <!-- not-run: … -->
	runIn   string // from <!-- run-in: DIR -->
	pending string // reason from pendingBlocks
}

var (
	notRunRE = regexp.MustCompile(`^<!-- not-run: (.+) -->$`)
	runInRE  = regexp.MustCompile(`^<!-- run-in: ([A-Za-z0-9._-]+) -->$`)
)

// shBlocks returns the sh blocks of a Markdown page.
func shBlocks(t *testing.T, path string) []guideBlock {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", path))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(b), "\n")
	var blocks []guideBlock
	for i := 0; i < len(lines); i++ {
		if lines[i] != "```sh" {
			continue
		}
		blk := guideBlock{n: len(blocks) + 1, line: i + 1}
		if i > 0 {
			if m := notRunRE.FindStringSubmatch(lines[i-1]); m != nil {
				blk.notRun = m[1]
			}
			if m := runInRE.FindStringSubmatch(lines[i-1]); m != nil {
				blk.runIn = m[1]
			}
		}
		j := i + 1
		for ; j < len(lines) && lines[j] != "```"; j++ {
			blk.text += lines[j] + "\n"
		}
		if j == len(lines) {
			t.Fatalf("%s:%d: sh block never closed", path, i+1)
		}
		blocks = append(blocks, blk)
		i = j
	}
	for _, p := range pendingBlocks {
		if p.path != path {
			continue
		}
		found := 0
		for i := range blocks {
			if strings.Contains(blocks[i].text, p.line) {
				blocks[i].pending = p.reason
				found++
			}
		}
		if found != 1 {
			t.Errorf("pendingBlocks: %q matches %d blocks of %s, want 1", p.line, found, path)
		}
	}
	return blocks
}

var (
	localPortRE = regexp.MustCompile(`127\.0\.0\.1:(8\d\d\d)\b`)
	p2pPortRE   = regexp.MustCompile(`/(?:tcp|udp)/(4\d\d\d)\b`)
)

// guideScript turns a page's blocks into one bash script: ports moved to
// free ones (the same free port for the same number throughout the page),
// the build lines replaced, each block after a marker; pending blocks run
// in a subshell whose status is reported instead of stopping the script.
func guideScript(t *testing.T, blocks []guideBlock, ports map[string]string) string {
	var s strings.Builder
	s.WriteString("set -euo pipefail\nADP_SCRATCH=$PWD\n")
	s.WriteString(`trap 'echo "guide: block ${ADP_BLOCK:-?} failed (line $LINENO of the script, status $?)" >&2' ERR` + "\n")
	port := func(n string) string {
		if p, ok := ports[n]; ok {
			return p
		}
		addr := freeAddr(t)
		p := addr[strings.LastIndex(addr, ":")+1:]
		ports[n] = p
		return p
	}
	for _, b := range blocks {
		if b.notRun != "" {
			continue
		}
		text := localPortRE.ReplaceAllStringFunc(b.text, func(m string) string {
			return "127.0.0.1:" + port(m[len("127.0.0.1:"):])
		})
		text = p2pPortRE.ReplaceAllStringFunc(text, func(m string) string {
			i := strings.LastIndex(m, "/")
			return m[:i+1] + port(m[i+1:])
		})
		text = strings.ReplaceAll(text, "go build -o adpnode ./cmd/adpnode", `cp "$ADPNODE_BIN" adpnode`)
		text = strings.ReplaceAll(text, "go install ./cmd/adpnode", ":")
		fmt.Fprintf(&s, "\nADP_BLOCK=%d\necho '@@block %d'\n", b.n, b.n)
		if b.runIn != "" {
			fmt.Fprintf(&s, "mkdir -p %s && cd %s\n", b.runIn, b.runIn)
		}
		if b.pending != "" {
			fmt.Fprintf(&s, "set +e\n(\nset -e\n%s)\nADP_RC=$?\nset -e\necho \"@@pending %d $ADP_RC\"\n", text, b.n)
		} else {
			s.WriteString(text)
		}
		if b.runIn != "" {
			// Back out of the block's own directory; a cd the page
			// itself makes carries on, as in a reader's terminal.
			s.WriteString("cd \"$ADP_SCRATCH\"\n")
		}
	}
	s.WriteString("echo '@@end'\n")
	return s.String()
}

// stopGroup stops every process of a process group whose leader has been
// reaped (the page's background jobs): SIGTERM, then up to 20 s for a
// clean stop, then SIGKILL.
func stopGroup(pgid int) {
	syscall.Kill(-pgid, syscall.SIGTERM)
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if err := syscall.Kill(-pgid, 0); errors.Is(err, syscall.ESRCH) {
			return
		}
	}
	syscall.Kill(-pgid, syscall.SIGKILL)
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if err := syscall.Kill(-pgid, 0); errors.Is(err, syscall.ESRCH) {
			return
		}
	}
}

// guideEnv is the environment a page runs in: a fresh HOME and TMPDIR
// under scratch, the built adpnode first on PATH, no ADPNODE_ settings.
func guideEnv(scratch, bin string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch {
		case strings.HasPrefix(k, "ADPNODE_"), k == "HOME", k == "TMPDIR", k == "PATH", k == "PWD", k == "OLDPWD":
			continue
		}
		env = append(env, kv)
	}
	return append(env, "HOME="+filepath.Join(scratch, "home"), "TMPDIR="+filepath.Join(scratch, "tmp"),
		"PATH="+filepath.Dir(bin)+string(os.PathListSeparator)+os.Getenv("PATH"), "ADPNODE_BIN="+bin)
}

// Property: every sh block of the operator, agent and archivist guides
// and of the README runs as written, in order, against the adpnode built
// from this checkout, on 127.0.0.1 only and with no key left in the
// repository; blocks that cannot run here say why.
func TestGuides(t *testing.T) {
	for _, tool := range []string{"bash", "curl", "sed", "grep", "awk", "openssl"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("the guides need %s: %v", tool, err)
		}
	}
	bin := filepath.Join(t.TempDir(), "adpnode")
	build := exec.Command("go", "build", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	for _, g := range guides {
		t.Run(g.name, func(t *testing.T) {
			start := time.Now()
			blocks := shBlocks(t, g.path)
			if len(blocks) == 0 {
				t.Fatalf("%s has no sh block", g.path)
			}
			scratch := t.TempDir()
			for _, d := range []string{"home", "tmp"} {
				if err := os.Mkdir(filepath.Join(scratch, d), 0o700); err != nil {
					t.Fatal(err)
				}
			}
			env := guideEnv(scratch, bin)
			ports := map[string]string{}
			script := guideScript(t, blocks, ports)
			for _, b := range blocks {
				switch {
				case b.notRun != "":
					t.Logf("%s:%d block %d not run: %s", g.path, b.line, b.n, b.notRun)
				case b.pending != "":
					t.Logf("%s:%d block %d pending: %s", g.path, b.line, b.n, b.pending)
				}
			}
			if g.node {
				addr := "127.0.0.1:" + ports["8080"]
				if ports["8080"] == "" {
					t.Fatalf("%s expects a node but never names 127.0.0.1:8080", g.path)
				}
				node := exec.Command(bin, "serve", "--listen", addr, "--data", filepath.Join(scratch, "node-data"), "--no-federation")
				node.Env = env
				node.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
				logf, err := os.Create(filepath.Join(scratch, "node.log"))
				if err != nil {
					t.Fatal(err)
				}
				defer logf.Close()
				node.Stdout, node.Stderr = logf, logf
				if err := node.Start(); err != nil {
					t.Fatal(err)
				}
				defer func() {
					// The node is this process's child: wait for it (a zombie
					// would still count as a member of its group).
					done := make(chan struct{})
					go func() { node.Wait(); close(done) }()
					syscall.Kill(-node.Process.Pid, syscall.SIGTERM)
					select {
					case <-done:
					case <-time.After(20 * time.Second):
						syscall.Kill(-node.Process.Pid, syscall.SIGKILL)
						<-done
					}
				}()
				waitReady(t, "http://"+addr)
			}

			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			outPath := filepath.Join(scratch, "output.txt")
			out, err := os.Create(outPath)
			if err != nil {
				t.Fatal(err)
			}
			defer out.Close()
			run := exec.CommandContext(ctx, "bash", "-c", script)
			run.Dir, run.Env = scratch, env
			run.Stdout, run.Stderr = out, out
			run.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			run.Cancel = func() error { return syscall.Kill(-run.Process.Pid, syscall.SIGKILL) }
			runErr := run.Run()
			stopGroup(run.Process.Pid)
			text, _ := os.ReadFile(outPath)
			if testing.Verbose() && os.Getenv("ADP_GUIDES_OUTPUT") != "" {
				t.Logf("%s output:\n%s", g.path, text)
			}
			if runErr != nil {
				t.Errorf("%s: %v; the page's output (scratch %s):\n%s", g.path, runErr, scratch, tail(string(text), 80))
			}
			sc := bufio.NewScanner(strings.NewReader(string(text)))
			sc.Buffer(make([]byte, 1<<20), 1<<20)
			for sc.Scan() {
				f := strings.Fields(sc.Text())
				if len(f) == 3 && f[0] == "@@pending" {
					n, _ := strconv.Atoi(f[1])
					b := blocks[n-1]
					if f[2] == "0" {
						t.Errorf("%s:%d block %d passes now: remove it from pendingBlocks (%s)", g.path, b.line, n, b.pending)
					} else {
						t.Logf("%s:%d block %d, pending, failed as expected (status %s): %s", g.path, b.line, n, f[2], b.pending)
					}
				}
			}
			if runErr == nil {
				want := g.want
				for n, w := range g.wantPending {
					if n > len(blocks) {
						t.Errorf("%s: wantPending names block %d of %d", g.path, n, len(blocks))
					} else if blocks[n-1].pending == "" {
						want = append(want, w)
					}
				}
				for _, w := range want {
					if !w.Match(text) {
						t.Errorf("%s: the output lacks %s:\n%s", g.path, w, tail(string(text), 80))
					}
				}
			}
			// No key file was written into the repository.
			keys, _ := filepath.Glob(filepath.Join("..", "..", "*.key"))
			if len(keys) > 0 {
				t.Errorf("key files in the repository root: %v", keys)
			}
			t.Logf("%s: %d sh blocks in %v", g.path, len(blocks), time.Since(start).Round(time.Millisecond))
		})
	}
}

// waitReady waits (at most a minute) until origin answers /readyz.
func waitReady(t *testing.T, origin string) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		resp, err := http.Get(origin + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
	}
	t.Fatalf("%s never became ready", origin)
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
