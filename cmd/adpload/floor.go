package main

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/gin-gonic/gin"

	"github.com/adpnode/adpnode/adp/identity"
	"github.com/adpnode/adpnode/hostapi"
	"github.com/adpnode/adpnode/internal/groupcommit"
	"github.com/adpnode/adpnode/node"
)

// The floor (-floor) measures what the node's own stack costs before any
// protocol work: a child process (this binary again, -floor-serve STAGE)
// serves POST /v1/rooms/{id} with
//
//	edge    the node's HTTP edge (net/http configured by hostapi.NewHTTPServer,
//	        a gin engine, the body read as the host reads it) answering a
//	        record-sized 201;
//	store   edge + the node's durable write of one record: a synced group
//	        commit (internal/groupcommit on node.BadgerOptions) of the four
//	        keys the node writes per record (record, envelope and record
//	        hash index, nonce);
//	verify  store + identity.ParseEnvelope and Envelope.Verify of the body,
//	        as the node verifies every write;
//
// and the generator posts pre-signed envelopes to it from -agents
// connections, so the child gets more of the machine than the node gets
// under the signing generator. The child's own CPU per request, in
// verify-costs, is what a host on this stack cannot go below whatever its
// protocol code does: if verify alone exceeds the write-path target, the
// target needs another edge or store.

// floorStages are the stages in the order -floor runs them.
// verify-unsynced is verify on a Badger that does not sync its writes (not
// durable: what a relay at its defaults does), to show how much of the
// floor durability is.
var floorStages = []string{"edge", "store", "verify", "verify-unsynced"}

type floorSpec struct{ store, synced, verify bool }

var floorSpecs = map[string]floorSpec{
	"edge":            {},
	"store":           {store: true, synced: true},
	"verify":          {store: true, synced: true, verify: true},
	"verify-unsynced": {store: true, verify: true},
}

// floorRecordPad is what a record adds to its envelope (room_id, seq,
// prev_hash, received_at, hash, the object around them), about 300 bytes.
const floorRecordPad = 300

// floorMaxBody is the node's default request body limit.
const floorMaxBody = 1 << 20

// floorAnswer is a 201 of a record's size, as the node answers a write.
var floorAnswer = func() []byte {
	b := []byte(`{"record":{"pad":"`)
	b = append(b, bytes.Repeat([]byte("x"), 1000)...)
	return append(b, `"}}`...)
}()

// runFloor runs every stage as a child and prints its CPU per request.
func runFloor(o options, perVerify time.Duration) error {
	envs, err := sampleEnvelopes("message", o.contentBytes, 1024)
	if err != nil {
		return err
	}
	fmt.Printf("floor:           %d connections, %s per stage after %s warm-up, %d pre-signed %d-byte envelopes posted in turn\n",
		o.agents, o.duration, o.warmup, len(envs), len(envs[0]))
	for _, stage := range floorStages {
		r, err := floorStage(o, stage, envs)
		if err != nil {
			return fmt.Errorf("floor %s: %w", stage, err)
		}
		line := fmt.Sprintf("floor %-16s %6d requests/s, child CPU %.2f cores, %6.1f µs per request", stage+":",
			int(float64(r.ok)/o.duration.Seconds()), r.cpu.Seconds()/o.duration.Seconds(), float64(r.cpu.Nanoseconds())/float64(r.ok)/1e3)
		if perVerify > 0 {
			line += fmt.Sprintf(" = %.2f verify-costs", float64(r.cpu)/float64(r.ok)/float64(perVerify))
		}
		if r.failed > 0 {
			line += fmt.Sprintf(" (%d failed requests)", r.failed)
		}
		fmt.Println(line)
	}
	return nil
}

type floorResult struct {
	ok, failed int64
	cpu        time.Duration
}

