package kerneldeps

import (
	"flag"
	"os"
	"sort"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the import arrows in docs/ARCHITECTURE.md")

const (
	archDoc   = "../../docs/ARCHITECTURE.md"
	beginMark = "<!-- imports:begin (generated: go test ./internal/kerneldeps -run Arrows -update) -->"
	endMark   = "<!-- imports:end -->"
)

// arrows renders every package's imports inside the module, one line each.
func arrows(t *testing.T) string {
	pkgs, err := List("../..", "./...")
	if err != nil {
		t.Fatal(err)
	}
	short := func(p string) string {
		if p == Module {
			return "."
		}
		return strings.TrimPrefix(p, Module+"/")
	}
	var b strings.Builder
	b.WriteString("```\n")
	sort.Slice(pkgs, func(i, j int) bool { return pkgs[i].ImportPath < pkgs[j].ImportPath })
	for _, p := range pkgs {
		var deps []string
		for _, imp := range p.Imports {
			if strings.HasPrefix(imp, Module+"/") {
				deps = append(deps, short(imp))
			}
		}
		if len(deps) == 0 {
			deps = []string{"(std and third-party only)"}
		}
		b.WriteString(short(p.ImportPath) + " -> " + strings.Join(deps, " ") + "\n")
	}
	b.WriteString("```\n")
	return b.String()
}

// TestArchitectureArrows keeps the import arrows in docs/ARCHITECTURE.md
// true: they must equal what go list reports.
func TestArchitectureArrows(t *testing.T) {
	doc, err := os.ReadFile(archDoc)
	if err != nil {
		t.Fatal(err)
	}
	s := string(doc)
	i, j := strings.Index(s, beginMark), strings.Index(s, endMark)
	if i < 0 || j < i {
		t.Fatalf("%s has no generated imports block", archDoc)
	}
	want := arrows(t)
	got := s[i+len(beginMark)+1 : j]
	if got == want {
		return
	}
	if *update {
		if err := os.WriteFile(archDoc, []byte(s[:i+len(beginMark)+1]+want+s[j:]), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("the import arrows in docs/ARCHITECTURE.md are stale; run: go test ./internal/kerneldeps -run Arrows -update\nwant:\n%s", want)
}
