// Command adpload measures how many writes per second an ADP host accepts
// over HTTP, next to the bare envelope verification rate of this machine.
//
// It first measures the verification ceiling (identity.OpenEnvelope on
// pre-made envelopes in GOMAXPROCS goroutines) and the client's signing cost,
// then drives N agents in M rooms against a host for a fixed duration and
// reports accepted writes/s, latency percentiles and writes/ceiling.
//
//	adpload -inproc -mode message            # in-process node, durable Badger in a temp dir
//	adpload -inproc -mode reaction           # pre-signed signals: no signing during the run
//	adpload -url http://127.0.0.1:8080       # an existing node (disable its rates in its config)
//	adpload -spawn ./adpnode -mode message   # `adpnode serve` as a child: its own CPU per write
//
// With -spawn the node is a child process, so its CPU time (utime+stime
// from /proc/<pid>/stat over the measured window) is the host's alone; it
// is reported per accepted write and in verify-cost units: that time
// divided by the thread CPU time of one identity.OpenEnvelope on one core,
// measured in the same run just before. -hostprofile asks the child for a
// CPU profile of its whole life (ADPNODE_CPUPROFILE, written on SIGTERM).
//
// Modes. message: every agent posts message.create, which must name the
// current room head (base_seq/base_hash), so each envelope is signed right
// after the previous answer; the signing time is measured and reported
// separately from the HTTP latency. reaction: reaction.create from the
// registered adp:reactions/1.0 pack is a signal, which only needs an anchor
// (base_seq 1 and the room.create record hash), so every envelope is signed
// before the run starts.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"runtime"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/adpnode/adpnode/hostapi"
	"github.com/adpnode/adpnode/stack"
)

type options struct {
	url          string
	inproc       bool
	spawn        string
	hostProfile  string
	agents       int
	rooms        int
	duration     time.Duration
	warmup       time.Duration
	verifyFor    time.Duration
	mode         string
	rates        string
	dataDir      string
	keep         bool
	presign      int
	contentBytes int
	cpuprofile   string
	mutexprofile string
	blockprofile string
	timeout      time.Duration
	hostLog      bool
	noFeed       bool
	logBatchAge  time.Duration
	logCpEvery   time.Duration
	logRound     time.Duration
	floor        bool
	floorServe   string
	floorListen  string
}