// floorStage spawns one child serving stage and drives it.
func floorStage(o options, stage string, envs [][]byte) (floorResult, error) {
	dir, err := os.MkdirTemp("", "adpload-floor-*")
	if err != nil {
		return floorResult{}, err
	}
	defer os.RemoveAll(dir)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return floorResult{}, err
	}
	addr := ln.Addr().String()
	ln.Close()
	self, err := os.Executable()
	if err != nil {
		return floorResult{}, err
	}
	cmd := exec.Command(self, "-floor-serve", stage, "-floor-listen", addr, "-data", filepath.Join(dir, "data"))
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		return floorResult{}, err
	}
	h := &spawnedHost{url: "http://" + addr, cmd: cmd, dir: dir, done: make(chan error, 1)}
	go func() { h.done <- cmd.Wait() }()
	defer h.close()
	if err := h.waitReady(20 * time.Second); err != nil {
		return floorResult{}, err
	}
	cl := newClient(h.url, o.agents, o.timeout)
	start := time.Now()
	from, to := start.Add(o.warmup), start.Add(o.warmup+o.duration)
	var ok, failed atomic.Int64
	var wg sync.WaitGroup
	for i := 0; i < o.agents; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var buf bytes.Buffer
			path := "/v1/rooms/floor" + strconv.Itoa(i%o.rooms)
			for n := i; ; n += o.agents {
				if !time.Now().Before(to) {
					return
				}
				status, _, err := cl.post(path, envs[n%len(envs)], &buf)
				if err != nil {
					time.Sleep(10 * time.Millisecond) // no spinning on a dead child
				}
				if t := time.Now(); t.Before(from) || !t.Before(to) {
					continue
				}
				if err != nil || status != http.StatusCreated {
					failed.Add(1)
					continue
				}
				ok.Add(1)
			}
		}()
	}
	time.Sleep(time.Until(from))
	c0, err0 := procCPU(cmd.Process.Pid)
	time.Sleep(time.Until(to))
	c1, err1 := procCPU(cmd.Process.Pid)
	wg.Wait() // the posters stop at the window's end
	if err := errors.Join(err0, err1); err != nil {
		return floorResult{}, err
	}
	if ok.Load() == 0 {
		return floorResult{}, errors.New("no request answered 201")
	}
	return floorResult{ok: ok.Load(), failed: failed.Load(), cpu: c1 - c0}, nil
}

// floorServe is the child: it serves stage on addr until SIGTERM.
func floorServe(stage, addr, dir string) error {
	spec, ok := floorSpecs[stage]
	if !ok {
		return fmt.Errorf("-floor-serve: unknown stage %q", stage)
	}
	var commit *groupcommit.Committer
	if spec.store {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return err
		}
		db, err := badger.Open(node.BadgerOptions(dir).WithSyncWrites(spec.synced))
		if err != nil {
			return err
		}
		defer db.Close()
		commit = groupcommit.New(db, 4096)
		defer commit.Close()
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	// Every agent of the load comes from one address: only the total cap.
	edge := hostapi.HTTPOptions{MaxConnectionsPerAddress: hostapi.DefaultMaxConnections}
	srv := hostapi.NewHTTPServer(floorHandler(spec.verify, commit), edge)
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, os.Interrupt)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(hostapi.LimitListener(ln, edge)) }()
	select {
	case <-stop:
		return srv.Close()
	case err := <-served:
		return err
	}
}

// floorHandler answers GET /healthz, and POST /v1/rooms/{id} with the
// stage's work: the body read as the host reads it, with verify a strict
// parse and verification of the envelope (400 if it fails), with commit
// the four keys of a record written durably (503 if that fails), then a
// record-sized 201.
func floorHandler(verify bool, commit *groupcommit.Committer) http.Handler {
	gin.SetMode(gin.ReleaseMode)
	g := gin.New()
	g.GET("/healthz", func(c *gin.Context) { c.Status(http.StatusOK) })
	var seq atomic.Uint64
	g.POST("/v1/rooms/:room", func(c *gin.Context) {
		body, err := io.ReadAll(http.MaxBytesReader(c.Writer, c.Request.Body, floorMaxBody))
		if err != nil {
			c.Status(http.StatusBadRequest)
			return
		}
		if verify {
			env, err := identity.ParseEnvelope(body)
			if err == nil {
				err = env.Verify()
			}
			if err != nil {
				c.Status(http.StatusBadRequest)
				return
			}
		}
		if commit != nil {
			n := seq.Add(1)
			room := c.Param("room")
			rec := make([]byte, 0, len(body)+floorRecordPad)
			rec = append(append(rec, body...), bytes.Repeat([]byte(" "), floorRecordPad)...)
			at := binary.BigEndian.AppendUint64([]byte(room+"/"), n)
			sets := []groupcommit.KV{
				{K: binary.BigEndian.AppendUint64([]byte("r/"+room+"/"), n), V: rec},
				{K: floorHashKey(2 * n), V: at},
				{K: floorHashKey(2*n + 1), V: at},
				{K: []byte("n/agent" + strconv.FormatUint(n%64, 10)), V: make([]byte, 16)},
			}
			if err := commit.Commit(sets); err != nil {
				c.Status(http.StatusServiceUnavailable)
				return
			}
		}
		c.Data(http.StatusCreated, "application/json", floorAnswer)
	})
	return g
}

// floorHashKey is an index key like the node's e/<hash>: 32 bytes spread
// as a hash's are (a SplitMix64 stream seeded by n), not in order.
func floorHashKey(n uint64) []byte {
	k := make([]byte, 0, 2+32)
	k = append(k, "e/"...)
	for range 4 {
		n += 0x9e3779b97f4a7c15
		z := n
		z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
		z = (z ^ (z >> 27)) * 0x94d049bb133111eb
		k = binary.BigEndian.AppendUint64(k, z^(z>>31))
	}
	return k
}
