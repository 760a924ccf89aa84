package storelayout

import (
	"flag"
	"fmt"
	"go/ast"
	"go/constant"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite docs/storage.md from the table")

const (
	root    = "../.."
	docPath = root + "/docs/storage.md"
)

// TestNoPrefixOverlap: no key space is a prefix of another, so no key
// belongs to two owners and no prefix scan of one space reads another's.
func TestNoPrefixOverlap(t *testing.T) {
	for i, a := range Table {
		if a.Prefix == "" {
			t.Errorf("%s: empty prefix", a.Name)
		}
		for j, b := range Table {
			if i != j && strings.HasPrefix(b.Prefix, a.Prefix) {
				t.Errorf("%s (%q) is a prefix of %s (%q)", a.Name, a.Prefix, b.Name, b.Prefix)
			}
		}
	}
}

func TestRows(t *testing.T) {
	names := map[string]bool{}
	for _, s := range Table {
		if names[s.Name] {
			t.Errorf("%s twice", s.Name)
		}
		names[s.Name] = true
		if s.Since < 1 || s.Since > Version {
			t.Errorf("%s: since layout %d, but the layout is %d", s.Name, s.Since, Version)
		}
		if s.Owner == "" || s.Key == "" || s.Value == "" {
			t.Errorf("%s: owner, key and value shapes are required", s.Name)
		}
		if !strings.HasPrefix(s.Key, s.Prefix) {
			t.Errorf("%s: key shape %q does not start with %q", s.Name, s.Key, s.Prefix)
		}
	}
}

// TestTableIsTheConstants: every row names a constant of this package with
// its prefix, and every constant (but Version and the two namespaces) has
// a row.
func TestTableIsTheConstants(t *testing.T) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "storelayout.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	info := &types.Info{Defs: map[*ast.Ident]types.Object{}}
	if _, err := (&types.Config{Importer: importer.Default()}).Check("storelayout", fset, []*ast.File{f}, info); err != nil {
		t.Fatal(err)
	}
	consts := map[string]string{}
	for id, obj := range info.Defs {
		if c, ok := obj.(*types.Const); ok && c.Parent() == c.Pkg().Scope() && c.Val().Kind() == constant.String {
			consts[id.Name] = constant.StringVal(c.Val())
		}
	}
	for _, s := range Table {
		if v, ok := consts[s.Name]; !ok || v != s.Prefix {
			t.Errorf("row %s: constant %s = %q, want %q", s.Name, s.Name, v, s.Prefix)
		}
		delete(consts, s.Name)
	}
	delete(consts, "Mirror")
	delete(consts, "Attention")
	for name := range consts {
		t.Errorf("constant %s has no row in Table", name)
	}
}

