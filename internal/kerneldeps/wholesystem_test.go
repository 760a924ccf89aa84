package kerneldeps

import (
	"go/ast"
	"go/build/constraint"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// The whole-system tests (docs/testing.md) carry the build tag e2e: a test
// file that starts the composition root (stack, directly or through
// adptest.StartHost*), several federated nodes (internal/fedtest), a child
// process or a browser builds only with -tags e2e, so `go test ./...`
// runs the unit tests alone and ./test.sh runs both.

// E2ETag is the build tag of the whole-system tests.
const E2ETag = "e2e"

// wholeSystemImports are the imports that make a test file whole-system
// by themselves. A path ending in "/" stands for the packages under it.
var wholeSystemImports = []string{
	Module + "/stack",               // the composition root
	Module + "/internal/fedtest",    // several federated nodes
	Module + "/internal/testtools/", // third-party servers built for the tests
	"github.com/chromedp/",          // a browser
	"os/exec",                       // a child process
}

// execAllowed are the test files that import os/exec only to run the go
// tool over the source (go list), starting no node.
var execAllowed = map[string]bool{
	"adp/purity_test.go": true,
}

// startsSystem reports, for a non-test function body, whether it starts
// the composition root: it names the stack package.
//
// Starter functions in test files: a function that calls
// adptest.StartHost*, names a whole-system import, or calls a starter
// (by name, in the same directory) is one.

// srcFile is one parsed Go file of a directory.
type srcFile struct {
	path string // relative to the module root, slash-separated
	f    *ast.File
	test bool
}

// importName returns the name a file uses for import path p, or "".
func importName(f *ast.File, p string) string {
	for _, s := range f.Imports {
		ip, _ := strconv.Unquote(s.Path.Value)
		if ip != p {
			continue
		}
		if s.Name != nil {
			return s.Name.Name
		}
		return ip[strings.LastIndex(ip, "/")+1:]
	}
	return ""
}

// wholeSystemImport returns the first whole-system import of a test file
// (os/exec unless the file is allowed it), or "".
func wholeSystemImport(sf srcFile) string {
	for _, s := range sf.f.Imports {
		ip, _ := strconv.Unquote(s.Path.Value)
		if ip == "os/exec" && execAllowed[sf.path] {
			continue
		}
		for _, w := range wholeSystemImports {
			if ip == w || strings.HasSuffix(w, "/") && strings.HasPrefix(ip, w) {
				return ip
			}
		}
	}
	return ""
}

// funcName names a declared function by its name and a method by its
// name after a dot: a call x.m() may be the method m (or a function of
// another package), never the function m of this one.
func funcName(d *ast.FuncDecl) string {
	if d.Recv != nil {
		return "." + d.Name.Name
	}
	return d.Name.Name
}

// calls lists the names (as funcName gives them) a body calls,
// and whether it selects from one of pkgs (their local names) or calls
// adptest.StartHost*.
func calls(body ast.Node, pkgs map[string]bool, adptest string) (names map[string]bool, direct bool) {
	names = map[string]bool{}
	ast.Inspect(body, func(n ast.Node) bool {
		switch x := n.(type) {
		case *ast.SelectorExpr:
			if id, ok := x.X.(*ast.Ident); ok {
				if pkgs[id.Name] {
					direct = true
				}
				if adptest != "" && id.Name == adptest && strings.HasPrefix(x.Sel.Name, "StartHost") {
					direct = true
				}
			}
		case *ast.CallExpr:
			switch f := x.Fun.(type) {
			case *ast.Ident:
				names[f.Name] = true
			case *ast.SelectorExpr:
				names["."+f.Sel.Name] = true
			}
		}
		return true
	})
	return names, direct
}

// wholeSystemFiles returns, for the files of one directory, the test files
// that start a whole system, each with the reason.
func wholeSystemFiles(files []srcFile) map[string]string {
	starters := map[string]bool{}
	type fn struct {
		file  string
		name  string
		names map[string]bool
	}
	var testFns []fn
	out := map[string]string{}
	for _, sf := range files {
		// The local names of the packages whose use starts a system.
		pkgs := map[string]bool{}
		if n := importName(sf.f, Module+"/stack"); n != "" {
			pkgs[n] = true
		}
		adptest := ""
		if sf.test {
			for _, s := range sf.f.Imports {
				ip, _ := strconv.Unquote(s.Path.Value)
				if ip == "os/exec" && execAllowed[sf.path] {
					continue
				}
				for _, w := range wholeSystemImports {
					if ip == w || strings.HasSuffix(w, "/") && strings.HasPrefix(ip, w) {
						pkgs[importName(sf.f, ip)] = true
					}
				}
			}
			adptest = importName(sf.f, Module+"/internal/adptest")
			if imp := wholeSystemImport(sf); imp != "" {
				out[sf.path] = "imports " + imp
			}
		}
		for _, d := range sf.f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			names, direct := calls(fd.Body, pkgs, adptest)
			if direct {
				starters[funcName(fd)] = true
				if sf.test {
					if _, ok := out[sf.path]; !ok {
						out[sf.path] = funcName(fd) + " starts a host"
					}
				}
				continue
			}
			if sf.test {
				testFns = append(testFns, fn{sf.path, funcName(fd), names})
			}
		}
	}
	// Test functions that call a starter are starters, to a fixpoint.
	for changed := true; changed; {
		changed = false
		for _, f := range testFns {
			if starters[f.name] {
				if _, ok := out[f.file]; !ok {
					out[f.file] = f.name + " starts a host"
				}
				continue
			}
			for n := range f.names {
				if starters[n] {
					starters[f.name] = true
					out[f.file] = f.name + " calls " + n
					changed = true
					break
				}
			}
		}
	}
	return out
}

