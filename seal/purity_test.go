package seal

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// seal is pure like the kernel: no network, disk, goroutines or clock
// reads; randomness comes from the caller's io.Reader or crypto/hpke.
func TestPure(t *testing.T) {
	files, _ := filepath.Glob("*.go")
	banned := []string{"net", "os", "time", "io/fs", "syscall", "math/rand", "log", "log/slog", "unsafe"}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range af.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			for _, b := range banned {
				if p == b || strings.HasPrefix(p, b+"/") {
					t.Errorf("%s imports %s", f, p)
				}
			}
			if strings.Contains(p, ".") && !strings.HasPrefix(p, "golang.org/x/crypto/") && !strings.HasPrefix(p, "github.com/adpnode/adpnode/adp") {
				t.Errorf("%s imports %s (only std, x/crypto and the kernel)", f, p)
			}
		}
	}
	if len(files) < 5 {
		t.Fatalf("found %d files", len(files))
	}
}