// sources returns the module's non-test Go files by directory (relative
// to the module root), outside this package.
func sources(t *testing.T) map[string][]string {
	out := map[string][]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && p != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		rel, _ := filepath.Rel(root, filepath.Dir(p))
		if rel == "internal/storelayout" {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		out[filepath.ToSlash(rel)] = append(out[filepath.ToSlash(rel)], string(b))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// uses reports whether src refers to the identifier storelayout.name.
func uses(src, name string) bool {
	ref := "storelayout." + name
	for i := strings.Index(src, ref); i >= 0; {
		end := i + len(ref)
		if end == len(src) || !isIdent(src[end]) {
			return true
		}
		j := strings.Index(src[end:], ref)
		if j < 0 {
			return false
		}
		i = end + j
	}
	return false
}

func isIdent(c byte) bool {
	return c == '_' || '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
}

// TestOwnersUseTheirSpaces: every row is used, by the package it names as
// owner.
func TestOwnersUseTheirSpaces(t *testing.T) {
	src := sources(t)
	for _, s := range Table {
		used := false
		for _, f := range src[s.Owner] {
			used = used || uses(f, s.Name)
		}
		if !used {
			t.Errorf("%s: no non-test file of %s/ uses storelayout.%s", s.Name, s.Owner, s.Name)
		}
	}
}

// stray reports a line that spells a key prefix of its own: a pfx/key
// constant set to a string literal, or a []byte("...") literal handed to
// Badger.
func stray(line string) bool {
	l := strings.TrimPrefix(strings.TrimSpace(line), "const ")
	if (strings.HasPrefix(l, "pfx") || strings.HasPrefix(l, "key")) && len(l) > 3 && 'A' <= l[3] && l[3] <= 'Z' {
		if _, v, ok := strings.Cut(l, "="); ok && strings.HasPrefix(strings.TrimSpace(v), "\"") {
			return true
		}
	}
	for _, call := range []string{"Get([]byte(\"", "Set([]byte(\"", "Delete([]byte(\"", "Prefix: []byte(\""} {
		if strings.Contains(l, call) {
			return true
		}
	}
	return false
}

// TestNoPrefixOutsideTheTable: no package spells a key prefix of its own.
func TestNoPrefixOutsideTheTable(t *testing.T) {
	for _, c := range []struct {
		line string
		want bool
	}{
		{`	pfxFoo = "f/"`, true},
		{`const keyBar = "b"`, true},
		{`const pfxCheck = storelayout.FederationBinding`, false},
		{`	keyBar   = "b/x" // comment`, true},
		{`	pfxFoo = storelayout.Foo`, false},
		{`	it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte("q/")})`, true},
		{`	_, err := txn.Get([]byte("readyz"))`, true},
		{`	prefix = "x"`, false},
	} {
		if got := stray(c.line); got != c.want {
			t.Errorf("stray(%q) = %v", c.line, got)
		}
	}
	for dir, files := range sources(t) {
		for _, f := range files {
			for _, line := range strings.Split(f, "\n") {
				if stray(line) {
					t.Errorf("%s/: %q: take key prefixes from internal/storelayout", dir, strings.TrimSpace(line))
				}
			}
		}
	}
}

func TestLookup(t *testing.T) {
	for _, c := range []struct {
		key, want string
	}{
		{"r/01J0ROOM/\x00\x00\x00\x00\x00\x00\x00\x01", "Record"},
		{"m/r/host/room/x", "MirrorRecord"},
		{"at/mh/agent", "AttentionInbox"},
		{"at/m/agent/x", "AttentionMention"},
		{"ic/abcd", "IndexConflict"},
		{"i/key/room", "IndexEntry"},
		{"v/layout", "Layout"},
		{"v/layoutx", ""},
		{"at/idx", ""},
		{"m/q/x", ""},
		{"", ""},
		{"zz", ""},
	} {
		s, ok := Lookup([]byte(c.key))
		if ok != (c.want != "") || s.Name != c.want {
			t.Errorf("Lookup(%q) = %s %v, want %q", c.key, s.Name, ok, c.want)
		}
	}
}

// cell escapes a value for a Markdown table cell.
var cell = strings.NewReplacer("|", "\\|", "<", "&lt;", ">", "&gt;")

// render is docs/storage.md.
func render() string {
	var b strings.Builder
	b.WriteString("# Storage layout\n\n")
	b.WriteString("Generated from `internal/storelayout` (`go test ./internal/storelayout -run Doc -update`); do not edit.\n\n")
	fmt.Fprintf(&b, "Every key of a node's Badger database belongs to one of these key spaces. No prefix is a prefix of another, "+
		"each owner takes its prefixes from the table, and the layout version the node writes under `v/layout` is %d.\n\n", Version)
	b.WriteString("| prefix | owner | key | value | since layout |\n|---|---|---|---|---|\n")
	for _, s := range Table {
		p := "`" + s.Prefix + "`"
		if s.Single {
			p += " (one key)"
		}
		fmt.Fprintf(&b, "| %s | `%s` | `%s` | %s | %d |\n", p, s.Owner, s.Key, cell.Replace(s.Value), s.Since)
	}
	b.WriteString("\nLayout versions: 1 had no `v/layout` key; 2 added record hashes to the envelope index and room-state " +
		"snapshots (a version 1 dir is upgraded at start by one full replay); 3 added the room registry `h/` " +
		"(written at start for a version 2 dir, no replay).\n")
	return b.String()
}

// TestDoc keeps docs/storage.md equal to the table.
func TestDoc(t *testing.T) {
	want := render()
	got, err := os.ReadFile(docPath)
	if err == nil && string(got) == want {
		return
	}
	if *update {
		if err := os.WriteFile(docPath, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("docs/storage.md is stale; run: go test ./internal/storelayout -run Doc -update")
}
