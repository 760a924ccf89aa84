//go:build !linux

package main

import (
	"errors"
	"time"
)

type cpuSample struct{}

func sampleCPU() cpuSample { return cpuSample{} }

func cpuUse(a, b cpuSample, wall time.Duration, procs int) (self, others, machine float64, ok bool) {
	return 0, 0, 0, false
}

func procCPU(pid int) (time.Duration, error) { return 0, errors.New("no /proc on this platform") }

func threadCPU() (time.Duration, bool) { return 0, false }

func onThread(f func() (int, error)) (time.Duration, bool, error) {
	w0 := time.Now()
	n, err := f()
	if err != nil || n == 0 {
		return 0, false, err
	}
	return time.Since(w0) / time.Duration(n), false, nil
}

func processCPU(a, b cpuSample) (time.Duration, bool) { return 0, false }

func loadAvg() string { return "n/a" }
