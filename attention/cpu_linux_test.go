//go:build linux

package attention_test

import (
	"syscall"
	"time"
)

// procCPU is this process's CPU time, user and system (0: unknown).
func procCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
