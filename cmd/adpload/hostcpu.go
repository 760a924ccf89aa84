package main

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/adpnode/adpnode/adp/identity"
)

// parseProcStat reads utime+stime (fields 14 and 15 of proc(5)'s
// /proc/<pid>/stat) in clock ticks. The command name (field 2) is in
// parentheses and may itself hold spaces and parentheses, so fields are
// counted from the last ')'.
func parseProcStat(b []byte) (ticks uint64, err error) {
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || !strings.Contains(s[:i], "(") {
		return 0, errors.New("stat: no (comm) field")
	}
	f := strings.Fields(s[i+1:])
	// f[0] is field 3 (state); utime is field 14, stime field 15.
	if len(f) < 13 {
		return 0, fmt.Errorf("stat: %d fields after comm, want at least 13", len(f))
	}
	for _, v := range f[11:13] {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("stat: utime/stime %q: %w", v, err)
		}
		ticks += n
	}
	return ticks, nil
}

// ticksToDuration converts USER_HZ clock ticks to a duration.
func ticksToDuration(t uint64) time.Duration {
	return time.Duration(t) * (time.Second / clockTicks)
}

// verifyCosts is host CPU per accepted write, in seconds and in units of
// one envelope verification's CPU time on one core.
type verifyCosts struct {
	perWrite time.Duration // host CPU per accepted write
	units    float64       // perWrite / perVerify
}

// hostCostPerWrite divides the host's CPU time over the window by the
// writes it accepted, and by one verification's CPU time.
func hostCostPerWrite(hostCPU time.Duration, writes int64, perVerify time.Duration) (verifyCosts, error) {
	if writes <= 0 {
		return verifyCosts{}, errors.New("no accepted writes")
	}
	if hostCPU <= 0 {
		return verifyCosts{}, errors.New("no host CPU time measured")
	}
	c := verifyCosts{perWrite: hostCPU / time.Duration(writes)}
	if perVerify > 0 {
		c.units = float64(hostCPU) / float64(writes) / float64(perVerify)
	}
	return c, nil
}

// verifyCPU measures the CPU time of one identity.OpenEnvelope on one
// core: a single goroutine locked to its thread verifies envs for about d
// of thread CPU time. Thread CPU time (not wall time) keeps the figure
// meaningful on a loaded machine, where other processes take the core
// away. ok is false where thread CPU time is not available; the figure is
// then wall time per verification.
func verifyCPU(envs [][]byte, d time.Duration) (per time.Duration, ok bool, err error) {
	per, ok, err = onThread(func() (int, error) {
		n := 0
		start := time.Now()
		t0, _ := threadCPU()
		for {
			for range 64 {
				if _, err := identity.OpenEnvelope(envs[n%len(envs)]); err != nil {
					return n, err
				}
				n++
			}
			if t, ok := threadCPU(); ok && t-t0 >= d || time.Since(start) >= 4*d {
				return n, nil
			}
		}
	})
	return per, ok, err
}
