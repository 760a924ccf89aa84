// Command adpidle measures what one idle node costs the machine: its CPU
// (utime + stime from /proc/<pid>/stat) and its wake-ups (context
// switches, voluntary and involuntary, summed over
// /proc/<pid>/task/*/status) per second over a window in which nothing
// happens. Voluntary switches are the figure a loaded machine cannot
// inflate: CPU time per wake grows with the load, and so do involuntary
// switches (preemptions), but the number of times the process's threads
// woke and went back to sleep does not.
//
// It measures, one after the other, each in its own process on a fresh
// temporary data dir:
//
//	badger     a Badger database opened with the node's options
//	           (node.BadgerOptions), left idle: the storage floor
//	nofed      adpnode serve --no-federation
//	federated  adpnode serve with one federated peer (the peer, started
//	           first, is measured too, as "peer")
//
//	go run ./cmd/adpidle -window 60s
//	go run ./cmd/adpidle -window 60s -only badger,federated
//	go run ./cmd/adpidle -only federated -against /tmp/adpnode-old
//
// Linux only (it reads /proc). docs/performance.md has figures.
package main

import (
	"flag"
	"fmt"
	"log"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/adpnode/adpnode/internal/procnet"
	"github.com/adpnode/adpnode/node"
	"github.com/dgraph-io/badger/v4"
)

func main() {
	window := flag.Duration("window", 60*time.Second, "idle window measured")
	settle := flag.Duration("settle", 10*time.Second, "wait after start before the window")
	only := flag.String("only", "badger,nofed,federated", "what to measure, comma-separated")
	bin := flag.String("bin", "", "adpnode binary (default: build one)")
	against := flag.String("against", "", "another adpnode binary: its federated pair runs beside this one's, measured in the same window (an A/B the machine's load cannot tilt)")
	badgerChild := flag.String("badger-child", "", "internal: open a Badger DB in this dir and wait for SIGTERM")
	flag.Parse()
	if *badgerChild != "" {
		holdBadger(*badgerChild)
		return
	}
	root, err := os.MkdirTemp("", "adpidle-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(root)
	want := map[string]bool{}
	for _, w := range strings.Split(*only, ",") {
		want[strings.TrimSpace(w)] = true
	}
	if (want["nofed"] || want["federated"]) && *bin == "" {
		b, err := procnet.Build(root)
		if err != nil {
			log.Fatal(err)
		}
		*bin = b
	}
	fmt.Printf("adpidle: window %v after %v of settling, GOMAXPROCS=2, load average %s\n", *window, *settle, loadavg())
	if want["badger"] {
		if err := measureBadger(root, *window, *settle); err != nil {
			log.Fatal(err)
		}
	}
	if want["nofed"] {
		nd, err := procnet.Start(*bin, root, "nofed", nil, time.Minute, "--no-federation")
		if err != nil {
			log.Fatal(err)
		}
		err = measure(*window, *settle, map[string]int{"nofed": nd.PID()})
		nd.Stop()
		if err != nil {
			log.Fatal(err)
		}
	}
	if want["federated"] {
		pids := map[string]int{}
		var started []*procnet.Node
		pair := func(bin, suffix string) {
			peer, err := procnet.Start(bin, root, "peer"+suffix, nil, time.Minute)
			if err != nil {
				stopAll(started)
				log.Fatal(err)
			}
			started = append(started, peer)
			nd, err := procnet.Start(bin, root, "federated"+suffix, []*procnet.Node{peer}, time.Minute)
			if err != nil {
				stopAll(started)
				log.Fatal(err)
			}
			started = append(started, nd)
			pids["federated"+suffix], pids["peer"+suffix] = nd.PID(), peer.PID()
		}
		pair(*bin, "")
		if *against != "" {
			pair(*against, "-against")
		}
		err := measure(*window, *settle, pids)
		stopAll(started)
		if err != nil {
			log.Fatal(err)
		}
	}
}

func stopAll(ns []*procnet.Node) {
	for _, n := range ns {
		n.Stop()
	}
}

// measureBadger runs this program again as a child that holds a Badger
// database open with the node's options, and measures it.
func measureBadger(root string, window, settle time.Duration) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	cmd := exec.Command(self, "-badger-child", filepath.Join(root, "badger"))
	cmd.Stderr = os.Stderr
	cmd.Env = append(os.Environ(), "GOMAXPROCS=2")
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	defer func() { _ = cmd.Process.Signal(syscall.SIGTERM); _ = cmd.Wait() }()
	var ready [1]byte
	if _, err := out.Read(ready[:]); err != nil { // the child writes one byte once the DB is open
		return fmt.Errorf("badger child: %w", err)
	}
	return measure(window, settle, map[string]int{"badger": cmd.Process.Pid})
}

func holdBadger(dir string) {
	db, err := badger.Open(node.BadgerOptions(dir))
	if err != nil {
		log.Fatal(err)
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, os.Interrupt)
	os.Stdout.Write([]byte{1})
	<-sig
	if err := db.Close(); err != nil {
		log.Fatal(err)
	}
}

// measure samples each named process's CPU time and wake-ups over window
// (after settle) and prints them.
func measure(window, settle time.Duration, pids map[string]int) error {
	time.Sleep(settle)
	type at struct {
		cpu        time.Duration
		vol, invol int64
	}
	read := func(pid int) (at, error) {
		c, err := procnet.CPU(pid)
		if err != nil {
			return at{}, err
		}
		v, inv, err := procnet.Switches(pid)
		return at{c, v, inv}, err
	}
	before := map[string]at{}
	for name, pid := range pids {
		a, err := read(pid)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		before[name] = a
	}
	t0 := time.Now()
	time.Sleep(window)
	el := time.Since(t0).Seconds()
	for _, name := range []string{"badger", "nofed", "federated", "peer", "federated-against", "peer-against"} {
		pid, ok := pids[name]
		if !ok {
			continue
		}
		a, err := read(pid)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		b := before[name]
		fmt.Printf("%-17s CPU %.2f %% of a core, %.1f wake-ups/s (voluntary %.1f + involuntary %.1f), %d threads (load average %s)\n", name,
			100*(a.cpu-b.cpu).Seconds()/el, float64(a.vol+a.invol-b.vol-b.invol)/el, float64(a.vol-b.vol)/el, float64(a.invol-b.invol)/el,
			threads(pid), loadavg())
	}
	return nil
}

func threads(pid int) int {
	ts, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	return len(ts)
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}
