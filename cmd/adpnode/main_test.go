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
// afterTests runs once every test has: the cleanups of what tests share
// (the adpnode binary built for child processes).
var afterTests []func()

func TestMain(m *testing.M) {
	hostLogCheckpoint = 100 * time.Millisecond
	code := m.Run()
	for _, f := range afterTests {
		f()
	}
	os.Exit(code)
}
