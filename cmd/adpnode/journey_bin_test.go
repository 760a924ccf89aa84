//go:build e2e

package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// The adpnode binary for tests that run it as a child process, built once
// per test binary into binDir (removed by TestMain).
var (
	binOnce sync.Once
	binDir  string
	binPath string
	binErr  error
)

func adpnodeBinary(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		if binDir, binErr = os.MkdirTemp("", "adpnode-bin-"); binErr != nil {
			return
		}
		afterTests = append(afterTests, func() { os.RemoveAll(binDir) })
		binPath = filepath.Join(binDir, "adpnode")
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		var out []byte
		if out, binErr = exec.CommandContext(ctx, "go", "build", "-o", binPath, ".").CombinedOutput(); binErr != nil {
			binErr = &buildError{err: binErr, out: string(out)}
		}
	})
	if binErr != nil {
		t.Fatalf("go build: %v", binErr)
	}
	return binPath
}

type buildError struct {
	err error
	out string
}

func (e *buildError) Error() string { return e.err.Error() + "\n" + e.out }
