package main

import (
	"os"
	"testing"
	"time"
)

// TestMain shortens the host log's checkpoint interval for every node the
// tests start: a stack's Close waits for a checkpoint covering every
// record logged, which at the daemon's 1 s would add about a second per
// node closed.
func TestMain(m *testing.M) {
	hostLogCheckpoint = 100 * time.Millisecond
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}
