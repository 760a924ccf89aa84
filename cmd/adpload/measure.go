package main

import (
	"fmt"
	"net/http"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/adpnode/adpnode/adp/identity"
	"github.com/adpnode/adpnode/internal/adptest"
)

func numProcs() int { return runtime.GOMAXPROCS(0) }

// sampleEnvelopes signs n envelopes shaped like the run's writes, from 64
// different keys, for the verification ceiling.
func sampleEnvelopes(mode string, contentBytes, n int) ([][]byte, error) {
	agents := make([]*agent, 64)
	for i := range agents {
		a, err := newAgent(i)
		if err != nil {
			return nil, err
		}
		// A well-formed room and anchor: verification does not look them up.
		a.room = &room{id: "cv0adpload0000000000", createHash: identity.EncodeB64(make([]byte, 32)), createEnv: identity.EncodeB64(make([]byte, 32))}
		a.head = head{1, a.room.createHash}
		agents[i] = a
	}
	out := make([][]byte, n)
	for i := range out {
		a := agents[i%len(agents)]
		var err error
		if mode == "reaction" {
			out[i], err = a.signReaction()
		} else {
			out[i], err = a.signMessage(contentBytes)
		}
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// verifyCeiling runs identity.OpenEnvelope (strict parse, JCS, SHA3, strict
// Ed25519) on envs in GOMAXPROCS goroutines for d and returns envelopes/s.
func verifyCeiling(envs [][]byte, d time.Duration) (float64, string) {
	procs := numProcs()
	c0 := sampleCPU()
	start := time.Now()
	rate := adptest.VerifyRate(envs, procs, d)
	return rate, cpuNote(c0, sampleCPU(), time.Since(start), procs, false)
}

type signCost struct {
	perEnvelopeUs  float64 // one goroutine
	allCoresPerSec float64 // GOMAXPROCS goroutines
}

// measureSigning times identity.Sign for the run's write type.
func measureSigning(mode string, contentBytes int, d time.Duration) (signCost, error) {
	one := func(a *agent) ([]byte, error) {
		if mode == "reaction" {
			return a.signReaction()
		}
		return a.signMessage(contentBytes)
	}
	mk := func() (*agent, error) {
		a, err := newAgent(0)
		if err != nil {
			return nil, err
		}
		a.room = &room{id: "cv0adpload0000000000", createHash: identity.EncodeB64(make([]byte, 32)), createEnv: identity.EncodeB64(make([]byte, 32))}
		a.head = head{1, a.room.createHash}
		return a, nil
	}
	var sc signCost
	a, err := mk()
	if err != nil {
		return sc, err
	}
	n, start := 0, time.Now()
	for time.Since(start) < d {
		if _, err := one(a); err != nil {
			return sc, err
		}
		n++
	}
	sc.perEnvelopeUs = float64(time.Since(start).Microseconds()) / float64(n)

	procs := numProcs()
	var total atomic.Int64
	var wg sync.WaitGroup
	start = time.Now()
	for range procs {
		a, err := mk()
		if err != nil {
			return sc, err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			n := int64(0)
			for time.Since(start) < d {
				one(a)
				n++
			}
			total.Add(n)
		}()
	}
	wg.Wait()
	sc.allCoresPerSec = float64(total.Load()) / time.Since(start).Seconds()
	return sc, nil
}

// agentStats is what one agent saw in the measured window.
type agentStats struct {
	ok        int64
	lat       []int64 // ns, HTTP round trip of accepted writes
	signNs    int64   // time spent signing for requests finished in the window
	signs     int64
	conflicts int64 // room_head_mismatch answers (message mode, shared rooms)
	live      int64 // reaction mode: envelopes signed during the run (pre-signed ran out)
	errs      map[string]int64
	sample    string
	gaveUp    bool
}

type result struct {
	window   time.Duration
	ok       int64
	lat      []int64
	signNs   int64
	signs    int64
	conf     int64
	live     int64
	errs     map[string]int64
	samples  []string
	gaveUp   int
	perAgent []int64
	cpuFrom  cpuSample
	cpuTo    cpuSample
	// The spawned host's CPU time over the window (-spawn).
	hostCPU   time.Duration
	hostCPUOK bool
	hostErr   error
}

// drive runs every agent until warmup+duration and collects the writes
// accepted in the measured window [warmup, warmup+duration).
func drive(cl *client, agents []*agent, o options, hostPid int) *result {
	start := time.Now()
	from, to := start.Add(o.warmup), start.Add(o.warmup+o.duration)
	stats := make([]*agentStats, len(agents))
	res := &result{window: o.duration, errs: map[string]int64{}}
	cpuDone := make(chan struct{})
	go func() {
		defer close(cpuDone)
		time.Sleep(time.Until(from))
		res.cpuFrom = sampleCPU()
		var h0 time.Duration
		if hostPid > 0 {
			h0, res.hostErr = procCPU(hostPid)
		}
		time.Sleep(time.Until(to))
		res.cpuTo = sampleCPU()
		if hostPid > 0 && res.hostErr == nil {
			var h1 time.Duration
			if h1, res.hostErr = procCPU(hostPid); res.hostErr == nil {
				res.hostCPU, res.hostCPUOK = h1-h0, true
			}
		}
	}()
	var wg sync.WaitGroup
	for i, a := range agents {
		st := &agentStats{errs: map[string]int64{}, lat: make([]int64, 0, 4096)}
		stats[i] = st
		wg.Add(1)
		go func() {
			defer wg.Done()
			a.run(cl, o, from, to, st)
		}()
	}
	wg.Wait()
	<-cpuDone
	for _, st := range stats {
		res.ok += st.ok
		res.lat = append(res.lat, st.lat...)
		res.signNs += st.signNs
		res.signs += st.signs
		res.conf += st.conflicts
		res.live += st.live
		res.perAgent = append(res.perAgent, st.ok)
		for k, v := range st.errs {
			res.errs[k] += v
		}
		if st.sample != "" && len(res.samples) < 5 {
			res.samples = append(res.samples, st.sample)
		}
		if st.gaveUp {
			res.gaveUp++
		}
	}
	slices.Sort(res.lat)
	return res
}

// run is one agent's closed loop: one request in flight, the next envelope
// signed (message mode) or taken from the pre-signed list (reaction mode)
// as soon as the previous answer arrives.
func (a *agent) run(cl *client, o options, from, to time.Time, st *agentStats) {
	path := "/v1/rooms/" + a.room.id
	next := 0
	failures := 0
	for {
		ts := time.Now()
		if !ts.Before(to) {
			return
		}
		var body []byte
		var err error
		signed := false
		if o.mode == "message" {
			body, err = a.signMessage(o.contentBytes)
			signed = true
		} else if next < len(a.pre) {
			body = a.pre[next]
			next++
		} else {
			body, err = a.signReaction()
			signed = true
			st.live++
		}
		if err != nil {
			st.errs["sign: "+err.Error()]++
			st.gaveUp = true
			return
		}
		t0 := time.Now()
		status, hdr, err := cl.post(path, body, &a.buf)
		t1 := time.Now()
		inWindow := !t1.Before(from) && t1.Before(to)
		if inWindow && signed {
			st.signNs += int64(t0.Sub(ts))
			st.signs++
		}
		if err != nil {
			if inWindow {
				st.errs["transport"]++
				if st.sample == "" {
					st.sample = err.Error()
				}
			}
			if failures++; failures > 100 {
				st.gaveUp = true
				return
			}
			time.Sleep(10 * time.Millisecond)
			continue
		}
		if status == http.StatusCreated {
			failures = 0
			if o.mode == "message" {
				if h, ok := recordHead(a.buf.Bytes()); ok {
					a.head = h
				}
			}
			if inWindow {
				st.ok++
				st.lat = append(st.lat, int64(t1.Sub(t0)))
			}
			continue
		}
		e := parseError(a.buf.Bytes())
		code := e.Error.Code
		if code == "" {
			code = "HTTP " + strconv.Itoa(status)
		}
		switch code {
		case "room_head_mismatch":
			// Another agent of this room moved the head: re-sign on it.
			if inWindow {
				st.conflicts++
			}
			seq, _ := e.Error.Data["current_seq"].(float64)
			hash, _ := e.Error.Data["current_hash"].(string)
			if seq > 0 && hash != "" {
				a.head = head{int64(seq), hash}
				continue
			}
		case "nonce_not_greater":
			if v, err := identity.ApplyMaxSeenNonce(a.nonce+1, time.Now().UnixMilli(), hdr.Get("Max-Seen-Nonce")); err == nil {
				a.nonce = v - 1
			}
		case "rate_limited":
			time.Sleep(100 * time.Millisecond)
		}
		if inWindow {
			st.errs[code]++
			if st.sample == "" {
				st.sample = strings.TrimSpace(a.buf.String())
			}
		}
		if failures++; failures > 1000 {
			st.gaveUp = true
			return
		}
	}
}

func pct(sorted []int64, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(p/100*float64(len(sorted))+0.5) - 1
	return time.Duration(sorted[min(max(i, 0), len(sorted)-1)])
}

func ms(d time.Duration) string { return strconv.FormatFloat(float64(d)/1e6, 'f', 2, 64) + " ms" }

func report(o options, r *result, ceiling float64, sc signCost, perVerify time.Duration) {
	typ := "message.create"
	if o.mode == "reaction" {
		typ = "reaction.create"
	}
	wps := float64(r.ok) / r.window.Seconds()
	fmt.Println()
	fmt.Printf("writes:          %d %s accepted in %s = %.0f writes/s (durable, over HTTP, %d agents / %d rooms)\n",
		r.ok, typ, r.window, wps, o.agents, o.rooms)
	var mean time.Duration
	if len(r.lat) > 0 {
		var sum int64
		for _, v := range r.lat {
			sum += v
		}
		mean = time.Duration(sum / int64(len(r.lat)))
	}
	fmt.Printf("latency:         p50 %s  p90 %s  p99 %s  p99.9 %s  max %s  mean %s  (HTTP round trip of accepted writes)\n",
		ms(pct(r.lat, 50)), ms(pct(r.lat, 90)), ms(pct(r.lat, 99)), ms(pct(r.lat, 99.9)), ms(pct(r.lat, 100)), ms(mean))
	if len(r.perAgent) > 0 {
		pa := slices.Clone(r.perAgent)
		sort.Slice(pa, func(i, j int) bool { return pa[i] < pa[j] })
		fmt.Printf("cpu in window:   %s\n", cpuNote(r.cpuFrom, r.cpuTo, r.window, numProcs(), o.url != "" || o.spawn != ""))
		fmt.Printf("per agent:       min %d  median %d  max %d accepted writes\n", pa[0], pa[len(pa)/2], pa[len(pa)-1])
	}
	if o.inproc {
		// Node and load generator share the process: the figure compares
		// runs that differ in the node alone (-nofeed), not hosts.
		cpuPer := "n/a"
		if cpu, ok := processCPU(r.cpuFrom, r.cpuTo); ok && r.ok > 0 {
			cpuPer = fmt.Sprintf("%.1f µs", float64(cpu.Nanoseconds())/float64(r.ok)/1e3)
		}
		fmt.Printf("process cpu:     %s per accepted write (node and load generator in this process)\n", cpuPer)
		fmt.Printf("compare:         mode=%s feed=%v writes/s=%.0f cpu/write=%s loadavg=%s\n", o.mode, !o.noFeed, wps, strings.ReplaceAll(cpuPer, " ", ""), strings.ReplaceAll(loadAvg(), " ", "/"))
	}
	if r.signs > 0 {
		fmt.Printf("signing in run:  %d envelopes signed live, mean %.1f µs each (wall, under load) = %.1f%% of %d cores over the window\n",
			r.signs, float64(r.signNs)/float64(r.signs)/1e3, 100*float64(r.signNs)/(r.window.Seconds()*1e9*float64(numProcs())), numProcs())
	} else {
		fmt.Printf("signing in run:  none (all envelopes pre-signed)\n")
	}
	fmt.Printf("sign cost:       %.1f µs/envelope on one core (measured idle, before the run)\n", sc.perEnvelopeUs)
	if r.live > 0 {
		fmt.Printf("NOTE: %d reaction envelopes had to be signed during the run (pre-signed supply ran out; raise -presign)\n", r.live)
	}
	if r.conf > 0 {
		fmt.Printf("head conflicts:  %d room_head_mismatch answers (re-signed on the new head)\n", r.conf)
	}
	if len(r.errs) > 0 {
		keys := make([]string, 0, len(r.errs))
		for k := range r.errs {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			fmt.Printf("errors:          %s × %d\n", k, r.errs[k])
		}
		for _, s := range r.samples {
			fmt.Printf("  e.g. %.300s\n", s)
		}
	}
	if r.gaveUp > 0 {
		fmt.Printf("WARNING: %d agents stopped early after repeated failures\n", r.gaveUp)
	}
	if ceiling > 0 {
		ratio := wps / ceiling
		fmt.Printf("verify ceiling:  %.0f envelopes/s (%d cores)\n", ceiling, numProcs())
		fmt.Printf("ratio:           writes/ceiling = %.1f%%\n", 100*ratio)
		if o.spawn != "" {
			switch vc, err := hostCostPerWrite(r.hostCPU, r.ok, perVerify); {
			case r.hostErr != nil:
				fmt.Printf("host cpu:        n/a (%v)\n", r.hostErr)
			case err != nil:
				fmt.Printf("host cpu:        n/a (%v)\n", err)
			default:
				fmt.Printf("host cpu:        %.2f s over %s = %.2f cores; %.1f µs per accepted write = %.2f verify-costs (1 verify-cost = %.1f µs)\n",
					r.hostCPU.Seconds(), r.window, r.hostCPU.Seconds()/r.window.Seconds(), float64(vc.perWrite)/1e3, vc.units, float64(perVerify)/1e3)
				fmt.Printf("target ≤ 2.0 verify-costs:     %s (%.2f)\n", map[bool]string{true: "PASS", false: "FAIL"}[vc.units <= 2.0], vc.units)
			}
		}
		fmt.Println()
		check := func(ok bool) string {
			if ok {
				return "PASS"
			}
			return "FAIL"
		}
		p99 := pct(r.lat, 99)
		fmt.Printf("target ≥ 5000 writes/s:        %s (%.0f)\n", check(wps >= 5000), wps)
		fmt.Printf("target ≥ 20%% of ceiling:        %s (%.1f%%)\n", check(ratio >= 0.20), 100*ratio)
		fmt.Printf("target p99 ≤ 50 ms:            %s (%s)\n", check(p99 <= 50*time.Millisecond && len(r.lat) > 0), ms(p99))
	}
}

// cpuNote describes how busy this process, other processes and the
// machine (including interrupt and softirq time, such as loopback TCP) were.
// With an external node (-url), that node is one of the other processes
// when it runs on this machine, so no warning is given.
func cpuNote(a, b cpuSample, wall time.Duration, procs int, externalNode bool) string {
	self, others, machine, ok := cpuUse(a, b, wall, procs)
	if !ok {
		return "n/a"
	}
	note := fmt.Sprintf("this process %.0f%% of %d CPUs, other processes %.0f%%, machine %.0f%% busy", 100*self, procs, 100*others, 100*machine)
	if others > 0.05 && !externalNode {
		note += " (WARNING: other processes competed for the CPUs: figures are skewed)"
	} else if externalNode {
		note += " (other processes include the node if it runs on this machine)"
	}
	return note
}
