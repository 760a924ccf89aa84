package main

import (
	"os"
	"strings"
	"testing"
	"time"
)

func TestParseProcStat(t *testing.T) {
	// A real line's shape, with a command name holding spaces and ')'.
	line := "7366 (adp node) x) S 7300 7366 7300 0 -1 4194560 5000 0 0 0 1234 567 8 9 20 0 12 0 100 2000000000 3000 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n"
	got, err := parseProcStat([]byte(line))
	if err != nil || got != 1234+567 {
		t.Fatalf("parseProcStat = %d, %v; want %d (utime+stime, not cutime/cstime)", got, err, 1234+567)
	}
	if d := ticksToDuration(got); d != 18010*time.Millisecond {
		t.Fatalf("ticks to duration = %s, want 18.01s", d)
	}
	// Hostile or truncated input: a clear error, never a panic or a guess.
	for _, bad := range []string{"", "7366 adpnode S 1 2", "7366 (adpnode) S 1 2 3", "7366 (adpnode) S 1 2 3 4 5 6 7 8 9 10 -5 6 7 8",
		"7366 (adpnode) S 1 2 3 4 5 6 7 8 9 10 12x 6 7 8", ")(" + strings.Repeat(" 1", 20)} {
		if v, err := parseProcStat([]byte(bad)); err == nil {
			t.Errorf("parseProcStat(%q) = %d, want an error", bad, v)
		}
	}
}

func TestProcCPUOfSelf(t *testing.T) {
	d, err := procCPU(os.Getpid())
	if err != nil {
		t.Skipf("no /proc here: %v", err)
	}
	if d < 0 || d > time.Hour {
		t.Fatalf("own CPU time %s is not plausible", d)
	}
}

func TestHostCostPerWrite(t *testing.T) {
	// 2.4 s of host CPU for 20,000 writes = 120 µs each; a verify is 60 µs.
	c, err := hostCostPerWrite(2400*time.Millisecond, 20000, 60*time.Microsecond)
	if err != nil {
		t.Fatal(err)
	}
	if c.perWrite != 120*time.Microsecond || c.units < 1.9999 || c.units > 2.0001 {
		t.Fatalf("got %s per write, %.4f verify-costs; want 120µs and 2", c.perWrite, c.units)
	}
	// No verification measured: per-write time only.
	if c, err := hostCostPerWrite(time.Second, 10, 0); err != nil || c.units != 0 || c.perWrite != 100*time.Millisecond {
		t.Fatalf("without a verify cost: %+v, %v", c, err)
	}
	if _, err := hostCostPerWrite(time.Second, 0, time.Microsecond); err == nil {
		t.Fatal("no writes: want an error, not a division by zero")
	}
	if _, err := hostCostPerWrite(0, 10, time.Microsecond); err == nil {
		t.Fatal("no host CPU: want an error")
	}
}

// The verify cost is CPU time of real verifications on one thread, and the
// measurement stops within its bound.
func TestVerifyCPU(t *testing.T) {
	envs, err := sampleEnvelopes("reaction", 0, 8)
	if err != nil {
		t.Fatal(err)
	}
	per, _, err := verifyCPU(envs, 20*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if per < time.Microsecond || per > 100*time.Millisecond {
		t.Fatalf("one verification: %s, not plausible", per)
	}
	bad := [][]byte{[]byte(`{"not":"an envelope"}`)}
	if _, _, err := verifyCPU(bad, time.Millisecond); err == nil {
		t.Fatal("a bad envelope must fail the measurement, not be timed")
	}
}
