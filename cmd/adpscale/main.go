// Command adpscale measures a federation of real adpnode processes on
// 127.0.0.1, each with default settings but its ports and
// --allow-private-peers: N nodes in a chain (node i bootstraps from node
// i−1) or a star (every node bootstraps from node 0). It reports how long
// discovery takes until every node is connected beyond its bootstrap
// peer, the convergence of new rooms (room.create on one node to every
// node's GET /v1/rooms/public listing it: p50, p99, max), each node's
// resident memory, CPU, wake-ups (context switches of its threads) and
// libp2p bytes (in total and by protocol) over an idle window, and, after
// SIGKILL of middle nodes, convergence among the survivors and the
// restarted nodes' return.
//
//	go run ./cmd/adpscale -n 30 -topology chain -idle 60s
//
// Linux only (it reads /proc). docs/performance.md has figures.
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"log"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/adpnode/adpnode/internal/procnet"
)

func main() {
	n := flag.Int("n", 30, "nodes")
	topo := flag.String("topology", "chain", "chain (node i bootstraps from i-1) or star (every node from node 0)")
	rooms := flag.Int("rooms", 5, "rooms created to measure convergence")
	idle := flag.Duration("idle", 60*time.Second, "idle window for CPU and bandwidth (0: skip)")
	settle := flag.Duration("settle", 0, "wait before the idle window (discovery rounds back off to 5 min)")
	kill := flag.Int("kill", 2, "middle nodes killed (SIGKILL) and restarted (0: skip)")
	bin := flag.String("bin", "", "adpnode binary (default: build one)")
	dir := flag.String("dir", "", "working directory (default: a temporary one, removed)")
	timeout := flag.Duration("timeout", 5*time.Minute, "bound on each wait")
	flag.Parse()
	if *topo != "chain" && *topo != "star" {
		log.Fatalf("topology %q: want chain or star", *topo)
	}
	root := *dir
	if root == "" {
		d, err := os.MkdirTemp("", "adpscale-")
		if err != nil {
			log.Fatal(err)
		}
		defer os.RemoveAll(d)
		root = d
	}
	if *bin == "" {
		b, err := procnet.Build(root)
		if err != nil {
			log.Fatal(err)
		}
		*bin = b
	}
	s := &scale{bin: *bin, root: root, timeout: *timeout, settle: *settle}
	defer s.stopAll()
	if err := s.run(*n, *topo, *rooms, *idle, *kill); err != nil {
		s.stopAll()
		log.Fatal(err)
	}
}

type scale struct {
	bin, root string
	timeout   time.Duration
	settle    time.Duration
	nodes     []*procnet.Node
}

func (s *scale) stopAll() {
	var wg sync.WaitGroup
	for _, nd := range s.nodes {
		wg.Add(1)
		go func() { defer wg.Done(); nd.Stop() }()
	}
	wg.Wait()
}

func (s *scale) run(n int, topo string, rooms int, idle time.Duration, kill int) error {
	fmt.Printf("adpscale: %d nodes, %s, default discovery settings, 127.0.0.1\n", n, topo)
	t0 := time.Now()
	for i := range n {
		var boot []*procnet.Node
		switch {
		case i == 0:
		case topo == "chain":
			boot = s.nodes[i-1 : i]
		default:
			boot = s.nodes[:1]
		}
		nd, err := procnet.Start(s.bin, s.root, fmt.Sprintf("n%02d", i), boot, s.timeout)
		if err != nil {
			return err
		}
		s.nodes = append(s.nodes, nd)
	}
	fmt.Printf("started:            %v (%.0f ms a node)\n", time.Since(t0).Round(time.Millisecond), float64(time.Since(t0).Milliseconds())/float64(n))

	t1 := time.Now()
	if err := s.waitConnected(s.nodes, 3); err != nil {
		return err
	}
	fmt.Printf("discovery:          every node has ≥ 3 peers (beyond its chain neighbours) %v after the last start\n", time.Since(t1).Round(time.Millisecond))
	s.printPeers()

	lat, err := s.converge(s.nodes, rooms, "r")
	if err != nil {
		return err
	}
	fmt.Printf("convergence:        %s (%d rooms × %d nodes)\n", summary(lat), rooms, n)

	if idle > 0 {
		time.Sleep(s.settle)
		if err := s.idle(idle); err != nil {
			return err
		}
	}
	if kill > 0 && n >= kill+2 {
		return s.killRestart(kill)
	}
	return nil
}

