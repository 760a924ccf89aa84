package adp_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"

	"github.com/adpnode/adpnode/internal/kerneldeps"
)

// TestKernelIsPure enforces the kernel's allowlist (docs/ARCHITECTURE.md):
// the kernel does no I/O, so the host, mirrors and offline verification run
// the same code. Every package under adp/ (found by go list, so new ones are
// covered) may import only the standard library packages on kerneldeps.Std,
// other kernel packages and the modules on kerneldeps.Modules; its
// transitive dependencies may not include networking, storage or process
// packages; and no kernel source file starts a goroutine or reads the clock.
func TestKernelIsPure(t *testing.T) {
	pkgs, err := kerneldeps.List(".", "./...")
	if err != nil {
		t.Fatal(err)
	}
	if len(pkgs) < 8 {
		t.Fatalf("go list found only %d kernel packages", len(pkgs))
	}
	fset := token.NewFileSet()
	for _, p := range pkgs {
		if !kerneldeps.IsKernel(p.ImportPath) {
			t.Errorf("go list ./... under adp/ found %s", p.ImportPath)
			continue
		}
		for _, imp := range p.Imports {
			if !importAllowed(imp) {
				t.Errorf("%s imports %s, which is not on the kernel allowlist", p.ImportPath, imp)
			}
		}
		for _, name := range p.GoFiles {
			path := filepath.Join(p.Dir, name)
			f, err := parser.ParseFile(fset, path, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			ast.Inspect(f, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.GoStmt:
					t.Errorf("%s: starts a goroutine", fset.Position(n.Pos()))
				case *ast.SelectorExpr:
					if x, ok := n.X.(*ast.Ident); ok && x.Name == "time" && (n.Sel.Name == "Now" || n.Sel.Name == "Since" || n.Sel.Name == "Until") {
						t.Errorf("%s: reads the clock (time.%s)", fset.Position(n.Pos()), n.Sel.Name)
					}
				}
				return true
			})
		}
	}
	deps, err := kerneldeps.List(".", "-deps", "./...")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range deps {
		if d.Standard {
			for _, banned := range []string{"net", "net/http", "os/exec", "os/signal"} {
				if d.ImportPath == banned {
					t.Errorf("kernel depends on %s", d.ImportPath)
				}
			}
			continue
		}
		if !kerneldeps.IsKernel(d.ImportPath) && (d.Module == nil || !kerneldeps.InModules(d.Module.Path)) {
			t.Errorf("kernel depends on %s, outside the allowlisted modules", d.ImportPath)
		}
	}
}

func importAllowed(imp string) bool {
	if kerneldeps.IsKernel(imp) || kerneldeps.StdAllowed(imp) {
		return true
	}
	if strings.Contains(strings.SplitN(imp, "/", 2)[0], ".") {
		// A module path: allowed when its module is on the list.
		return kerneldeps.InModules(imp)
	}
	return false
}

// TestAllowlistRefuses checks the allowlist refuses what the kernel must not
// import, so the purity test cannot pass vacuously.
func TestAllowlistRefuses(t *testing.T) {
	for _, imp := range []string{"os", "net", "net/http", "time", "os/exec", "io/ioutil", "log/slog", "context",
		"github.com/dgraph-io/badger/v4", "github.com/libp2p/go-libp2p", "github.com/adpnode/adpnode/node",
		"github.com/adpnode/adpnode/assertion", "github.com/adpnode/adpnode/adpx"} {
		if importAllowed(imp) {
			t.Errorf("allowlist accepts %s", imp)
		}
	}
	for _, imp := range []string{"bytes", "github.com/adpnode/adpnode/adp/identity", "github.com/gowebpki/jcs", "github.com/santhosh-tekuri/jsonschema/v6"} {
		if !importAllowed(imp) {
			t.Errorf("allowlist refuses %s", imp)
		}
	}
}