func main() {
	var o options
	flag.StringVar(&o.url, "url", "", "base URL of an existing node (its rate limits must be off: rates: {message: 0, signal: 0, control: 0} in its config file)")
	flag.BoolVar(&o.inproc, "inproc", false, "start a node in-process on a temporary data dir with durable (synced) Badger")
	flag.StringVar(&o.spawn, "spawn", "", "run this adpnode binary as a child (`serve`, temporary data dir, 127.0.0.1, rates off, no federation) and measure its own CPU per write")
	flag.StringVar(&o.hostProfile, "hostprofile", "", "with -spawn: the child writes a CPU profile to this file when it stops")
	flag.IntVar(&o.agents, "agents", 64, "concurrent agents (one HTTP request in flight each)")
	flag.IntVar(&o.rooms, "rooms", 64, "rooms; agent i writes to room i mod rooms")
	flag.DurationVar(&o.duration, "duration", 10*time.Second, "measured run time")
	flag.DurationVar(&o.warmup, "warmup", time.Second, "load before the measured window (not counted)")
	flag.DurationVar(&o.verifyFor, "verify", 2*time.Second, "how long to measure the verification ceiling (0 skips it)")
	flag.StringVar(&o.mode, "mode", "message", "message (message.create on the head, signed live) or reaction (pre-signed reaction.create signals)")
	flag.StringVar(&o.rates, "rates", "off", "in-process node rate limits: off or default")
	flag.StringVar(&o.dataDir, "data", "", "in-process data dir (default: a new temporary dir, removed afterwards)")
	flag.BoolVar(&o.keep, "keep", false, "keep the temporary data dir")
	flag.IntVar(&o.presign, "presign", 0, "reaction mode: envelopes pre-signed per agent (0: enough for max(45% of the verification ceiling, 12000/s))")
	flag.IntVar(&o.contentBytes, "content", 200, "message mode: bytes of message content")
	flag.StringVar(&o.cpuprofile, "cpuprofile", "", "write a CPU profile of the load phase to this file")
	flag.StringVar(&o.mutexprofile, "mutexprofile", "", "write a mutex contention profile of the load phase to this file")
	flag.StringVar(&o.blockprofile, "blockprofile", "", "write a blocking profile (waits of 100 µs or more) of the load phase to this file")
	flag.DurationVar(&o.timeout, "timeout", 30*time.Second, "per-request HTTP timeout")
	flag.BoolVar(&o.hostLog, "hostlog", false, "in-process node: attach the host log (tessera POSIX in the data dir), as serve does")
	flag.BoolVar(&o.noFeed, "nofeed", false, "in-process node: store records without change-feed entries, the baseline of the feed's cost (no host log; never how a node serves)")
	flag.DurationVar(&o.logBatchAge, "log-batch-age", 0, "with -hostlog: tessera batch max age (0: the daemon's default)")
	flag.DurationVar(&o.logCpEvery, "log-checkpoint-interval", 0, "with -hostlog: checkpoint interval (0: the daemon's default)")
	flag.DurationVar(&o.logRound, "log-round", 0, "with -hostlog: least time between two host-log rounds (0: the daemon's default, the checkpoint interval)")
	flag.BoolVar(&o.floor, "floor", false, "instead of a node, measure the CPU floor of the node's stack: its HTTP edge, then with the durable write of a record, then with envelope verification, each served by a child process (see floor.go)")
	flag.StringVar(&o.floorServe, "floor-serve", "", "internal: serve one -floor stage (edge, store, verify or verify-unsynced)")
	flag.StringVar(&o.floorListen, "floor-listen", "", "internal: the -floor-serve address")
	flag.Parse()
	if o.floorServe != "" {
		if err := floorServe(o.floorServe, o.floorListen, o.dataDir); err != nil {
			fmt.Fprintln(os.Stderr, "adpload -floor-serve:", err)
			os.Exit(1)
		}
		return
	}
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "adpload:", err)
		os.Exit(1)
	}
}

