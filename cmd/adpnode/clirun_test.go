package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// cli runs one adpnode command line in-process and returns its exit code,
// stdout and stderr.
func cli(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	dir := t.TempDir()
	outF, _ := os.Create(filepath.Join(dir, "out"))
	errF, _ := os.Create(filepath.Join(dir, "err"))
	oldOut, oldErr := os.Stdout, os.Stderr
	os.Stdout, os.Stderr = outF, errF
	code := run(args, outF, errF)
	os.Stdout, os.Stderr = oldOut, oldErr
	outF.Close()
	errF.Close()
	o, _ := os.ReadFile(outF.Name())
	e, _ := os.ReadFile(errF.Name())
	return code, string(o), string(e)
}

// mustCLI runs a command that must succeed.
func mustCLI(t *testing.T, args ...string) string {
	t.Helper()
	code, out, errOut := cli(t, args...)
	if code != 0 {
		t.Fatalf("adpnode %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, out, errOut)
	}
	return out
}

func wantExit(t *testing.T, want int, wantErr string, args ...string) string {
	t.Helper()
	code, out, errOut := cli(t, args...)
	if code != want || !strings.Contains(errOut+out, wantErr) {
		t.Fatalf("adpnode %s: exit %d (want %d)\nstdout: %s\nstderr: %s (want %q)", strings.Join(args, " "), code, want, out, errOut, wantErr)
	}
	return errOut
}

// writeFile writes body to a new file name in a temporary directory.
func writeFile(t *testing.T, name, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}
