package kerneldeps

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"reflect"
	"sort"
	"testing"
)

// A test asserts conditions, never how long something took
// (docs/testing.md): a deadline only bounds a wait. wallClockAssertions
// finds the other kind in test files: outside any loop (a loop's deadline
// bounds its wait), an if whose condition compares a duration read off the
// clock (time.Since, a Sub of two times, or a variable holding one) and
// whose body fails the test.

// wallClockAllowed are the comparisons kept, none of which a slow machine
// can fail: a rate that a longer elapsed time only loosens, a check made
// only while a time has not passed, values that are not durations taken.
var wallClockAllowed = map[string]string{
	// At most one logging round per RoundInterval of elapsed time.
	"hostlog/hostlog_test.go:TestRoundsArePaced": "pacing: rounds <= elapsed/interval+1",
	// The flush interval holds a burst back: asserted only while the
	// interval has not passed (a late look asserts nothing).
	"hostapi/sse_internal_test.go:TestSSEWaitingStreamHoldsNoBuffer": "guarded: time.Since(sent) < interval",
	// Not a duration taken: a deadline the code computed, against the
	// time it was set (an hour's timeout), and a timestamp's plausibility.
	"hostapi/sse_internal_test.go:TestSSEWriteDeadlineRenewedPerQuarter": "deadline.Sub(at) >= timeout",
	"hostapi/hostlog_test.go:TestHostLogInclusionBatch":                  "published_at within an hour of now",
}

// clockRead reports whether e reads a duration off the clock or uses a
// variable in tainted.
func clockRead(e ast.Expr, tainted map[string]bool) bool {
	found := false
	ast.Inspect(e, func(n ast.Node) bool {
		switch x := n.(type) {
		case *ast.CallExpr:
			if sel, ok := x.Fun.(*ast.SelectorExpr); ok {
				if id, ok := sel.X.(*ast.Ident); ok && id.Name == "time" && sel.Sel.Name == "Since" {
					found = true
				}
				if sel.Sel.Name == "Sub" || sel.Sel.Name == "Elapsed" {
					found = true
				}
			}
		case *ast.Ident:
			if tainted[x.Name] {
				found = true
			}
		}
		return !found
	})
	return found
}

// failsTest reports whether a block calls Fatal, Fatalf, Error, Errorf or
// FailNow.
func failsTest(b *ast.BlockStmt) bool {
	found := false
	ast.Inspect(b, func(n ast.Node) bool {
		if c, ok := n.(*ast.CallExpr); ok {
			if sel, ok := c.Fun.(*ast.SelectorExpr); ok {
				switch sel.Sel.Name {
				case "Fatal", "Fatalf", "Error", "Errorf", "FailNow":
					found = true
				}
			}
		}
		return !found
	})
	return found
}

// wallClockAssertions returns file:function of each wall-clock assertion
// in f (path names the file).
func wallClockAssertions(path string, f *ast.File) []string {
	var out []string
	for _, d := range f.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok || fd.Body == nil {
			continue
		}
		// Variables assigned from a clock read, to a fixpoint.
		tainted := map[string]bool{}
		for changed := true; changed; {
			changed = false
			ast.Inspect(fd.Body, func(n ast.Node) bool {
				as, ok := n.(*ast.AssignStmt)
				if !ok || len(as.Lhs) != len(as.Rhs) {
					return true
				}
				for i, l := range as.Lhs {
					id, ok := l.(*ast.Ident)
					if ok && !tainted[id.Name] && clockRead(as.Rhs[i], tainted) {
						tainted[id.Name] = true
						changed = true
					}
				}
				return true
			})
		}
		// assignedIn lists the tainted variables assigned in a loop.
		assignedIn := func(loop ast.Node) map[string]bool {
			vars := map[string]bool{}
			ast.Inspect(loop, func(n ast.Node) bool {
				if as, ok := n.(*ast.AssignStmt); ok {
					for _, l := range as.Lhs {
						if id, ok := l.(*ast.Ident); ok && tainted[id.Name] {
							vars[id.Name] = true
						}
					}
				}
				return true
			})
			return vars
		}
		// walk visits n; in a loop (loopVars not nil) a direct clock read
		// is the loop's deadline, and only a duration measured in the loop
		// and held in a variable is an assertion.
		var walk func(n ast.Node, loopVars map[string]bool)
		walk = func(n ast.Node, loopVars map[string]bool) {
			ast.Inspect(n, func(m ast.Node) bool {
				switch x := m.(type) {
				case *ast.ForStmt, *ast.RangeStmt:
					if m != n {
						walk(m, assignedIn(m))
						return false
					}
				case *ast.FuncLit:
					if m != n {
						walk(x.Body, nil)
						return false
					}
				case *ast.IfStmt:
					measured := func(e ast.Expr) bool {
						if loopVars == nil {
							return clockRead(e, tainted)
						}
						found := false
						ast.Inspect(e, func(c ast.Node) bool {
							if id, ok := c.(*ast.Ident); ok && loopVars[id.Name] {
								found = true
							}
							return !found
						})
						return found
					}
					compares := false
					ast.Inspect(x.Cond, func(c ast.Node) bool {
						if be, ok := c.(*ast.BinaryExpr); ok {
							switch be.Op {
							case token.LSS, token.GTR, token.LEQ, token.GEQ:
								if measured(be.X) || measured(be.Y) {
									compares = true
								}
							}
						}
						return !compares
					})
					if compares && failsTest(x.Body) {
						out = append(out, path+":"+fd.Name.Name)
					}
				}
				return true
			})
		}
		walk(fd.Body, nil)
	}
	return out
}

