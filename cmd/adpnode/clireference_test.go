package main

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

const cliReferenceIntro = `# Command-line reference

Generated from the commands themselves
(` + "`go test ./cmd/adpnode -run TestCLIReference -update`" + `); a test fails when this
file differs from what the commands say. ` + "`adpnode <command> --help`" + ` prints the
same text. Exit codes: [errors.md](errors.md#exit-codes). The settings of
` + "`adpnode serve`" + ` with their YAML keys and environment variables:
[settings.md](settings.md).
`

// renderCLIReference renders every visible command under root, depth
// first in the order the commands are registered: its synopsis, long
// description, examples and flags (its own, then those it inherits).
func renderCLIReference(root *cobra.Command) []byte {
	var b bytes.Buffer
	b.WriteString(cliReferenceIntro)
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Hidden || c.Name() == "help" || c.Name() == "completion" {
			return
		}
		if c != root {
			fmt.Fprintf(&b, "\n## %s\n\n", c.CommandPath())
			if c.Short != "" {
				fmt.Fprintf(&b, "%s.\n\n", strings.TrimSuffix(strings.TrimSpace(c.Short), "."))
			}
			var parts []string
			if c.Runnable() {
				parts = append(parts, "Usage:\n  "+c.UseLine()+"\n")
			}
			if c.HasAvailableSubCommands() {
				s := "Commands:\n"
				for _, sub := range c.Commands() {
					if sub.IsAvailableCommand() {
						s += fmt.Sprintf("  %-10s %s\n", sub.Name(), sub.Short)
					}
				}
				parts = append(parts, s)
			}
			if long := strings.TrimSpace(c.Long); long != "" && long != strings.TrimSpace(c.Short) {
				parts = append(parts, long+"\n")
			}
			if ex := strings.TrimRight(c.Example, "\n "); ex != "" {
				parts = append(parts, "Examples:\n"+ex+"\n")
			}
			for _, f := range []struct {
				title string
				set   *pflag.FlagSet
			}{
				{"Flags", c.LocalNonPersistentFlags()},
				{"Flags for every subcommand", c.PersistentFlags()},
				{"Inherited flags", c.InheritedFlags()},
			} {
				if f.set.HasAvailableFlags() {
					parts = append(parts, f.title+":\n"+f.set.FlagUsagesWrapped(0))
				}
			}
			b.WriteString("```text\n" + strings.Join(parts, "\n"))
			b.WriteString("```\n")
		}
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	walk(root)
	return b.Bytes()
}

// Property: docs/cli.md is what the commands themselves say, every
// visible command and flag included.
func TestCLIReference(t *testing.T) {
	root := rootCmd()
	want := renderCLIReference(root)
	const path = "../../docs/cli.md"
	if *updateGolden {
		if err := os.WriteFile(path, want, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("docs/cli.md is not what the commands generate; run go test ./cmd/adpnode -run TestCLIReference -update")
	}
	// Every command reachable from the root has its section.
	var check func(c *cobra.Command)
	check = func(c *cobra.Command) {
		for _, s := range c.Commands() {
			if !s.IsAvailableCommand() || s.Name() == "help" {
				continue
			}
			if !bytes.Contains(got, []byte("\n## "+s.CommandPath()+"\n")) {
				t.Errorf("docs/cli.md has no section for %s", s.CommandPath())
			}
			check(s)
		}
	}
	check(root)
}
