package main

import (
	"fmt"
	"log/slog"
	"os"
	"runtime/pprof"
)

// startCPUProfile profiles the whole serve run into file when the
// operator sets ADPNODE_CPUPROFILE (docs/performance.md, Profiling); stop
// writes the profile, which serve calls on SIGTERM/SIGINT after the
// node is closed. An empty file name profiles nothing.
func startCPUProfile(file string, log *slog.Logger) (stop func(), err error) {
	if file == "" {
		return func() {}, nil
	}
	f, err := os.Create(file)
	if err != nil {
		return nil, fmt.Errorf("ADPNODE_CPUPROFILE: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("ADPNODE_CPUPROFILE: %w", err)
	}
	log.Info("cpu profile on", "file", file)
	return func() {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			log.Error("cpu profile", "file", file, "err", err)
		}
	}, nil
}
