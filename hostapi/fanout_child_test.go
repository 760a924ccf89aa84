//go:build e2e

package hostapi_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// The subscriber side of BenchmarkSSEFanout runs in a child process (this
// test binary again, TestFanoutSubscriberProcess) so that the host's CPU
// is measured apart from its readers and each process holds only one end
// of every stream. The child reports on stdout, one line each:
//
//	ready                   every stream is subscribed
//	c <room> <n>            the room's slowest subscriber has read n events
//	err <message>           a stream failed
//	done <json>             fanoutResult, then it exits
//
// and exits when its stdin closes (the benchmark ended or died).

type fanoutRoom struct{ ID, Token string }

type fanoutConfig struct {
	URL     string
	Rooms   []fanoutRoom
	Subs    int
	Records int
}

type fanoutResult struct {
	P50, P99 float64 // delivery lag, ms
	Bytes    int64   // read by all subscribers
	CPU      time.Duration
}

const fanoutConfigEnv = "ADPNODE_FANOUT_CONFIG"

type fanoutChild struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	ready chan error
	res   chan fanoutResult
	err   atomic.Value // string: the first failure the child reported
	once  sync.Once
}

func startFanoutChild(b *testing.B, cfg fanoutConfig, rs []*fanRoom) *fanoutChild {
	path := b.TempDir() + "/fanout.json"
	raw, _ := json.Marshal(cfg)
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestFanoutSubscriberProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), fanoutConfigEnv+"="+path)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	c := &fanoutChild{cmd: cmd, stdin: stdin, ready: make(chan error, 1), res: make(chan fanoutResult, 1)}
	go func() { // ends when the child's stdout closes
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		readied := false
		for sc.Scan() {
			verb, rest, _ := strings.Cut(sc.Text(), " ")
			switch verb {
			case "ready":
				readied = true
				c.ready <- nil
			case "c":
				i, n, _ := strings.Cut(rest, " ")
				ri, _ := strconv.Atoi(i)
				v, _ := strconv.ParseInt(n, 10, 64)
				if ri >= 0 && ri < len(rs) {
					rs[ri].slow.Store(v)
				}
			case "err":
				c.err.CompareAndSwap(nil, rest)
				if !readied {
					readied = true
					c.ready <- errors.New(rest)
				}
			case "done":
				var r fanoutResult
				_ = json.Unmarshal([]byte(rest), &r)
				c.res <- r
			}
		}
		if !readied {
			c.ready <- errors.New("subscriber process exited before its streams were ready")
		}
		close(c.res)
	}()
	return c
}

func (c *fanoutChild) waitReady() error { return <-c.ready }

// wait returns the child's result once every subscriber has read every
// record (or a failure).
func (c *fanoutChild) wait() (fanoutResult, error) {
	r, ok := <-c.res
	c.kill()
	if e := c.err.Load(); e != nil {
		return r, errors.New(e.(string))
	}
	if !ok {
		return r, errors.New("subscriber process exited without a result")
	}
	return r, nil
}

func (c *fanoutChild) kill() {
	c.once.Do(func() {
		c.stdin.Close()
		done := make(chan struct{})
		go func() { c.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			c.cmd.Process.Kill()
			<-done
		}
	})
}

// raiseFileLimit lifts the soft open-file limit towards the hard one and
// reports whether need files fit.
func raiseFileLimit(need uint64) bool {
	var lim syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim) != nil {
		return false
	}
	if lim.Cur < need && lim.Max > lim.Cur {
		lim.Cur = min(lim.Max, max(need, lim.Cur))
		_ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim)
		_ = syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim)
	}
	return lim.Cur >= need
}