// tagState says whether a file's build constraint requires the e2e tag
// (under no assignment of its other tags does it build without e2e), and
// whether it negates it (under some assignment it builds without e2e and
// not with it).
func tagState(f *ast.File) (requires, negates bool) {
	for _, cg := range f.Comments {
		if cg.Pos() >= f.Package {
			break
		}
		for _, c := range cg.List {
			if !constraint.IsGoBuild(c.Text) {
				continue
			}
			x, err := constraint.Parse(c.Text)
			if err != nil {
				continue
			}
			var others []string
			x.Eval(func(tag string) bool {
				if tag != E2ETag && !slices.Contains(others, tag) {
					others = append(others, tag)
				}
				return true
			})
			requires = true
			for bits := 0; bits < 1<<len(others); bits++ {
				eval := func(e2e bool) bool {
					return x.Eval(func(tag string) bool {
						if tag == E2ETag {
							return e2e
						}
						return bits&(1<<slices.Index(others, tag)) != 0
					})
				}
				without, with := eval(false), eval(true)
				if without {
					requires = false
				}
				if without && !with {
					negates = true
				}
			}
		}
	}
	return requires, negates
}

// untaggedWholeSystem returns the test files of dirs (directory → files)
// that start a whole system without requiring the e2e tag, and those whose
// constraint excludes them under it, each with the reason.
func untaggedWholeSystem(dirs map[string][]srcFile) []string {
	var bad []string
	for _, files := range dirs {
		ws := wholeSystemFiles(files)
		for _, sf := range files {
			if !sf.test {
				continue
			}
			requires, negates := tagState(sf.f)
			if negates {
				bad = append(bad, sf.path+": its build constraint excludes it under -tags "+E2ETag+" (the e2e build must be a superset)")
			}
			if why, ok := ws[sf.path]; ok && !requires {
				bad = append(bad, sf.path+": "+why+"; add //go:build "+E2ETag)
			}
		}
	}
	sort.Strings(bad)
	return bad
}

