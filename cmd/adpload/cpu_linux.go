package main

import (
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// cpuSample is this process's CPU time and the machine's busy and total
// jiffies, to tell how much of the machine the run had to itself.
type cpuSample struct {
	proc        time.Duration
	busy, total uint64
	ok          bool
}

func sampleCPU() cpuSample {
	var s cpuSample
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		s.proc = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return s
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 8 || f[0] != "cpu" {
		return s
	}
	for i, v := range f[1:] {
		n, _ := strconv.ParseUint(v, 10, 64)
		if i < 8 { // user nice system idle iowait irq softirq steal
			s.total += n
			if i != 3 && i != 4 {
				s.busy += n
			}
		}
	}
	s.ok = true
	return s
}

// cpuUse returns this process's share and the whole machine's busy share of
// all CPUs between a and b (0..1).
func cpuUse(a, b cpuSample, wall time.Duration, procs int) (self, machine float64, ok bool) {
	if !a.ok || !b.ok || b.total <= a.total {
		return 0, 0, false
	}
	self = float64(b.proc-a.proc) / (wall.Seconds() * 1e9 * float64(procs))
	machine = float64(b.busy-a.busy) / float64(b.total-a.total)
	return self, machine, true
}