// TestFanoutSubscriberProcess is the subscriber side of
// BenchmarkSSEFanout; without its configuration it is skipped.
func TestFanoutSubscriberProcess(t *testing.T) {
	path := os.Getenv(fanoutConfigEnv)
	if path == "" {
		t.Skip("the subscriber process of BenchmarkSSEFanout")
	}
	out := bufio.NewWriter(os.Stdout)
	var outMu sync.Mutex
	say := func(format string, a ...any) {
		outMu.Lock()
		fmt.Fprintf(out, format+"\n", a...)
		out.Flush()
		outMu.Unlock()
	}
	fail := func(format string, a ...any) { say("err "+format, a...) }
	raw, err := os.ReadFile(path)
	var cfg fanoutConfig
	if err == nil {
		err = json.Unmarshal(raw, &cfg)
	}
	if err != nil {
		fail("config: %v", err)
		return
	}
	if need := uint64(len(cfg.Rooms)*cfg.Subs + 100); !raiseFileLimit(need) {
		fail("subscriber process needs %d open files", need)
		return
	}
	cpu0 := procCPUTime()
	stop := make(chan struct{})
	go func() { // the parent closes stdin when it is done or gone
		io.Copy(io.Discard, os.Stdin)
		close(stop)
	}()

	want := int64(cfg.Records)
	counts := make([][]*atomic.Int64, len(cfg.Rooms))
	var bytesRead atomic.Int64
	var lagMu sync.Mutex
	var lags []int64 // µs
	var ready, done sync.WaitGroup
	var failed atomic.Bool
	dial := make(chan struct{}, 64) // at most 64 subscribes in flight: no listen-backlog overflow
	for i, r := range cfg.Rooms {
		for range cfg.Subs {
			cnt := new(atomic.Int64)
			counts[i] = append(counts[i], cnt)
			ready.Add(1)
			done.Add(1)
			go func() {
				defer done.Done()
				subscribed := false
				mark := func() {
					if !subscribed {
						subscribed = true
						<-dial
						ready.Done()
					}
				}
				defer mark()
				req, _ := http.NewRequest(http.MethodGet, cfg.URL+"/v1/rooms/"+r.ID+"/events/live", nil)
				req.Header.Set("Authorization", "Bearer "+r.Token)
				dial <- struct{}{}
				tr := &http.Transport{DisableKeepAlives: true}
				defer tr.CloseIdleConnections()
				resp, err := (&http.Client{Transport: tr}).Do(req)
				if err != nil || resp.StatusCode != http.StatusOK {
					failed.Store(true)
					fail("subscribe: %v %v", err, resp)
					return
				}
				defer resp.Body.Close()
				go func() { <-stop; resp.Body.Close() }()
				br := bufio.NewReaderSize(resp.Body, 64<<10)
				own := make([]int64, 0, cfg.Records)
				for cnt.Load() < want {
					line, err := br.ReadSlice('\n')
					bytesRead.Add(int64(len(line)))
					if err != nil {
						failed.Store(true)
						fail("stream ended after %d events: %v", cnt.Load(), err)
						return
					}
					if !subscribed && bytes.HasPrefix(line, []byte(": subscribed")) {
						mark()
						continue
					}
					if !bytes.HasPrefix(line, []byte("data: ")) {
						continue
					}
					own = append(own, time.Now().UnixMicro()-receivedAt(line)*1000)
					cnt.Add(1)
				}
				lagMu.Lock()
				lags = append(lags, own...)
				lagMu.Unlock()
			}()
		}
	}
	ready.Wait()
	if failed.Load() {
		return
	}
	say("ready")

	// Progress for the writers' flow control: each room's slowest reader.
	finished := make(chan struct{})
	go func() { done.Wait(); close(finished) }()
	last := make([]int64, len(cfg.Rooms))
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	report := func() {
		outMu.Lock()
		defer outMu.Unlock()
		for i, cs := range counts {
			m := int64(-1)
			for _, c := range cs {
				if v := c.Load(); m < 0 || v < m {
					m = v
				}
			}
			if m != last[i] {
				last[i] = m
				fmt.Fprintf(out, "c %d %d\n", i, m)
			}
		}
		out.Flush()
	}
	for wait := true; wait; {
		select {
		case <-tick.C:
			report()
		case <-finished:
			wait = false
		case <-stop:
			return
		}
	}
	if failed.Load() {
		return
	}
	slices.Sort(lags)
	q := func(p float64) float64 {
		if len(lags) == 0 {
			return 0
		}
		return float64(lags[min(int(p*float64(len(lags))), len(lags)-1)]) / 1e3
	}
	res, _ := json.Marshal(fanoutResult{P50: q(0.50), P99: q(0.99), Bytes: bytesRead.Load(), CPU: procCPUTime() - cpu0})
	say("done %s", res)
}
