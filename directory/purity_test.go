package directory_test

import (
	"strings"
	"testing"

	"github.com/adpnode/adpnode/internal/kerneldeps"
)

// TestPure: the directory model does no I/O and keeps no clock or
// goroutines: it imports only the kernel and the standard library
// packages the kernel may import.
func TestPure(t *testing.T) {
	pkgs, err := kerneldeps.List(".", ".")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pkgs {
		for _, imp := range p.Imports {
			if !kerneldeps.IsKernel(imp) && !kerneldeps.StdAllowed(imp) {
				t.Errorf("%s imports %s", p.ImportPath, imp)
			}
		}
		for _, f := range p.GoFiles {
			if strings.HasSuffix(f, "_test.go") {
				t.Errorf("unexpected test file in GoFiles: %s", f)
			}
		}
	}
}
