package kerneldeps

import (
	"strings"
	"testing"
)

// hostKnowers are the packages allowed to import the concrete host
// (package node): the composition root, the commands, and the HTTP API
// (whose handlers read the host's own rooms). httpwire is listed until
// node.NonceError goes (issue 13 step 3).
var hostKnowers = []string{"internal/stack", "cmd/", "hostapi", "internal/adptest", "internal/fedtest", "httpwire", "node"}

// TestOnlyTheRootKnowsTheHost is issue 13's acceptance: the layers above
// the host (mirror, federation, index, metrics, attention, directory,
// live, hostport) reach it through interfaces, never by importing node.
func TestOnlyTheRootKnowsTheHost(t *testing.T) {
	pkgs, err := List("../..", "./...")
	if err != nil {
		t.Fatal(err)
	}
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
				t.Errorf("%s imports node: take an interface (see hostport) or move the code into internal/stack", short)
			}
		}
	}
}
