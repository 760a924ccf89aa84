// Package adptest helps tests drive real adpnode hosts: agents that sign
// envelopes and request JWTs, a controllable clock, and in-process nodes
// served over HTTP on 127.0.0.1.
package adptest

import (
	"bytes"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/adpnode/adpnode/adp"
	"github.com/adpnode/adpnode/adp/identity"
	"github.com/adpnode/adpnode/adp/profile"
	"github.com/adpnode/adpnode/hostapi"
	"github.com/adpnode/adpnode/stack"
)

// Clock is a settable clock safe for concurrent use.
type Clock struct{ ms atomic.Int64 }

// NewClock starts a clock at the real current time.
func NewClock() *Clock {
	c := &Clock{}
	c.ms.Store(time.Now().UnixMilli())
	return c
}

// Now returns the clock's time.
func (c *Clock) Now() time.Time { return time.UnixMilli(c.ms.Load()) }

// Advance moves the clock forward.
func (c *Clock) Advance(d time.Duration) { c.ms.Add(d.Milliseconds()) }

// Ms returns the clock in Unix milliseconds.
func (c *Clock) Ms() int64 { return c.ms.Load() }

// Host is an in-process node behind a real HTTP server on 127.0.0.1. It
// is built by the composition root (stack), whose parts it
// carries: h.Node, h.Att, h.API are the stack's.
type Host struct {
	*stack.Stack
	URL   string
	Clock *Clock
	srv   *httptest.Server
	cfg   stack.NodeConfig // as passed in, with Now set: what Restart reuses
	http  hostapi.HTTPOptions
	log   *stack.HostLogConfig // StartHostLogged
	once  sync.Once
}

// StartHost starts a node with an in-memory store (unless cfg.DataDir is
// set) and serves it. cfg.PublicURL is filled in with the server's URL.
// Everything is stopped in t.Cleanup.
func StartHost(t testing.TB, cfg stack.NodeConfig) *Host {
	t.Helper()
	return startHost(t, cfg, NewClock(), "", hostapi.HTTPOptions{}, nil)
}

// StartHostLogged starts a durable host (in cfg.DataDir, a new temporary
// dir when empty) with the host log and its witness submitter, as serve
// runs it; h.HostLog is the log. Its checkpoints come every 100 ms, so
// that Close, which waits for one covering every record, is quick.
// Restart keeps the log.
func StartHostLogged(t testing.TB, cfg stack.NodeConfig) *Host {
	t.Helper()
	if cfg.DataDir == "" {
		cfg.DataDir = t.TempDir()
	}
	return startHost(t, cfg, NewClock(), "", hostapi.HTTPOptions{}, &stack.HostLogConfig{CheckpointInterval: 100 * time.Millisecond})
}

// StartHostHTTP is StartHost with the HTTP edge's timeouts and caps set
// (hostapi.NewHTTPServer, the same construction serve uses).
func StartHostHTTP(t testing.TB, cfg stack.NodeConfig, o hostapi.HTTPOptions) *Host {
	t.Helper()
	return startHost(t, cfg, NewClock(), "", o, nil)
}

// StartHostAt is StartHost on a given clock: the node reads clock (cfg.Now
// is replaced) and Host.Clock is clock. Use it with cfg.DataDir and
// Restart to run one durable node across restarts on one clock.
func StartHostAt(t testing.TB, cfg stack.NodeConfig, clock *Clock) *Host {
	t.Helper()
	cfg.Now = clock.Now
	return startHost(t, cfg, clock, "", hostapi.HTTPOptions{}, nil)
}

