//go:build !linux

package attention_test

import "time"

// procCPU is this process's CPU time (0: unknown on this system).
func procCPU() time.Duration { return 0 }
