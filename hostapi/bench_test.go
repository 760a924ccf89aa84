//go:build e2e

package hostapi_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/adpnode/adpnode/adp/identity"
	"github.com/adpnode/adpnode/internal/adptest"
	"github.com/adpnode/adpnode/node"
)

// BenchmarkHTTPWrites measures accepted writes per second over HTTP against
// a node with durable (synced) Badger in a temporary dir: 64 agents, each
// in its own room, one request in flight each. It reports writes/s, p50 and
// p99 latency, and the ratio to the bare verification rate of this machine
// (identity.OpenEnvelope on all cores, measured once per process).
//
//	go test ./hostapi -run '^$' -bench HTTPWrites -benchtime 5000x
//
// message: message.create must name the current head, so each agent signs
// its next envelope after the previous answer (signing is inside the timed
// loop, outside the latency). reaction: reaction.create is a signal
// anchored at room.create, so all envelopes are signed before the timer.
// cmd/adpload is the fuller load command.
func BenchmarkHTTPWrites(b *testing.B) {
	for _, mode := range []string{"message", "reaction"} {
		b.Run(mode, func(b *testing.B) { benchHTTPWrites(b, mode, 64) })
	}
}

// benchRatesOff disables every quota: a zero kind limit in a non-zero Rates
// is "no limit" (an all-zero Rates means the defaults).
func benchRatesOff() node.Rates { return node.Rates{AgentStatus: 60} }

type benchWriter struct {
	a      *adptest.Agent
	room   string
	anchor adptest.Head // room.create record: the signal anchor
	target string       // room.create envelope hash: the reaction target
	head   adptest.Head
	pre    [][]byte
	n      int
	lat    []int64
}

func benchHTTPWrites(b *testing.B, mode string, agents int) {
	ceiling := benchVerifyCeiling(b)
	h := adptest.StartHost(b, node.Config{DataDir: b.TempDir(), Rates: benchRatesOff(), Now: time.Now,
		Log: slog.New(slog.DiscardHandler)})
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 2 * agents, MaxIdleConns: 2 * agents}}
	b.Cleanup(hc.CloseIdleConnections)
	post := func(path string, body []byte, buf *bytes.Buffer) (int, error) {
		resp, err := hc.Post(h.URL+path, "application/json", bytes.NewReader(body))
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		buf.Reset()
		_, err = io.Copy(buf, resp.Body)
		return resp.StatusCode, err
	}
	now := func() int64 { return time.Now().UnixMilli() }

	ws := make([]*benchWriter, agents)
	for i := range ws {
		a := adptest.NewAgent(fmt.Sprintf("bench-%d", i))
		p := h.RoomPayload("public")
		ev := a.Event(now(), "room.create", "", 0, "", p)
		env, err := identity.Sign(a.Key, ev)
		if err != nil {
			b.Fatal(err)
		}
		var buf bytes.Buffer
		if st, err := post("/v1/rooms", env.Raw, &buf); err != nil || st != http.StatusCreated {
			b.Fatalf("room.create: %d %v %s", st, err, buf.Bytes())
		}
		var c struct {
			ID   string `json:"id"`
			Hash string `json:"hash"`
		}
		json.Unmarshal(buf.Bytes(), &c)
		w := &benchWriter{a: a, room: c.ID, anchor: adptest.Head{Seq: 1, Hash: c.Hash}, target: env.Hash}
		w.head = w.anchor
		ws[i] = w
	}
	// Static shares of b.N; reaction envelopes are all signed up front.
	for i, w := range ws {
		w.n = b.N / agents
		if i < b.N%agents {
			w.n++
		}
		w.lat = make([]int64, 0, w.n)
		if mode == "reaction" {
			for range w.n {
				w.pre = append(w.pre, w.a.Envelope(now(), "reaction.create", w.room, 1, w.anchor.Hash,
					map[string]any{"event_id": w.target, "reaction": "agree"}))
			}
		}
	}

	var failed atomic.Value
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for _, w := range ws {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var buf bytes.Buffer
			for k := 0; k < w.n; k++ {
				var body []byte
				if mode == "reaction" {
					body = w.pre[k]
				} else {
					body = w.a.Envelope(now(), "message.create", w.room, w.head.Seq, w.head.Hash,
						map[string]any{"content": "benchmark message", "content_type": "text/plain"})
				}
				t0 := time.Now()
				st, err := post("/v1/rooms/"+w.room, body, &buf)
				w.lat = append(w.lat, int64(time.Since(t0)))
				if err != nil || st != http.StatusCreated {
					failed.CompareAndSwap(nil, fmt.Sprintf("%s: %d %v %s", mode, st, err, bytes.TrimSpace(buf.Bytes())))
					return
				}
				if mode == "message" {
					var r struct {
						Seq  int64  `json:"seq"`
						Hash string `json:"hash"`
					}
					json.Unmarshal(buf.Bytes(), &r)
					w.head = adptest.Head{Seq: r.Seq, Hash: r.Hash}
				}
			}
		}()
	}
	wg.Wait()
	el := time.Since(start)
	b.StopTimer()
	if f := failed.Load(); f != nil {
		b.Fatal(f)
	}
	var lat []int64
	for _, w := range ws {
		lat = append(lat, w.lat...)
	}
	slices.Sort(lat)
	q := func(p float64) float64 { return float64(lat[min(int(p*float64(len(lat))), len(lat)-1)]) / 1e6 }
	wps := float64(b.N) / el.Seconds()
	b.ReportMetric(wps, "writes/s")
	b.ReportMetric(q(0.50), "p50-ms")
	b.ReportMetric(q(0.99), "p99-ms")
	b.ReportMetric(ceiling, "verify/s")
	b.ReportMetric(100*wps/ceiling, "%ceiling")
}

var benchCeiling struct {
	once sync.Once
	v    float64
}

// benchVerifyCeiling measures identity.OpenEnvelope on all cores for 500 ms
// (once per process) on message.create envelopes of 64 keys.
func benchVerifyCeiling(b *testing.B) float64 {
	benchCeiling.once.Do(func() {
		envs := make([][]byte, 256)
		room, hash := "cv0adpload0000000000", identity.EncodeB64(make([]byte, 32))
		for i := range envs {
			a := adptest.NewAgent(fmt.Sprintf("verify-%d", i%64))
			envs[i] = a.Envelope(time.Now().UnixMilli(), "message.create", room, 1, hash,
				map[string]any{"content": "benchmark message", "content_type": "text/plain"})
		}
		benchCeiling.v = adptest.VerifyRate(envs, runtime.GOMAXPROCS(0), 500*time.Millisecond)
	})
	return benchCeiling.v
}