func startHost(t testing.TB, cfg stack.NodeConfig, clock *Clock, addr string, ho hostapi.HTTPOptions, hl *stack.HostLogConfig) *Host {
	t.Helper()
	cfg.Rates = TestRates(cfg.Rates)
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	// Serve on the previous address on a restart, so the origin (JWT
	// audience, Room URLs) survives it.
	var l net.Listener
	var err error
	for i := 0; i < 50; i++ {
		if l, err = net.Listen("tcp", addr); err == nil || addr == "127.0.0.1:0" {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("listen on %s: %v", addr, err)
	}
	if cfg.Now == nil {
		cfg.Now = clock.Now
	}
	keep := cfg
	if cfg.DataDir == "" {
		cfg.InMemory = true
	}
	cfg.PublicURL = "http://" + l.Addr().String()
	// The composition root serve runs (stack): the HTTP server
	// with the edge's timeouts, attention, metrics, the operator token a
	// durable host has in its data dir, and Close's order.
	st, err := stack.Open(stack.Config{Node: cfg, HTTP: ho, Log: cfg.Log, HostLog: hl,
		API: hostapi.Options{Heartbeat: 200 * time.Millisecond}})
	if err != nil {
		l.Close()
		t.Fatal(err)
	}
	srv := &httptest.Server{Listener: hostapi.LimitListener(l, ho), Config: st.Server}
	srv.Start()
	h := &Host{Stack: st, URL: srv.URL, Clock: clock, srv: srv, cfg: keep, http: ho, log: hl}
	t.Cleanup(h.Close)
	return h
}

// Close ends every live stream, stops the HTTP server (cutting off its
// clients) and closes the stack. It is idempotent; t.Cleanup calls it too.
func (h *Host) Close() {
	h.once.Do(func() {
		h.Node.DrainStreams()
		h.Node.DrainViewers()
		if h.Att != nil {
			h.Att.DrainStreams()
		}
		h.srv.CloseClientConnections()
		h.srv.Close()
		h.Stack.Close()
	})
}

// Restart closes h and opens a new node on the same configuration (so the
// same DataDir), the same clock and the same address, as a process restart
// would. h must have a DataDir: an in-memory node restarts empty.
func (h *Host) Restart(t testing.TB) *Host {
	t.Helper()
	return h.RestartAfter(t, nil)
}

// RestartAfter is Restart with offline work between the stop and the
// start: between is called with the data dir while no node has it open
// (an operator's repair, a disk fault).
func (h *Host) RestartAfter(t testing.TB, between func(dataDir string)) *Host {
	t.Helper()
	if h.cfg.DataDir == "" {
		t.Fatal("restart: the host has no DataDir")
	}
	addr := h.srv.Listener.Addr().String()
	h.Close()
	if between != nil {
		between(h.cfg.DataDir)
	}
	return startHost(t, h.cfg, h.Clock, addr, h.http, h.log)
}

// OpenConnections is the number of client connections the host's
// listener holds now.
func (h *Host) OpenConnections() int { return hostapi.OpenConnections(h.srv.Listener) }

// ConnStats is what the host's listener holds and has done: connections
// open and waiting for a request, client addresses, connections closed to
// make room or refused.
func (h *Host) ConnStats() hostapi.ConnStats {
	st, _ := hostapi.ListenerStats(h.srv.Listener)
	return st
}

// Agent is a test agent with its own key and nonce sequence.
type Agent struct {
	Name  string
	Key   ed25519.PrivateKey
	ID    identity.AgentID
	mu    sync.Mutex
	nonce int64
}

// NewAgent derives a deterministic key from name.
func NewAgent(name string) *Agent {
	k := seededKey("adptest:" + name)
	return &Agent{Name: name, Key: k, ID: identity.AgentIDFromKey(k.Public().(ed25519.PublicKey))}
}

// seededKey is the Ed25519 key whose seed is seed's first 32 bytes
// (zero-padded): the same seed, the same agent.
func seededKey(seed string) ed25519.PrivateKey {
	s := make([]byte, 32)
	copy(s, seed)
	k, err := identity.KeyFromSeed(s)
	if err != nil {
		panic(err)
	}
	return k
}

// Nonce returns the next nonce: max(last+1, nowMs).
func (a *Agent) Nonce(nowMs int64) int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.nonce = identity.NextNonce(a.nonce, nowMs)
	return a.nonce
}