// TestNoWallClockAssertions: no test of the module fails on how long
// something took (but for the rates in wallClockAllowed).
// Property: a slow, loaded machine makes a test wait longer, never fail.
func TestNoWallClockAssertions(t *testing.T) {
	dirs := parseModule(t, "../..")
	var bad []string
	seen := map[string]bool{}
	for _, files := range dirs {
		for _, sf := range files {
			if !sf.test {
				continue
			}
			for _, a := range wallClockAssertions(sf.path, sf.f) {
				if _, ok := wallClockAllowed[a]; ok {
					seen[a] = true
					continue
				}
				bad = append(bad, a)
			}
		}
	}
	sort.Strings(bad)
	for _, b := range bad {
		t.Errorf("%s fails the test on a duration read off the clock: assert the condition and let the deadline only bound the wait (testwait.Until), or make the figure a benchmark", b)
	}
	for a := range wallClockAllowed {
		if !seen[a] {
			t.Errorf("wallClockAllowed names %s, which has no such assertion: remove the entry", a)
		}
	}
}

// TestWallClockRuleFlags checks the rule on made-up tests: a timed
// operation compared and failed on is flagged, directly or through a
// variable; a deadline inside a polling loop, a figure only logged and a
// comparison that does not fail the test are not.
func TestWallClockRuleFlags(t *testing.T) {
	src := `package a
import ("testing"; "time")
func TestTook(t *testing.T) {
	start := time.Now()
	work()
	if time.Since(start) > time.Second { t.Fatal("slow") }
}
func TestWorst(t *testing.T) {
	var worst time.Duration
	for i := 0; i < 3; i++ { s := time.Now(); work(); worst = max(worst, time.Since(s)) }
	if worst > 2*time.Second { t.Errorf("worst %v", worst) }
}
func TestSub(t *testing.T) {
	a := time.Now(); work(); d := time.Now().Sub(a)
	if d >= time.Second { t.Fatalf("took %v", d) }
}
func TestPoll(t *testing.T) {
	start := time.Now()
	for !done() {
		if time.Since(start) > time.Minute { t.Fatal("not within a minute") }
	}
}
func TestLogged(t *testing.T) {
	start := time.Now()
	work()
	t.Logf("took %v", time.Since(start))
	if took := time.Since(start); took > time.Second { t.Logf("slow: %v", took) }
}
func TestRounds(t *testing.T) {
	for round := 0; round < 3; round++ {
		started := time.Now()
		work()
		restart := time.Since(started)
		if restart > 20*time.Second { t.Errorf("round %d: restart took %v", round, restart) }
	}
}
func TestCallback(t *testing.T) {
	f := func() { s := time.Now(); work(); if time.Since(s) > time.Second { t.Error("slow") } }
	f()
}
`
	f, err := parser.ParseFile(token.NewFileSet(), "a/a_test.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	got := wallClockAssertions(filepath.ToSlash("a/a_test.go"), f)
	want := []string{"a/a_test.go:TestTook", "a/a_test.go:TestWorst", "a/a_test.go:TestSub", "a/a_test.go:TestRounds", "a/a_test.go:TestCallback"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("flagged %v, want %v", got, want)
	}
}
