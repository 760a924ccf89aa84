package kerneldeps

import (
	"reflect"
	"strings"
	"testing"
)

// hostKnowers are the only packages whose non-test files may import the
// concrete host (package node): the composition root and the commands.
// A name ending in "/" stands for the packages under it.
var hostKnowers = []string{"internal/stack", "cmd/"}

// hostImporters returns the packages of pkgs, other than hostKnowers,
// whose non-test files import node.
func hostImporters(pkgs []Package) []string {
	var out []string
	for _, p := range pkgs {
		short := strings.TrimPrefix(p.ImportPath, Module+"/")
		allowed := false
		for _, k := range hostKnowers {
			if short == k || strings.HasSuffix(k, "/") && strings.HasPrefix(short, k) {
				allowed = true
			}
		}
		if allowed {
			continue
		}
		for _, imp := range p.Imports {
			if imp == Module+"/node" {
				out = append(out, short)
			}
		}
	}
	return out
}

// TestOnlyTheRootKnowsTheHost checks the ports rule: the layers above
// the host (the HTTP API, mirror, federation, index, metrics, attention,
// directory, live, hostport) and the test helpers (internal/adptest,
// internal/fedtest) reach it through interfaces or through the stack,
// never by importing node. Tests (_test.go files) may build a node.
func TestOnlyTheRootKnowsTheHost(t *testing.T) {
	pkgs, err := List("../..", "./...")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, p := range pkgs {
		seen[strings.TrimPrefix(p.ImportPath, Module+"/")] = true
	}
	for _, want := range []string{"node", "internal/stack", "hostapi", "internal/adptest", "internal/fedtest"} {
		if !seen[want] {
			t.Fatalf("go list did not list %s: the check would pass on nothing", want)
		}
	}
	for _, p := range hostImporters(pkgs) {
		t.Errorf("%s imports node: take an interface (see hostport) or build the host through internal/stack", p)
	}
}

// TestHostImportersFlagsEveryOther checks the rule itself: a package
// outside the root and the commands that imports node is reported, one
// under cmd/ or the root is not, and a look-alike name is not let through.
func TestHostImportersFlagsEveryOther(t *testing.T) {
	node := []string{Module + "/node"}
	pkgs := []Package{
		{ImportPath: Module + "/hostapi", Imports: node},
		{ImportPath: Module + "/internal/adptest", Imports: node},
		{ImportPath: Module + "/internal/stackx", Imports: node},
		{ImportPath: Module + "/cmdx", Imports: node},
		{ImportPath: Module + "/internal/stack", Imports: node},
		{ImportPath: Module + "/cmd/adpnode", Imports: node},
		{ImportPath: Module + "/cmd/adpload", Imports: node},
		{ImportPath: Module + "/mirror", Imports: []string{Module + "/hostport"}},
	}
	got := hostImporters(pkgs)
	want := []string{"hostapi", "internal/adptest", "internal/stackx", "cmdx"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("flagged %v, want %v", got, want)
	}
}
