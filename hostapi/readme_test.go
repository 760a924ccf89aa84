//go:build e2e

package hostapi_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"github.com/adpnode/adpnode/adp"
	"github.com/adpnode/adpnode/hostapi"
)

// TestDocsErrorTable keeps the error table of docs/errors.md equal to the
// one table in code (decision 4).
func TestDocsErrorTable(t *testing.T) {
	b, err := os.ReadFile("../docs/errors.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := regexp.MustCompile("(?m)^\\| `([a-z_]+)` \\| (\\d{3}) \\|$").FindAllStringSubmatch(string(b), -1)
	got := map[adp.Code]int{}
	for _, r := range rows {
		n, _ := strconv.Atoi(r[2])
		got[adp.Code(r[1])] = n
	}
	want := hostapi.ErrorCodes()
	for c, s := range want {
		if got[c] != s {
			t.Errorf("docs/errors.md lists %s as %d; code says %d", c, got[c], s)
		}
	}
	for c := range got {
		if _, ok := want[c]; !ok {
			t.Errorf("docs/errors.md lists %s, which the code does not have", c)
		}
	}
}

// The README contract: its test command is ./test.sh, CI runs exactly
// that, and it runs the unit and the whole-system tests (-tags e2e); the
// Quick start shows two set-up commands, and everything the README cites
// is in the repository.
func TestREADMEContract(t *testing.T) {
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	qs := readme[strings.Index(readme, "## Quick start"):]
	block := qs[strings.Index(qs, "```sh\n")+6:]
	block = block[:strings.Index(block, "```")]
	var cmds []string
	for _, l := range strings.Split(strings.TrimSpace(block), "\n") {
		cmds = append(cmds, strings.TrimSpace(strings.SplitN(l, "#", 2)[0]))
	}
	if len(cmds) != 2 || cmds[0] != "go run ./cmd/adpnode serve" || cmds[1] != "./test.sh" {
		t.Errorf("Quick start commands %q, want a node and ./test.sh", cmds)
	}
	if m := regexp.MustCompile(`(\.\./)?shared/|DECISIONS\.md`).FindString(readme); m != "" {
		t.Errorf("README cites %q, which is not in the repository (use docs/)", m)
	}
	for _, link := range regexp.MustCompile(`\]\(((docs|configs)/[^)#]+)`).FindAllStringSubmatch(readme, -1) {
		if _, err := os.Stat("../" + link[1]); err != nil {
			t.Errorf("README links to %s: %v", link[1], err)
		}
	}
	if n := strings.Count(readme, "\n"); n > 300 {
		t.Errorf("README has %d lines: it is the front door (at most 300); put the rest in docs/", n)
	}
	ci, err := os.ReadFile("../.ci/run")
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, l := range strings.Split(string(ci), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") && !strings.HasPrefix(l, "set ") && !strings.HasPrefix(l, "cd ") {
			lines = append(lines, l)
		}
	}
	if len(lines) != 1 || lines[0] != "exec ./test.sh" {
		t.Errorf(".ci/run must run exactly ./test.sh and nothing else; it runs %q", lines)
	}
	ts, err := os.ReadFile("../test.sh")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"go vet ./...", `go test -race -tags e2e -timeout 25m "$@"`, "apt-get install", "chromium", "sudo"} {
		if !strings.Contains(string(ts), want) {
			t.Errorf("test.sh lacks %q", want)
		}
	}
}

// Without root, sudo or the packages the tests need, test.sh stops with a
// clear message instead of failing later in the middle of the suite.
func TestTestShExplainsMissingPackages(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	bin := t.TempDir()
	// A PATH with only what test.sh needs to get that far: no curl, no
	// sudo, no apt-get, and an id that says "not root".
	for _, tool := range []string{"dirname"} {
		p, err := exec.LookPath(tool)
		if err != nil {
			t.Skip(err)
		}
		os.Symlink(p, filepath.Join(bin, tool))
	}
	os.WriteFile(filepath.Join(bin, "id"), []byte("#!"+bash+"\necho 1000\n"), 0o755)
	cmd := exec.Command(bash, "../test.sh")
	cmd.Env = []string{"PATH=" + bin, "ADP_CHROMIUM=/nonexistent/but/set"}
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("test.sh went on without curl:\n%s", out)
	}
	if !strings.Contains(string(out), "the tests need curl") || !strings.Contains(string(out), "root or password-less sudo") {
		t.Errorf("test.sh output does not explain:\n%s", out)
	}
}

// Property: every page of docs/ is listed in docs/README.md, cites nothing
// outside the repository (the protocol's text and the shared notes are
// not in it), and every relative link between the pages resolves.
func TestDocsIndexAndLinks(t *testing.T) {
	index, err := os.ReadFile("../docs/README.md")
	if err != nil {
		t.Fatal(err)
	}
	pages, err := filepath.Glob("../docs/*.md")
	if err != nil || len(pages) < 10 {
		t.Fatalf("docs/*.md: %v %v", pages, err)
	}
	link := regexp.MustCompile(`\]\(([^)#:]+\.(?:md|yaml|service|json))(?:#[^)]*)?\)`)
	anchored := regexp.MustCompile(`\]\(([^)\s:#]*\.md|)#([^)\s]+)\)`)
	for _, p := range append(pages, "../README.md") {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		name := filepath.Base(p)
		if p != "../README.md" && name != "README.md" && !strings.Contains(string(index), "]("+name+")") {
			t.Errorf("docs/README.md does not list %s", name)
		}
		if m := regexp.MustCompile(`\.\./shared/|\]\([^)]*shared/`).FindString(string(b)); m != "" {
			t.Errorf("%s cites %q, which is outside the repository", p, m)
		}
		for _, l := range link.FindAllStringSubmatch(string(b), -1) {
			if _, err := os.Stat(filepath.Join(filepath.Dir(p), l[1])); err != nil {
				t.Errorf("%s links to %s, which does not exist", p, l[1])
			}
		}
		for _, l := range anchored.FindAllStringSubmatch(string(b), -1) {
			target := p
			if l[1] != "" {
				target = filepath.Join(filepath.Dir(p), l[1])
			}
			tb, err := os.ReadFile(target)
			if err != nil {
				continue // reported above
			}
			if !headingAnchors(string(tb))[l[2]] {
				t.Errorf("%s links to %s#%s: no such heading", p, l[1], l[2])
			}
		}
	}
}

// headingAnchors returns the anchors GitHub gives a page's headings:
// lower case, letters, digits, '-' and '_' kept, spaces made '-', and a
// repeated anchor numbered -1, -2, ….
func headingAnchors(page string) map[string]bool {
	page = regexp.MustCompile("(?s)```.*?```").ReplaceAllString(page, "")
	out := map[string]bool{}
	seen := map[string]int{}
	for _, m := range regexp.MustCompile(`(?m)^#{1,6} (.+)$`).FindAllStringSubmatch(page, -1) {
		var a strings.Builder
		for _, r := range strings.ToLower(strings.TrimSpace(m[1])) {
			switch {
			case r == ' ':
				a.WriteRune('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				a.WriteRune(r)
			}
		}
		anchor := a.String()
		if n, ok := seen[anchor]; ok {
			seen[anchor] = n + 1
			anchor = fmt.Sprintf("%s-%d", anchor, n+1)
		} else {
			seen[anchor] = 0
		}
		out[anchor] = true
	}
	return out
}