func run(o options) error {
	hosts := 0
	for _, set := range []bool{o.url != "", o.inproc, o.spawn != "", o.floor} {
		if set {
			hosts++
		}
	}
	if hosts != 1 {
		return errors.New("give exactly one of -url, -inproc, -spawn or -floor")
	}
	if o.hostLog && !o.inproc {
		return errors.New("-hostlog needs -inproc")
	}
	if o.noFeed && (!o.inproc || o.hostLog) {
		return errors.New("-nofeed needs -inproc and no -hostlog (the host log follows the feed)")
	}
	if o.logRound < 0 || o.logCpEvery < 0 || o.logBatchAge < 0 {
		return errors.New("-log-round, -log-checkpoint-interval and -log-batch-age must not be negative")
	}
	if o.hostProfile != "" && o.spawn == "" {
		return errors.New("-hostprofile needs -spawn")
	}
	if o.mode != "message" && o.mode != "reaction" {
		return fmt.Errorf("-mode must be message or reaction, not %q", o.mode)
	}
	if o.rates != "off" && o.rates != "default" {
		return fmt.Errorf("-rates must be off or default, not %q", o.rates)
	}
	if o.agents < 1 || o.rooms < 1 || o.rooms > o.agents {
		return errors.New("need 1 <= rooms <= agents")
	}
	if o.duration <= 0 {
		return errors.New("-duration must be positive")
	}
	procs := runtime.GOMAXPROCS(0)
	fmt.Printf("adpload: mode=%s agents=%d rooms=%d duration=%s warmup=%s GOMAXPROCS=%d NumCPU=%d %s\n",
		o.mode, o.agents, o.rooms, o.duration, o.warmup, procs, runtime.NumCPU(), runtime.Version())

	// 1. The verification ceiling and the signing cost, before any node runs.
	var ceiling float64
	var perVerify time.Duration
	if o.verifyFor > 0 {
		envs, err := sampleEnvelopes(o.mode, o.contentBytes, 256)
		if err != nil {
			return err
		}
		var threadOK bool
		if perVerify, threadOK, err = verifyCPU(envs, o.verifyFor/2); err != nil {
			return err
		}
		kind := "thread CPU time"
		if !threadOK {
			kind = "wall time (no thread CPU clock here)"
		}
		fmt.Printf("verify cost:     %.1f µs/envelope of %s on one core (identity.OpenEnvelope: strict parse, JCS, SHA3, Ed25519) = 1 verify-cost\n",
			float64(perVerify)/1e3, kind)
		var note string
		ceiling, note = verifyCeiling(envs, o.verifyFor)
		fmt.Printf("verify ceiling:  %.0f envelopes/s  (identity.OpenEnvelope, %d goroutines, %s; %.1f µs/envelope per core, %d-byte envelopes)\n",
			ceiling, procs, o.verifyFor, float64(procs)*1e6/ceiling, len(envs[0]))
		fmt.Printf("                 cpu: %s\n", note)
	}
	if o.floor {
		return runFloor(o, perVerify)
	}
	sc, err := measureSigning(o.mode, o.contentBytes, 500*time.Millisecond)
	if err != nil {
		return err
	}
	fmt.Printf("sign cost:       %.1f µs/envelope on one core (identity.Sign: JCS + SHA3 + Ed25519 + re-parse); %.0f envelopes/s on %d cores\n",
		sc.perEnvelopeUs, sc.allCoresPerSec, procs)

	// 2. The host.
	base := strings.TrimRight(o.url, "/")
	if o.inproc {
		h, err := startInproc(o)
		if err != nil {
			return err
		}
		defer h.close()
		base = h.url
	}
	childPid := 0
	if o.spawn != "" {
		h, err := startSpawn(o)
		if err != nil {
			return err
		}
		defer h.close()
		base, childPid = h.url, h.pid()
	}
	cl := newClient(base, o.agents, o.timeout)
	if err := cl.checkHost(o); err != nil {
		return err
	}

	// 3. Rooms, agents and (reaction mode) the pre-signed envelopes.
	agents, err := setup(cl, o)
	if err != nil {
		return err
	}
	if o.mode == "reaction" {
		per := o.presign
		if per <= 0 {
			// The host cannot accept more than it can verify; 45% of the
			// ceiling (at least 12000/s) leaves a margin without signing
			// far more than the run uses.
			per = int(max(0.45*ceiling, 12000)*(o.warmup+o.duration).Seconds())/o.agents + 64
		}
		took, err := presign(agents, per)
		if err != nil {
			return err
		}
		fmt.Printf("pre-signed:      %d reaction.create envelopes (%d per agent) in %s = %.1f µs/envelope wall on %d cores\n",
			per*len(agents), per, took.Round(time.Millisecond), float64(took.Microseconds())/float64(per*len(agents)), procs)
	}

	// 4. The run.
	stopProf, err := startProfiles(o)
	if err != nil {
		return err
	}
	res := drive(cl, agents, o, childPid)
	if err := stopProf(); err != nil {
		return err
	}
	report(o, res, ceiling, sc, perVerify)
	return nil
}

// inprocHost is a node served over HTTP on 127.0.0.1 in this process,
// built by the composition root serve runs (stack: attention,
// metrics, the HTTP edge, and with -hostlog the host log and its witness
// submitter), without federation.
type inprocHost struct {
	url      string
	st       *stack.Stack
	dir      string
	owned    bool
	feedBase uint64 // the node's feed head when the load began
}

