package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// spawnedHost is `adpnode serve` run as a child process on a temporary
// data dir, 127.0.0.1, federation off, rates off: its own CPU time can
// then be read from /proc/<pid>/stat, apart from the generator's.
type spawnedHost struct {
	url   string
	cmd   *exec.Cmd
	dir   string
	owned bool
	done  chan error
}

// spawnConfig is the child's config file: every write quota off.
const spawnConfig = "rates: {message: 0, signal: 0, control: 0, message_ceiling: 0, signal_ceiling: 0}\nlog_level: warn\n"

func startSpawn(o options) (*spawnedHost, error) {
	dir, owned := o.dataDir, false
	if dir == "" {
		d, err := os.MkdirTemp("", "adpload-spawn-*")
		if err != nil {
			return nil, err
		}
		dir, owned = d, !o.keep
	}
	cfg := filepath.Join(dir, "adpload.yaml")
	conf := spawnConfig
	if o.rates == "default" {
		conf = "log_level: warn\n"
	}
	if err := os.WriteFile(cfg, []byte(conf), 0o600); err != nil {
		return nil, err
	}
	// A free port: listen, note it, close. The child binds it a moment later.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := ln.Addr().String()
	ln.Close()
	cmd := exec.Command(o.spawn, "serve", "--config", cfg, "--listen", addr,
		"--data", filepath.Join(dir, "data"), "--no-federation", "--disk-reserve", "0",
		// Every agent of the load comes from one address: only the total cap.
		"--max-connections-per-address", "4096")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	cmd.Env = os.Environ()
	if o.hostProfile != "" {
		p, err := filepath.Abs(o.hostProfile)
		if err != nil {
			return nil, err
		}
		cmd.Env = append(cmd.Env, "ADPNODE_CPUPROFILE="+p)
	}
	if err := cmd.Start(); err != nil {
		if owned {
			os.RemoveAll(dir)
		}
		return nil, fmt.Errorf("-spawn %s: %w", o.spawn, err)
	}
	h := &spawnedHost{url: "http://" + addr, cmd: cmd, dir: dir, owned: owned, done: make(chan error, 1)}
	go func() { h.done <- cmd.Wait() }()
	if err := h.waitReady(20 * time.Second); err != nil {
		h.close()
		return nil, err
	}
	fmt.Printf("spawned node:    %s serve, pid %d, %s, durable Badger in %s, rates %s\n", o.spawn, cmd.Process.Pid, h.url, dir, o.rates)
	return h, nil
}

// waitReady polls /healthz until the child answers or exits.
func (h *spawnedHost) waitReady(limit time.Duration) error {
	hc := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		select {
		case err := <-h.done:
			h.done <- err
			return fmt.Errorf("spawned node exited before it answered: %v", err)
		default:
		}
		if resp, err := hc.Get(h.url + "/healthz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return errors.New("spawned node did not answer /healthz within " + limit.String())
}

func (h *spawnedHost) pid() int { return h.cmd.Process.Pid }

// close stops the child with SIGTERM (it writes its CPU profile then),
// waits for it, and removes the data dir it owns.
func (h *spawnedHost) close() {
	_ = h.cmd.Process.Signal(syscall.SIGTERM)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	select {
	case <-h.done:
	case <-ctx.Done():
		_ = h.cmd.Process.Kill()
		<-h.done
	}
	if h.owned {
		os.RemoveAll(h.dir)
	}
}