// Event builds an unsigned event. roomID "" means room.create (no base).
func (a *Agent) Event(nowMs int64, typ, roomID string, baseSeq int64, baseHash string, payload any) identity.Event {
	p, err := json.Marshal(payload)
	if err != nil {
		panic(err)
	}
	canon, err := identity.Canonicalize(p)
	if err != nil {
		panic(err)
	}
	ev := identity.Event{Protocol: adp.Protocol, Type: typ, Actor: a.ID, CreatedAt: nowMs, Nonce: a.Nonce(nowMs), Payload: canon}
	if roomID != "" {
		ev.RoomID, ev.BaseSeq, ev.BaseHash = &roomID, &baseSeq, &baseHash
	}
	return ev
}

// Sign signs ev and returns the envelope bytes.
func (a *Agent) Sign(ev identity.Event) []byte {
	env, err := identity.Sign(a.Key, ev)
	if err != nil {
		panic(err)
	}
	return env.Raw
}

// Envelope builds and signs an event in one step.
func (a *Agent) Envelope(nowMs int64, typ, roomID string, baseSeq int64, baseHash string, payload any) []byte {
	return a.Sign(a.Event(nowMs, typ, roomID, baseSeq, baseHash, payload))
}

// Token returns a request JWT for the host's origin valid from nowMs.
func (a *Agent) Token(origin string, nowMs int64) string {
	s := nowMs / 1000
	tok, err := identity.SignJWT(a.Key, origin, s, s+120)
	if err != nil {
		panic(err)
	}
	return tok
}

// Response is a decoded HTTP answer.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
}

// JSON decodes the body into v.
func (r *Response) JSON(v any) error { return json.Unmarshal(r.Body, v) }

// ErrorCode returns error.code from an error body ("" if none).
func (r *Response) ErrorCode() string {
	var e struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	_ = json.Unmarshal(r.Body, &e)
	return e.Error.Code
}

// ErrorData returns error.data from an error body.
func (r *Response) ErrorData() map[string]any {
	var e struct {
		Error struct {
			Data map[string]any `json:"data"`
		} `json:"error"`
	}
	_ = json.Unmarshal(r.Body, &e)
	return e.Error.Data
}

func (r *Response) String() string { return fmt.Sprintf("%d %s", r.Status, bytes.TrimSpace(r.Body)) }

// Do sends one request; token "" sends no Authorization header.
func Do(t testing.TB, method, url, token string, body []byte) *Response {
	t.Helper()
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return &Response{Status: resp.StatusCode, Header: resp.Header, Body: b}
}

// TestRates returns r, or the node defaults when r is zero, without the
// per-agent room.create quota: tests create many rooms with few agents on
// a clock that does not move. node.TestRoomCreateQuota tests that quota.
func TestRates(r stack.Rates) stack.Rates {
	if r == (stack.Rates{}) {
		r = stack.DefaultRates()
		r.Create = 0
	}
	return r
}

// ProfileEnvelope signs the agent's profile.update (agent-profile/1.0)
// at nowMs with the next nonce. It checks nothing: a test may sign a
// profile the host must refuse.
func (a *Agent) ProfileEnvelope(nowMs int64, name string, capabilities ...string) []byte {
	if capabilities == nil {
		capabilities = []string{}
	}
	p, err := json.Marshal(map[string]any{"id": a.ID, "name": name, "capabilities": capabilities, "extra": map[string]any{}})
	if err != nil {
		panic(err)
	}
	canon, err := identity.Canonicalize(p)
	if err != nil {
		panic(err)
	}
	return a.Sign(identity.Event{Protocol: profile.Protocol, Type: profile.Type, Actor: a.ID, CreatedAt: nowMs, Nonce: a.Nonce(nowMs), Payload: canon})
}