func startInproc(o options) (*inprocHost, error) {
	dir, owned := o.dataDir, false
	if dir == "" {
		d, err := os.MkdirTemp("", "adpload-*")
		if err != nil {
			return nil, err
		}
		dir, owned = d, !o.keep
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	url := "http://" + ln.Addr().String()
	cfg := stack.NodeConfig{
		PublicURL: url,
		DataDir:   dir, // real files; the node always syncs its writes
		Log:       slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	}
	if o.rates == "off" {
		cfg.Rates = ratesOff()
	}
	cfg.WithoutFeed = o.noFeed
	// Every agent of the load comes from one address: only the total cap.
	sc := stack.Config{Node: cfg, Log: cfg.Log, HTTP: hostapi.HTTPOptions{MaxConnectionsPerAddress: hostapi.DefaultMaxConnections}}
	if o.hostLog {
		sc.HostLog = &stack.HostLogConfig{CheckpointInterval: o.logCpEvery, RoundInterval: o.logRound, BatchMaxAge: o.logBatchAge}
	}
	st, err := stack.Open(sc)
	if err != nil {
		ln.Close()
		return nil, err
	}
	h := &inprocHost{url: url, st: st, dir: dir, owned: owned, feedBase: st.Node.FeedHead()}
	st.Serve(ln)
	fmt.Printf("in-process node: %s, durable Badger (SyncWrites) in %s, rates %s, host log %v, change feed %v\n", url, dir, o.rates, o.hostLog, !o.noFeed)
	return h, nil
}

// ratesOff disables every write quota. The node replaces an all-zero
// Rates with the §21 defaults, and in a non-zero Rates a zero limit
// disables that kind. Large limits would not do: a type's rate_hint
// (30/min for reaction.create) replaces the kind limit whenever that limit
// is non-zero, so only a zero kind limit turns the quota off.
func ratesOff() stack.Rates {
	return stack.Rates{AgentStatus: stack.DefaultRates().AgentStatus}
}

// logReport prints how far the host log lags the accepted records when
// the load stops, and how long it then takes to cover them all.
func (h *inprocHost) logReport() {
	l := h.st.HostLog
	if l == nil {
		return
	}
	// Feed seqs number every record the node stored, as the log's leaves
	// do: the log covers the load once its size reaches the feed's head.
	want := h.st.Node.FeedHead()
	_, cp, _ := l.Checkpoint(context.Background())
	start := time.Now()
	at := cp.Size
	for cp.Size < want && time.Since(start) < 5*time.Minute {
		time.Sleep(10 * time.Millisecond)
		_, cp, _ = l.Checkpoint(context.Background())
	}
	fmt.Printf("host log:        %d records appended in %d rounds; the checkpoint covered %d when the load stopped, all %d after %s more\n",
		want-h.feedBase, l.Rounds(), at, cp.Size, time.Since(start).Round(time.Millisecond))
}

func (h *inprocHost) close() {
	h.logReport()
	h.st.Close()
	if h.owned {
		os.RemoveAll(h.dir)
	}
}

func startProfiles(o options) (stop func() error, err error) {
	var cpu *os.File
	if o.cpuprofile != "" {
		if cpu, err = os.Create(o.cpuprofile); err != nil {
			return nil, err
		}
		if err := pprof.StartCPUProfile(cpu); err != nil {
			cpu.Close()
			return nil, err
		}
	}
	if o.mutexprofile != "" {
		runtime.SetMutexProfileFraction(5)
	}
	if o.blockprofile != "" {
		runtime.SetBlockProfileRate(int(100 * time.Microsecond))
	}
	return func() error {
		if cpu != nil {
			pprof.StopCPUProfile()
			if err := cpu.Close(); err != nil {
				return err
			}
		}
		for _, p := range []struct{ file, name string }{{o.mutexprofile, "mutex"}, {o.blockprofile, "block"}} {
			if p.file == "" {
				continue
			}
			f, err := os.Create(p.file)
			if err != nil {
				return err
			}
			err = pprof.Lookup(p.name).WriteTo(f, 0)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
		}
		return nil
	}, nil
}
