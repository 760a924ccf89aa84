package main

import (
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// cpuSample is this process's CPU time and the machine's busy and total
// jiffies, to tell how much of the machine the run had to itself.
type cpuSample struct {
	proc        time.Duration
	busy, total uint64 // machine jiffies from /proc/stat
	others      uint64 // utime+stime+cutime+cstime of every other process, in ticks
	ok          bool
}

// clockTicks is USER_HZ, 100 on every Linux platform Go supports.
const clockTicks = 100

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
	s.others = otherProcs()
	s.ok = true
	return s
}

// otherProcs sums the CPU ticks of every other process, with the reaped
// children of each, so a process that exits within the interval is still
// counted through its parent.
func otherProcs() uint64 {
	self := strconv.Itoa(os.Getpid())
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	var sum uint64
	for _, e := range ents {
		name := e.Name()
		if name == self || name[0] < '0' || name[0] > '9' {
			continue
		}
		b, err := os.ReadFile("/proc/" + name + "/stat")
		if err != nil {
			continue
		}
		// Fields after the parenthesised command: state is field 3;
		// utime, stime, cutime, cstime are fields 14 to 17.
		i := strings.LastIndexByte(string(b), ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(b[i+1:]))
		if len(f) < 15 {
			continue
		}
		for _, v := range f[11:15] {
			n, _ := strconv.ParseInt(v, 10, 64)
			if n > 0 {
				sum += uint64(n)
			}
		}
	}
	return sum
}

// cpuUse returns this process's share, other processes' share and the
// whole machine's busy share of all CPUs between a and b (0..1).
func cpuUse(a, b cpuSample, wall time.Duration, procs int) (self, others, machine float64, ok bool) {
	if !a.ok || !b.ok || b.total <= a.total {
		return 0, 0, 0, false
	}
	avail := wall.Seconds() * float64(procs)
	self = (b.proc - a.proc).Seconds() / avail
	if b.others > a.others {
		others = float64(b.others-a.others) / clockTicks / avail
	}
	machine = float64(b.busy-a.busy) / float64(b.total-a.total)
	return self, others, machine, true
}

// procCPU is the utime+stime of process pid.
func procCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	t, err := parseProcStat(b)
	return ticksToDuration(t), err
}

// threadCPU is the calling thread's user+system CPU time.
func threadCPU() (time.Duration, bool) {
	var ru syscall.Rusage
	if syscall.Getrusage(1 /* RUSAGE_THREAD */, &ru) != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}

// onThread runs f locked to one OS thread and returns the thread CPU time
// per unit of work f reports.
func onThread(f func() (int, error)) (time.Duration, bool, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	t0, ok := threadCPU()
	w0 := time.Now()
	n, err := f()
	t1, _ := threadCPU()
	if err != nil || n == 0 {
		return 0, false, err
	}
	if !ok {
		return time.Since(w0) / time.Duration(n), false, nil
	}
	return (t1 - t0) / time.Duration(n), true, nil
}

// processCPU is this process's CPU time between two samples.
func processCPU(a, b cpuSample) (time.Duration, bool) {
	return b.proc - a.proc, a.ok && b.ok && b.proc > a.proc
}

// loadAvg is the machine's 1, 5 and 15 minute load averages.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "n/a"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "n/a"
	}
	return strings.Join(f[:3], " ")
}