// waitConnected waits until every node in ns has at least k connected
// peers (or all the others, if fewer).
func (s *scale) waitConnected(ns []*procnet.Node, k int) error {
	k = min(k, len(ns)-1)
	deadline := time.Now().Add(s.timeout)
	for {
		ok := true
		for _, nd := range ns {
			ps, err := nd.Peers()
			if err != nil || len(ps) < k {
				ok = false
				break
			}
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not every node reached %d peers within %v", k, s.timeout)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func (s *scale) printPeers() {
	var conns []float64
	bySource := map[string]int{}
	for _, nd := range s.nodes {
		ps, _ := nd.Peers()
		conns = append(conns, float64(len(ps)))
		for _, p := range ps {
			bySource[p.Source]++
		}
	}
	var src []string
	for k, v := range bySource {
		src = append(src, fmt.Sprintf("%s %d", k, v))
	}
	sort.Strings(src)
	fmt.Printf("connections:        per node min %.0f, median %.0f, max %.0f; by source: %s\n",
		pct(conns, 0), pct(conns, 50), pct(conns, 100), strings.Join(src, ", "))
}

// converge creates rooms, each on a node in turn, and returns for every
// (room, node) the time from the create's answer to the node listing it.
func (s *scale) converge(ns []*procnet.Node, rooms int, tag string) ([]float64, error) {
	var lat []float64
	ctx := context.Background()
	for r := range rooms {
		origin := ns[(r*7+1)%len(ns)]
		topic := fmt.Sprintf("scale-%s-%d-%d", tag, r, time.Now().UnixNano())
		id, err := origin.CreateRoom(ctx, topic)
		if err != nil {
			return nil, fmt.Errorf("create on %s: %w", origin.Name, err)
		}
		start := time.Now()
		var mu sync.Mutex
		var wg sync.WaitGroup
		var failed error
		for _, nd := range ns {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					ok, err := nd.Lists(id, topic)
					if err == nil && ok {
						mu.Lock()
						lat = append(lat, time.Since(start).Seconds())
						mu.Unlock()
						return
					}
					if time.Since(start) > s.timeout {
						mu.Lock()
						failed = fmt.Errorf("%s never listed room %s from %s", nd.Name, id, origin.Name)
						mu.Unlock()
						return
					}
					time.Sleep(100 * time.Millisecond)
				}
			}()
		}
		wg.Wait()
		if failed != nil {
			return lat, failed
		}
	}
	return lat, nil
}

// idle measures each node's CPU time, memory and libp2p bytes over a
// window in which nothing happens.
func (s *scale) idle(window time.Duration) error {
	type at struct {
		cpu     time.Duration
		wakes   int64
		in, out float64
		proto   map[string]float64
	}
	before := make([]at, len(s.nodes))
	for i, nd := range s.nodes {
		c, err := nd.CPU()
		if err != nil {
			return err
		}
		w, err := nd.Wakes()
		if err != nil {
			return err
		}
		in, out := p2pBytes(nd)
		before[i] = at{c, w, in, out, protocolBytes(nd)}
	}
	time.Sleep(window)
	var cpu, wakes, bytes, rss []float64
	byProto := map[string][]float64{} // protocol -> B/s per node
	for i, nd := range s.nodes {
		for p, v := range protocolBytes(nd) {
			byProto[p] = append(byProto[p], (v-before[i].proto[p])/window.Seconds())
		}
		c, err := nd.CPU()
		if err != nil {
			return err
		}
		w, err := nd.Wakes()
		if err != nil {
			return err
		}
		in, out := p2pBytes(nd)
		cpu = append(cpu, 100*(c-before[i].cpu).Seconds()/window.Seconds())
		wakes = append(wakes, float64(w-before[i].wakes)/window.Seconds())
		bytes = append(bytes, (in-before[i].in+out-before[i].out)/window.Seconds())
		r, _ := nd.RSS()
		rss = append(rss, float64(r)/(1<<20))
	}
	fmt.Printf("idle %v:          CPU %% of a core per node median %.2f, p99 %.2f, max %.2f\n", window, pct(cpu, 50), pct(cpu, 99), pct(cpu, 100))
	fmt.Printf("idle wake-ups:      per node (context switches of its threads) median %.0f/s, p99 %.0f/s, max %.0f/s\n", pct(wakes, 50), pct(wakes, 99), pct(wakes, 100))
	fmt.Printf("idle libp2p bytes:  per node (in+out) median %.0f B/s, max %.0f B/s\n", pct(bytes, 50), pct(bytes, 100))
	fmt.Printf("RSS:                per node median %.0f MiB, max %.0f MiB\n", pct(rss, 50), pct(rss, 100))
	type share struct {
		proto string
		sum   float64
	}
	var shares []share
	total := 0.0
	for p, xs := range byProto {
		sum := 0.0
		for _, x := range xs {
			sum += x
		}
		shares = append(shares, share{p, sum})
		total += sum
	}
	sort.Slice(shares, func(i, j int) bool { return shares[i].sum > shares[j].sum })
	for _, sh := range shares {
		if sh.sum <= 0 {
			continue
		}
		fmt.Printf("  by protocol %-28s per node (in+out) mean %.1f B/s, median %.1f B/s, max %.1f B/s (%.0f %%)\n", sh.proto+":",
			sh.sum/float64(len(s.nodes)), pct(byProto[sh.proto], 50), pct(byProto[sh.proto], 100), 100*sh.sum/max(total, 1))
	}
	return nil
}

