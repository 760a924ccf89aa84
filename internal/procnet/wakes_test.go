package procnet

import (
	"os"
	"testing"
	"time"
)

// Property: Wakes counts the context switches of every thread of the
// process, so a thread that sleeps and wakes again raises it; CPU reads
// the same process.
func TestWakesCountsSleeps(t *testing.T) {
	pid := os.Getpid()
	before, err := Wakes(pid)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := CPU(pid); err != nil {
		t.Fatal(err)
	}
	for range 20 {
		time.Sleep(time.Millisecond) // each sleep parks a thread: one voluntary switch at least
	}
	after, err := Wakes(pid)
	if err != nil {
		t.Fatal(err)
	}
	if after-before < 10 {
		t.Fatalf("20 sleeps raised the wake count by %d (from %d)", after-before, before)
	}
	if _, err := Wakes(1 << 30); err == nil {
		t.Fatal("Wakes of a process that does not exist answered no error")
	}
}
