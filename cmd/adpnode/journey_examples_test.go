//go:build e2e

package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Property: whatever the README's deal example writes where it is run
// (the repository root, as the README says: keys, sealing keys, terms,
// salts, receipts) is ignored by git, so a key never shows up as a file to
// commit.
func TestExamplesLeaveNoKeyForGit(t *testing.T) {
	top, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		t.Skipf("not in a git work tree: %v", err)
	}
	root := strings.TrimSpace(string(top))
	// The sealed variant writes what the plain one does and the sealing
	// key files besides.
	const create = "./adpnode room create --node $NODE --key alice.key "
	d := startDealExample(t, func(s string) string {
		return strings.Replace(s, create, create+"--confidentiality member-only ", 1)
	})
	d.bash(d.part2)
	entries, err := os.ReadDir(d.work)
	if err != nil {
		t.Fatal(err)
	}
	var written []string
	keys := 0
	for _, e := range entries {
		if e.Name() == "vars.sh" { // the test's own
			continue
		}
		written = append(written, e.Name())
		if strings.HasSuffix(e.Name(), ".key") {
			keys++
		}
	}
	if keys < 2 {
		t.Fatalf("the example wrote %v: want alice's and bob's key files", written)
	}
	for _, name := range written {
		check := exec.Command("git", "-C", root, "check-ignore", "-q", "--no-index", "--", filepath.Join(root, name))
		if err := check.Run(); err != nil {
			t.Errorf("%s, which the deal example writes at the repository root, is not ignored by git (.gitignore): %v", name, err)
		}
	}
}
