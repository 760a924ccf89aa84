package verifycmd

import (
	"strings"
	"testing"

	"github.com/adpnode/adpnode/internal/kerneldeps"
)

// TestVerifyLinksOnlyTheKernel checks that `adpnode verify` depends on the
// standard library, adp/... and the kernel's allowlisted modules alone: no
// storage (badger), no networking (libp2p), no host code (node, mirror).
func TestVerifyLinksOnlyTheKernel(t *testing.T) {
	deps, err := kerneldeps.List(".", "-deps", ".")
	if err != nil {
		t.Fatal(err)
	}
	self := kerneldeps.Module + "/cmd/adpnode/internal/verifycmd"
	sawKernel := false
	for _, d := range deps {
		switch {
		case d.ImportPath == self, d.Standard:
		case kerneldeps.IsKernel(d.ImportPath):
			sawKernel = true
		case d.Module != nil && kerneldeps.InModules(d.Module.Path):
		default:
			t.Errorf("verify depends on %s, outside std, adp/... and the allowlisted modules", d.ImportPath)
		}
		for _, banned := range []string{"net/http", "github.com/dgraph-io/badger", "github.com/libp2p"} {
			if strings.HasPrefix(d.ImportPath, banned) {
				t.Errorf("verify links %s", d.ImportPath)
			}
		}
	}
	if !sawKernel {
		t.Fatal("go list found no kernel dependency: the check is not looking at verify")
	}
}
