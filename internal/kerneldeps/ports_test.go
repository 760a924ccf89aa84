package kerneldeps

import (
	"reflect"
	"strings"
	"testing"
)

// knowers says, for each concrete package the layers must reach through
// ports, which packages' non-test files may import it: the composition
// root, the commands, and the few layers built on it. A name ending in
// "/" stands for the packages under it.
var knowers = map[string][]string{
	// The concrete host.
	"node": {"stack", "cmd/"},
	// The libp2p peer: the mirror rides its topics and streams; the
	// federated test helper reads its peers.
	"federation": {"stack", "cmd/", "mirror", "internal/fedtest"},
	// The mirror; the federated test helper reaches into its rooms.
	"mirror": {"stack", "cmd/", "internal/fedtest"},
	// The host log.
	"hostlog": {"stack", "cmd/"},
	// The witness and the host's witness submitter; the mirror runs a
	// witness for the logs of the hosts it mirrors.
	"witness": {"stack", "cmd/", "mirror"},
}

// hostKnowers are the only packages whose non-test files may import the
// concrete host (package node): the composition root and the commands.
var hostKnowers = knowers["node"]

// allowed reports whether short is one of the names (or under one ending
// in "/").
func allowed(short string, names []string) bool {
	for _, k := range names {
		if short == k || strings.HasSuffix(k, "/") && strings.HasPrefix(short, k) {
			return true
		}
	}
	return false
}

// importersOf returns the packages of pkgs, other than those allowed,
// whose non-test files import Module/target.
func importersOf(pkgs []Package, target string, allow []string) []string {
	var out []string
	for _, p := range pkgs {
		short := strings.TrimPrefix(p.ImportPath, Module+"/")
		if allowed(short, allow) {
			continue
		}
		for _, imp := range p.Imports {
			if imp == Module+"/"+target {
				out = append(out, short)
			}
		}
	}
	return out
}

// hostImporters returns the packages of pkgs, other than hostKnowers,
// whose non-test files import node.
func hostImporters(pkgs []Package) []string { return importersOf(pkgs, "node", hostKnowers) }

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
	for _, want := range []string{"node", "stack", "hostapi", "internal/adptest", "internal/fedtest"} {
		if !seen[want] {
			t.Fatalf("go list did not list %s: the check would pass on nothing", want)
		}
	}
	for _, p := range hostImporters(pkgs) {
		t.Errorf("%s imports node: take an interface (see hostport) or build the host through stack", p)
	}
}

// TestPortsAtEveryLayer: the federation peer, the mirror, the host log
// and the witness are imported (outside tests) only by the packages the
// knowers table names; the HTTP API, attention and metrics take small
// interfaces declared where they are used, and stack hands them
// the concrete values.
// Property: a layer reaches federation, mirror, hostlog and witness through
// a port, never by import, unless the table allows it.
func TestPortsAtEveryLayer(t *testing.T) {
	pkgs, err := List("../..", "./...")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, p := range pkgs {
		seen[strings.TrimPrefix(p.ImportPath, Module+"/")] = true
	}
	for target := range knowers {
		if !seen[target] {
			t.Fatalf("go list did not list %s: the check would pass on nothing", target)
		}
		for _, p := range importersOf(pkgs, target, knowers[target]) {
			t.Errorf("%s imports %s: declare the interface it needs where it is used and let stack wire it", p, target)
		}
	}
}

// noLibp2p are the layers above the network whose whole dependency
// graph must not hold libp2p: they see peers through fedport values and
// their own interfaces.
var noLibp2p = []string{"hostapi", "attention", "metrics"}

// TestLayersLinkNoLibp2p: go list -deps of the HTTP API, attention and
// metrics names no github.com/libp2p/ package.
// Property: the layers above federation do not link the libp2p stack.
func TestLayersLinkNoLibp2p(t *testing.T) {
	for _, short := range noLibp2p {
		deps, err := List("../..", "-deps", "./"+short)
		if err != nil {
			t.Fatal(err)
		}
		if len(deps) < 2 {
			t.Fatalf("go list -deps ./%s listed %d packages: the check would pass on nothing", short, len(deps))
		}
		var bad []string
		for _, d := range deps {
			if strings.HasPrefix(d.ImportPath, "github.com/libp2p/") {
				bad = append(bad, d.ImportPath)
			}
		}
		if len(bad) > 0 {
			t.Errorf("%s depends on %d libp2p packages (first: %s): take fedport values and interfaces, not federation or mirror", short, len(bad), bad[0])
		}
	}
}

// TestImportersOfFlagsEveryOther checks the rule itself: a package
// outside the allowed ones that imports the target is reported, one
// under cmd/ or the root is not, and a look-alike name is not let through.
func TestImportersOfFlagsEveryOther(t *testing.T) {
	node := []string{Module + "/node"}
	pkgs := []Package{
		{ImportPath: Module + "/hostapi", Imports: node},
		{ImportPath: Module + "/internal/adptest", Imports: node},
		{ImportPath: Module + "/stackx", Imports: node},
		{ImportPath: Module + "/cmdx", Imports: node},
		{ImportPath: Module + "/stack", Imports: node},
		{ImportPath: Module + "/cmd/adpnode", Imports: node},
		{ImportPath: Module + "/cmd/adpload", Imports: node},
		{ImportPath: Module + "/mirror", Imports: []string{Module + "/hostport"}},
	}
	got := hostImporters(pkgs)
	want := []string{"hostapi", "internal/adptest", "stackx", "cmdx"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("flagged %v, want %v", got, want)
	}
	fed := []string{Module + "/federation", Module + "/hostlog"}
	pkgs = []Package{
		{ImportPath: Module + "/mirror", Imports: fed},
		{ImportPath: Module + "/metrics", Imports: fed},
		{ImportPath: Module + "/mirrorx", Imports: fed},
		{ImportPath: Module + "/internal/fedtest", Imports: fed},
	}
	if got, want := importersOf(pkgs, "federation", knowers["federation"]), []string{"metrics", "mirrorx"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("federation: flagged %v, want %v", got, want)
	}
	if got, want := importersOf(pkgs, "hostlog", knowers["hostlog"]), []string{"mirror", "metrics", "mirrorx", "internal/fedtest"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("hostlog: flagged %v, want %v", got, want)
	}
}