// parseModule parses every Go file under root (no testdata, vendor,
// node_modules or dot directories), grouped by directory.
func parseModule(t *testing.T, root string) map[string][]srcFile {
	fset := token.NewFileSet()
	dirs := map[string][]srcFile{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if p != root && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata" || name == "vendor" || name == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, parser.ParseComments|parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		dir := filepath.ToSlash(filepath.Dir(rel))
		dirs[dir] = append(dirs[dir], srcFile{path: rel, f: f, test: strings.HasSuffix(name, "_test.go")})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return dirs
}

// TestWholeSystemTestsAreTagged: every test file of the module that starts
// the composition root, federated nodes, a child process or a browser
// builds only with -tags e2e, and no test file is left out by it.
// Property: `go test ./...` without the tag runs the unit tests alone, and
// the e2e build runs every test.
func TestWholeSystemTestsAreTagged(t *testing.T) {
	dirs := parseModule(t, "../..")
	n := 0
	for _, files := range dirs {
		for _, sf := range files {
			if sf.test {
				n++
			}
		}
	}
	if n < 100 {
		t.Fatalf("found %d test files: the check would pass on nothing", n)
	}
	for _, b := range untaggedWholeSystem(dirs) {
		t.Error(b)
	}
}

// TestWholeSystemRuleFlags checks the rule itself on made-up files: a
// direct start, a start through a helper of another file, a child process,
// federated nodes and a browser are flagged without the tag and pass with
// it; a unit test and the go-list exception pass; a !e2e constraint is
// flagged.
func TestWholeSystemRuleFlags(t *testing.T) {
	const tag = "//go:build e2e\n\n"
	src := map[string]string{
		"a/unit_test.go":     "package a\nimport (\"testing\"; \"github.com/adpnode/adpnode/internal/adptest\")\nfunc TestUnit(t *testing.T) { _ = adptest.NewAgent(\"x\") }\n",
		"a/host_test.go":     "package a\nimport (\"testing\"; at \"github.com/adpnode/adpnode/internal/adptest\")\nfunc TestHost(t *testing.T) { _ = at.StartHostHTTP(t, nil, nil) }\n",
		"a/helper_test.go":   tag + "package a\nimport \"github.com/adpnode/adpnode/internal/adptest\"\nfunc startIt(t any) { adptest.StartHost(nil, nil) }\nfunc wrap(t any) { startIt(t) }\n",
		"a/user_test.go":     "package a\nimport \"testing\"\nfunc TestUser(t *testing.T) { wrap(t) }\n",
		"a/tagged_test.go":   tag + "package a\nimport \"testing\"\nfunc TestTagged(t *testing.T) { wrap(t) }\n",
		"a/exec_test.go":     "package a\nimport \"os/exec\"\nvar _ = exec.Command\n",
		"a/fed_test.go":      tag + "package a\nimport \"github.com/adpnode/adpnode/internal/fedtest\"\nvar _ = fedtest.Start\n",
		"a/neg_test.go":      "//go:build !e2e\n\npackage a\n",
		"a/race_test.go":     "//go:build !race\n\npackage a\nimport \"os/exec\"\nvar _ = exec.Command\n",
		"a/race2_test.go":    "//go:build !race && e2e\n\npackage a\nimport \"os/exec\"\nvar _ = exec.Command\n",
		"a/either_test.go":   "//go:build linux || e2e\n\npackage a\nimport \"os/exec\"\nvar _ = exec.Command\n",
		"b/browser_test.go":  "//go:build linux\n\npackage b\nimport \"github.com/chromedp/chromedp\"\nvar _ = chromedp.Run\n",
		"b/both_test.go":     "//go:build linux && e2e\n\npackage b\nimport \"github.com/chromedp/chromedp\"\nvar _ = chromedp.Run\n",
		"adp/purity_test.go": "package adp\nimport \"os/exec\"\nvar _ = exec.Command\n",
		// A non-test file that names the stack makes its function a starter.
		"c/serve.go":      "package main\nimport istack \"github.com/adpnode/adpnode/stack\"\nfunc startStack() { istack.New() }\n",
		"c/serve_test.go": "package main\nimport \"testing\"\nfunc startServe() { startStack() }\nfunc TestServe(t *testing.T) { startServe() }\n",
		"c/cli_test.go":   "package main\nimport \"testing\"\nfunc TestVersion(t *testing.T) { run() }\n",
	}
	fset := token.NewFileSet()
	dirs := map[string][]srcFile{}
	for p, s := range src {
		f, err := parser.ParseFile(fset, p, s, parser.ParseComments)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		dir := filepath.ToSlash(filepath.Dir(p))
		dirs[dir] = append(dirs[dir], srcFile{path: p, f: f, test: strings.HasSuffix(p, "_test.go")})
	}
	var got []string
	for _, b := range untaggedWholeSystem(dirs) {
		got = append(got, b[:strings.Index(b, ":")])
	}
	want := []string{"a/either_test.go", "a/exec_test.go", "a/host_test.go", "a/neg_test.go", "a/race_test.go", "a/user_test.go", "b/browser_test.go", "c/serve_test.go"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("flagged %v, want %v", got, want)
	}
}

// TestWholeSystemFilesList prints the whole-system test files and why
// (go test -v -run WholeSystemFilesList ./internal/kerneldeps).
func TestWholeSystemFilesList(t *testing.T) {
	if !testing.Verbose() {
		t.Skip("only with -v")
	}
	dirs := parseModule(t, "../..")
	var lines []string
	for _, files := range dirs {
		for p, why := range wholeSystemFiles(files) {
			lines = append(lines, p+": "+why)
		}
	}
	sort.Strings(lines)
	t.Log("\n" + strings.Join(lines, "\n"))
}