// protocolBytes reads adp_p2p_protocol_bytes_total from /metrics: bytes
// in + out by libp2p protocol.
func protocolBytes(nd *procnet.Node) map[string]float64 {
	out := map[string]float64{}
	resp, err := http.Get(nd.HTTP + "/metrics")
	if err != nil {
		return out
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		l := sc.Text()
		rest, ok := strings.CutPrefix(l, "adp_p2p_protocol_bytes_total{")
		if !ok {
			continue
		}
		labels, val, ok := strings.Cut(rest, "} ")
		if !ok {
			continue
		}
		v, _ := strconv.ParseFloat(strings.TrimSpace(val), 64)
		for _, kv := range strings.Split(labels, ",") {
			if p, ok := strings.CutPrefix(kv, `protocol="`); ok {
				out[strings.TrimSuffix(p, `"`)] += v
			}
		}
	}
	return out
}

// p2pBytes reads adp_p2p_bytes_in_total and _out_total from /metrics.
func p2pBytes(nd *procnet.Node) (in, out float64) {
	resp, err := http.Get(nd.HTTP + "/metrics")
	if err != nil {
		return 0, 0
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 2 {
			continue
		}
		v, _ := strconv.ParseFloat(f[1], 64)
		switch f[0] {
		case "adp_p2p_bytes_in_total":
			in = v
		case "adp_p2p_bytes_out_total":
			out = v
		}
	}
	return in, out
}

// killRestart SIGKILLs k middle nodes, measures convergence among the
// survivors, restarts the killed nodes and measures their return.
func (s *scale) killRestart(k int) error {
	mid := len(s.nodes) / 2
	killed := s.nodes[mid-k/2 : mid-k/2+k]
	var survivors []*procnet.Node
	for _, nd := range s.nodes {
		dead := false
		for _, d := range killed {
			dead = dead || d == nd
		}
		if !dead {
			survivors = append(survivors, nd)
		}
	}
	for _, nd := range killed {
		nd.Kill()
	}
	lat, err := s.converge(survivors, 3, "k")
	if err != nil {
		return err
	}
	fmt.Printf("after SIGKILL of %d: convergence among %d survivors %s\n", k, len(survivors), summary(lat))
	t := time.Now()
	for _, nd := range killed {
		if err := nd.Restart(s.timeout); err != nil {
			return err
		}
	}
	if err := s.waitConnected(killed, 2); err != nil {
		return err
	}
	fmt.Printf("restart:            %d nodes ready and with ≥ 2 peers in %v\n", k, time.Since(t).Round(time.Millisecond))
	lat, err = s.converge(s.nodes, 3, "back")
	if err != nil {
		return err
	}
	fmt.Printf("after restart:      convergence %s\n", summary(lat))
	return nil
}

func summary(secs []float64) string {
	return fmt.Sprintf("p50 %.2f s, p99 %.2f s, max %.2f s", pct(secs, 50), pct(secs, 99), pct(secs, 100))
}

// pct is the p-th percentile (nearest rank) of xs.
func pct(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	i := int(p/100*float64(len(s))+0.5) - 1
	return s[max(0, min(i, len(s)-1))]
}
