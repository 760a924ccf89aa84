//go:build linux && e2e

package node_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/adpnode/adpnode/adp/identity"
	"github.com/adpnode/adpnode/adp/record"
	"github.com/adpnode/adpnode/adp/room"
	"github.com/adpnode/adpnode/internal/adptest"
)

// Crash durability (acceptance criterion): a node in a child process under
// concurrent writers is killed with SIGKILL at random moments, round after
// round, on the same data directory. After every restart:
//
//   - every acknowledged (2xx) record is present at its seq with the same
//     record hash and envelope;
//   - every room's chain is seq 1..last with no gap or duplicate, every
//     record parses and verifies (hashes, signature) and links, and the
//     chain replays through the room state machine; records verified before
//     are byte-for-byte unchanged; the room resource agrees with the chain;
//   - a write that was in flight at the kill is either wholly present (the
//     record is in the chain and the envelope index answers its exact
//     resubmission with that record) or wholly absent (no record, no index
//     entry, no nonce);
//   - the persisted nonce of every agent is exactly the highest nonce in
//     the chains (no nonce written without its record or vice versa).
//
// The file is Linux-only: the child is started with Pdeathsig so that it
// cannot outlive the test binary even if the binary itself is killed.

const (
	crashRounds  = 24
	crashWriters = 8
	crashRooms   = 4
	crashMinKill = 50 * time.Millisecond
	crashMaxKill = 400 * time.Millisecond
)

func TestCrashRecovery(t *testing.T) {
	if testing.Short() {
		t.Skip("builds adpnode and SIGKILLs it repeatedly; skipped with -short")
	}
	began := time.Now()
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("ADPNODE_CRASH_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("ADPNODE_CRASH_SEED: %v", err)
		}
		seed = v
	}
	t.Logf("seed %d (set ADPNODE_CRASH_SEED to repeat the kill schedule)", seed)
	rng := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))

	dir := t.TempDir()
	h := &crashHarness{
		t:       t,
		bin:     buildAdpnode(t, dir),
		cfg:     filepath.Join(dir, "adpnode.yaml"),
		data:    filepath.Join(dir, "data"),
		creator: adptest.NewAgent("crash-creator"),
		chains:  map[string]*crashChain{},
		envs:    map[string]crashLoc{},
		nonces:  map[identity.AgentID]int64{},
		sent:    map[string]bool{},
	}
	for i := range crashWriters {
		h.writers = append(h.writers, adptest.NewAgent(fmt.Sprintf("crash-writer-%d", i)))
	}
	// Rate limits off (0 disables a kind) so that quotas never shape the load.
	cfg := "log_level: warn\nrates:\n  message: 0\n  signal: 0\n  control: 0\n  room_create: 0\n"
	if err := os.WriteFile(h.cfg, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}

	c := h.start()
	h.setup(c)
	h.verify(c)
	for round := 1; round <= crashRounds; round++ {
		delay := crashMinKill + time.Duration(rng.Int64N(int64(crashMaxKill-crashMinKill)+1))
		h.runRound(c, round, delay, rng)
		c = h.start()
		h.verify(c)
		if t.Failed() {
			t.FailNow()
		}
	}
	// A second pass with nothing in flight covers the writes that were
	// absent after the last kill and accepted on resubmission.
	h.verify(c)

	// After all the crashes a graceful stop must still work.
	if err := c.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-c.done:
		if !c.cmd.ProcessState.Success() {
			t.Errorf("graceful stop after the crash rounds: %v\n%s", c.cmd.ProcessState, c.log.String())
		}
	case <-time.After(20 * time.Second):
		t.Errorf("graceful stop did not finish in 20s")
	}
	h.checkLog(c)

	s := h.stats
	t.Logf("%d SIGKILL rounds in %v: %d records acknowledged (%d acknowledgement checks), %d records verified in full, %d re-compared byte for byte, %d rooms; in flight at kills: %d present, %d absent (%d accepted on resubmission); slowest restart %v",
		crashRounds, time.Since(began).Round(time.Millisecond), len(h.acks), s.ackChecks, s.verified, s.compared,
		len(h.chains), s.present, s.absent, s.retried, s.slowestStart.Round(time.Millisecond))
}

// buildAdpnode builds the adpnode command once into dir.
func buildAdpnode(t *testing.T, dir string) string {
	t.Helper()
	// go test puts its own GOROOT/bin first on the test's PATH.
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to build adpnode with")
	}
	bin := filepath.Join(dir, "adpnode")
	out, err := exec.Command(goTool, "build", "-o", bin, "github.com/adpnode/adpnode/cmd/adpnode").CombinedOutput()
	if err != nil {
		t.Fatalf("go build adpnode: %v\n%s", err, out)
	}
	return bin
}

// crashChild is one adpnode process.
type crashChild struct {
	cmd    *exec.Cmd
	base   string // http://127.0.0.1:port
	client *http.Client
	done   chan struct{} // closed once the process has been waited for
	log    *crashLog
}

func (c *crashChild) exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// kill SIGKILLs the process if it still runs and waits for it.
func (c *crashChild) kill() {
	if !c.exited() {
		c.cmd.Process.Signal(syscall.SIGKILL)
	}
	<-c.done
	c.client.CloseIdleConnections()
}

type crashReply struct {
	status int
	header http.Header
	body   []byte
}

func (r crashReply) String() string { return fmt.Sprintf("%d %s", r.status, bytes.TrimSpace(r.body)) }

func (r crashReply) errCode() (code, reason string) {
	var e struct {
		Error struct {
			Code string `json:"code"`
			Data struct {
				Reason string `json:"reason"`
			} `json:"data"`
		} `json:"error"`
	}
	json.Unmarshal(r.body, &e)
	return e.Error.Code, e.Error.Data.Reason
}

func (r crashReply) errCodeIs(code string) bool {
	c, _ := r.errCode()
	return c == code
}

// do sends one request; an error means no complete answer was read.
func (c *crashChild) do(method, path, token string, body []byte) (crashReply, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, c.base+path, rd)
	if err != nil {
		return crashReply{}, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.client.Do(req)
	if err != nil {
		return crashReply{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return crashReply{}, err
	}
	return crashReply{resp.StatusCode, resp.Header, b}, nil
}

// crashLog collects a child's output (bounded) for failure messages.
type crashLog struct {
	mu sync.Mutex
	b  []byte
}

func (l *crashLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.b = append(l.b, p...)
	if len(l.b) > 1<<20 {
		l.b = append(l.b[:0], l.b[len(l.b)-(1<<19):]...)
	}
	return len(p), nil
}

func (l *crashLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return string(l.b)
}

// crashChain is the verified view of one room's chain.
type crashChain struct {
	id   string
	raws [][]byte    // verified record bytes, index seq-1
	st   *room.State // replay of raws
}

type crashLoc struct {
	room string
	seq  int64
}

// crashAck is an acknowledged write: the node answered 2xx with this record.
type crashAck struct {
	room  string
	seq   int64
	hash  string
	env   string // envelope hash
	round int
}

// crashSent is a write whose answer never arrived (in flight at the kill).
type crashSent struct {
	raw    []byte
	env    string
	room   string // "" for room.create
	typ    string
	writer string
}

type crashHarness struct {
	t       *testing.T
	bin     string
	cfg     string
	data    string
	creator *adptest.Agent
	writers []*adptest.Agent
	main    []string // rooms the writers share
	// publicURL, when set, is passed as --public-url so that the origin
	// (JWT audience, Room URLs) survives restarts on new ports.
	publicURL string
	// extraArgs replace the default --p2p-listen arguments of serve.
	extraArgs []string

	// Verified state, touched only by the test goroutine.
	chains map[string]*crashChain
	envs   map[string]crashLoc        // envelope hash -> record
	nonces map[identity.AgentID]int64 // highest nonce in the chains
	sent   map[string]bool            // envelope hashes ever in flight at a kill

	mu       sync.Mutex // guards the fields below while writers run
	acks     []crashAck
	inflight []crashSent
	problems []string
	round    int

	stats struct {
		ackChecks, verified, compared int
		present, absent, retried      int
		slowestStart                  time.Duration
	}
}

func (h *crashHarness) ack(a crashAck) {
	h.mu.Lock()
	a.round = h.round
	h.acks = append(h.acks, a)
	h.mu.Unlock()
}

func (h *crashHarness) problem(format string, args ...any) {
	h.mu.Lock()
	h.problems = append(h.problems, fmt.Sprintf(format, args...))
	h.mu.Unlock()
}

// start runs adpnode on a free 127.0.0.1 port over the data directory and
// waits until it is ready.
func (h *crashHarness) start() *crashChild {
	t := h.t
	t.Helper()
	began := time.Now()
	for attempt := 0; ; attempt++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		args := []string{"serve", "--config", h.cfg, "--listen", addr, "--data", h.data}
		if h.publicURL != "" {
			args = append(args, "--public-url", h.publicURL)
		}
		if h.extraArgs != nil {
			args = append(args, h.extraArgs...)
		} else {
			args = append(args, "--p2p-listen", "/ip4/127.0.0.1/tcp/0")
		}
		cmd := exec.Command(h.bin, args...)
		c := &crashChild{cmd: cmd, base: "http://" + addr, done: make(chan struct{}), log: &crashLog{},
			client: &http.Client{Timeout: 15 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}}
		cmd.Stdout, cmd.Stderr = c.log, c.log
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go func() { cmd.Wait(); close(c.done) }()
		t.Cleanup(c.kill)
		deadline := time.Now().Add(60 * time.Second)
		for !c.exited() && time.Now().Before(deadline) {
			if r, err := c.do(http.MethodGet, "/readyz", "", nil); err == nil && r.status == http.StatusOK {
				if d := time.Since(began); d > h.stats.slowestStart {
					h.stats.slowestStart = d
				}
				return c
			}
			time.Sleep(10 * time.Millisecond)
		}
		c.kill()
		if strings.Contains(c.log.String(), "address already in use") && attempt < 5 {
			continue // the free port was taken meanwhile
		}
		t.Fatalf("adpnode did not become ready (%v):\n%s", c.cmd.ProcessState, c.log.String())
	}
}

// checkLog fails on error-level log lines or panics of a finished child.
func (h *crashHarness) checkLog(c *crashChild) {
	h.t.Helper()
	for _, line := range strings.Split(c.log.String(), "\n") {
		if strings.Contains(line, `"level":"ERROR"`) || strings.HasPrefix(line, "panic:") || strings.HasPrefix(line, "fatal error:") {
			h.t.Errorf("adpnode logged: %s", line)
		}
	}
}

func (h *crashHarness) token(c *crashChild, a *adptest.Agent) string {
	return a.Token(c.base, time.Now().UnixMilli())
}

// setup creates the shared rooms (before the first kill).
func (h *crashHarness) setup(c *crashChild) {
	for i := range crashRooms {
		id, _, ok := h.create(c, fmt.Sprintf("crash room %d", i))
		if !ok {
			h.t.Fatalf("create room %d: %v", i, h.problems)
		}
		h.main = append(h.main, id)
	}
}

func roomPayload(topic string) map[string]any {
	now := time.Now().UnixMilli()
	return map[string]any{"topic": topic, "visibility": "public", "start_time": now, "end_time": now + 3_600_000}
}

// create submits room.create as the creator. ok is false when the node did
// not answer (the write is then recorded as in flight) or refused it.
func (h *crashHarness) create(c *crashChild, topic string) (string, adptest.Head, bool) {
	env, err := identity.Sign(h.creator.Key, h.creator.Event(time.Now().UnixMilli(), "room.create", "", 0, "", roomPayload(topic)))
	if err != nil {
		panic(err)
	}
	r, err := c.do(http.MethodPost, "/v1/rooms", "", env.Raw)
	if err != nil {
		h.mu.Lock()
		h.inflight = append(h.inflight, crashSent{raw: env.Raw, env: env.Hash, typ: "room.create", writer: h.creator.Name})
		h.mu.Unlock()
		return "", adptest.Head{}, false
	}
	if r.status != http.StatusCreated {
		h.problem("room.create: %s", r)
		return "", adptest.Head{}, false
	}
	id, head, err := parseCreated(r.body)
	if err != nil || head.Seq != 1 {
		h.problem("room.create answer %s: %v", r, err)
		return "", adptest.Head{}, false
	}
	h.ack(crashAck{room: id, seq: 1, hash: head.Hash, env: env.Hash})
	return id, head, true
}

func parseCreated(body []byte) (string, adptest.Head, error) {
	var out struct {
		ID   string `json:"id"`
		Seq  int64  `json:"seq"`
		Hash string `json:"hash"`
	}
	if err := json.Unmarshal(body, &out); err != nil {
		return "", adptest.Head{}, err
	}
	if !record.ValidRoomID(out.ID) {
		return "", adptest.Head{}, fmt.Errorf("bad room id %q", out.ID)
	}
	return out.ID, adptest.Head{Seq: out.Seq, Hash: out.Hash}, nil
}

// crashView is what writers share about one room during a round.
type crashView struct {
	mu   sync.Mutex
	head adptest.Head // the head as last seen (CAS base for messages)
	last adptest.Head // the newest accepted record seen (signal anchor)
}

func (v *crashView) get() (head, last adptest.Head) {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.head, v.last
}

func (v *crashView) saw(rec adptest.Head, advancesHead bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if rec.Seq > v.last.Seq {
		v.last = rec
	}
	if advancesHead && rec.Seq > v.head.Seq {
		v.head = rec
	}
}

// submit posts one event by a to roomID. It returns the accepted record, or
// nil with the refusal; ok is false when no answer arrived, in which case
// the write is recorded as in flight.
func (h *crashHarness) submit(c *crashChild, a *adptest.Agent, roomID, typ string, base adptest.Head, payload any) (rec *record.Record, r crashReply, ok bool) {
	env, err := identity.Sign(a.Key, a.Event(time.Now().UnixMilli(), typ, roomID, base.Seq, base.Hash, payload))
	if err != nil {
		panic(err)
	}
	r, err = c.do(http.MethodPost, "/v1/rooms/"+roomID, "", env.Raw)
	if err != nil {
		h.mu.Lock()
		h.inflight = append(h.inflight, crashSent{raw: env.Raw, env: env.Hash, room: roomID, typ: typ, writer: a.Name})
		h.mu.Unlock()
		return nil, r, false
	}
	if r.status != http.StatusCreated {
		return nil, r, true
	}
	rec, renv, err := record.Parse(bytes.TrimSpace(r.body))
	if err != nil || rec.RoomID != roomID || renv.Hash != env.Hash {
		h.problem("%s by %s: answer is not the record of the write: %v: %s", typ, a.Name, err, r)
		return nil, r, true
	}
	h.ack(crashAck{room: roomID, seq: rec.Seq, hash: rec.Hash, env: env.Hash})
	return rec, r, true
}

// readHead re-reads a room's head after a head mismatch.
func (h *crashHarness) readHead(c *crashChild, roomID string) (adptest.Head, bool) {
	r, err := c.do(http.MethodGet, "/v1/rooms/"+roomID, "", nil)
	if err != nil {
		return adptest.Head{}, false
	}
	var res struct {
		Head adptest.Head `json:"head"`
	}
	if r.status != http.StatusOK || json.Unmarshal(r.body, &res) != nil {
		h.problem("get room %s: %s", roomID, r)
		return adptest.Head{}, false
	}
	return res.Head, true
}

// runRound runs the writers against c and SIGKILLs it after delay.
func (h *crashHarness) runRound(c *crashChild, round int, delay time.Duration, rng *rand.Rand) {
	t := h.t
	h.mu.Lock()
	h.round, h.inflight, h.problems = round, nil, nil
	before := len(h.acks)
	h.mu.Unlock()

	views := map[string]*crashView{}
	for _, id := range h.main {
		st := h.chains[id].st
		views[id] = &crashView{head: adptest.Head(st.Head), last: adptest.Head{Seq: st.Seq, Hash: st.LastHash}}
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, a := range h.writers {
		member := map[string]bool{}
		for _, id := range h.main {
			member[id] = h.chains[id].st.IsActiveMember(a.ID)
		}
		wrng := rand.New(rand.NewPCG(rng.Uint64(), rng.Uint64()))
		wg.Add(1)
		go func() {
			defer wg.Done()
			h.writer(c, a, member, views, wrng, stop)
		}()
	}
	createAt := time.Duration(rng.Int64N(int64(delay)))
	wg.Add(1)
	go func() {
		defer wg.Done()
		h.creatorLoop(c, round, createAt, stop)
	}()

	time.Sleep(delay)
	if c.exited() {
		t.Fatalf("round %d: adpnode exited before the kill (%v):\n%s", round, c.cmd.ProcessState, c.log.String())
	}
	if err := c.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-c.done
	close(stop)
	wg.Wait()
	c.client.CloseIdleConnections()
	if ws, ok := c.cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Errorf("round %d: adpnode ended with %v, not by the SIGKILL", round, c.cmd.ProcessState)
	}
	h.checkLog(c)

	h.mu.Lock()
	defer h.mu.Unlock()
	for _, p := range h.problems {
		t.Errorf("round %d: %s", round, p)
	}
	t.Logf("round %d: killed after %v: %d writes acknowledged, %d in flight", round, delay, len(h.acks)-before, len(h.inflight))
}

// writer is one agent writing as fast as it can: it joins the shared rooms,
// posts messages on the head (re-reading it on room_head_mismatch) and
// leaves and rejoins, until the node stops answering.
func (h *crashHarness) writer(c *crashChild, a *adptest.Agent, member map[string]bool, views map[string]*crashView, rng *rand.Rand, stop <-chan struct{}) {
	for n := 0; ; n++ {
		select {
		case <-stop:
			return
		default:
		}
		roomID := h.main[rng.IntN(len(h.main))]
		v := views[roomID]
		head, last := v.get()
		var typ string
		var base adptest.Head
		var payload any
		switch {
		case !member[roomID]:
			typ, base, payload = "room.join", last, map[string]any{"role": "speaker"}
		case rng.IntN(5) == 0:
			typ, base, payload = "room.leave", last, map[string]any{"reason": "cycling"}
		default:
			typ, base = "message.create", head
			payload = map[string]any{"content_type": "text/plain", "content": fmt.Sprintf("%s #%d", a.Name, n)}
		}
		rec, r, ok := h.submit(c, a, roomID, typ, base, payload)
		if !ok {
			return
		}
		if rec != nil {
			v.saw(adptest.Head{Seq: rec.Seq, Hash: rec.Hash}, typ == "message.create")
			switch typ {
			case "room.join":
				member[roomID] = true
			case "room.leave":
				member[roomID] = false
			}
			continue
		}
		code, reason := r.errCode()
		switch {
		case code == "room_head_mismatch":
			hd, ok := h.readHead(c, roomID)
			if !ok {
				return
			}
			v.saw(hd, true)
		case code == "permission_denied" && reason == "already_member":
			member[roomID] = true
		case code == "permission_denied" && reason == "not_member":
			member[roomID] = false
		default:
			h.problem("%s by %s in %s: unexpected refusal %s", typ, a.Name, roomID, r)
			return
		}
	}
}

// creatorLoop creates this round's room at a random moment before the kill,
// then posts messages into it.
func (h *crashHarness) creatorLoop(c *crashChild, round int, at time.Duration, stop <-chan struct{}) {
	select {
	case <-stop:
		return
	case <-time.After(at):
	}
	id, head, ok := h.create(c, fmt.Sprintf("crash round %d", round))
	if !ok {
		return
	}
	for n := 0; ; n++ {
		select {
		case <-stop:
			return
		default:
		}
		payload := map[string]any{"content_type": "text/plain", "content": fmt.Sprintf("round %d #%d", round, n)}
		rec, r, ok := h.submit(c, h.creator, id, "message.create", head, payload)
		if !ok {
			return
		}
		if rec == nil {
			h.problem("message.create by the creator of %s: %s", id, r)
			return
		}
		head = adptest.Head{Seq: rec.Seq, Hash: rec.Hash}
	}
}

// verify checks everything the node holds against what was acknowledged and
// what was in flight (see the comment at the top of the file).
func (h *crashHarness) verify(c *crashChild) {
	t := h.t
	fatal := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("round %d: "+format, append([]any{h.round}, args...)...)
	}
	get := func(path, token string) crashReply {
		t.Helper()
		r, err := c.do(http.MethodGet, path, token, nil)
		if err != nil {
			fatal("GET %s: %v\n%s", path, err, c.log.String())
		}
		if r.status != http.StatusOK {
			fatal("GET %s: %s", path, r)
		}
		return r
	}

	// The rooms the node has: the creator created every one of them.
	listed := map[string]bool{}
	for cursor := ""; ; {
		path := "/v1/me/rooms?membership=creator&limit=200"
		if cursor != "" {
			path += "&cursor=" + cursor
		}
		var page struct {
			Result []struct {
				ID string `json:"id"`
			} `json:"result"`
			Next string `json:"next_cursor"`
		}
		if err := json.Unmarshal(get(path, h.token(c, h.creator)).body, &page); err != nil {
			fatal("me/rooms: %v", err)
		}
		for _, r := range page.Result {
			listed[r.ID] = true
		}
		if cursor = page.Next; cursor == "" {
			break
		}
	}
	for id := range h.chains {
		if !listed[id] {
			t.Errorf("round %d: room %s (verified before) is gone after the restart", h.round, id)
		}
	}

	// Every chain: unchanged prefix, verified suffix, resource agrees.
	for id := range listed {
		var raws [][]byte
		for cursor := ""; ; {
			path := "/v1/rooms/" + id + "/events?limit=250"
			if cursor != "" {
				path += "&cursor=" + cursor
			}
			var page struct {
				Result []json.RawMessage `json:"result"`
				Next   string            `json:"next_cursor"`
			}
			if err := json.Unmarshal(get(path, "").body, &page); err != nil {
				fatal("events of %s: %v", id, err)
			}
			for _, r := range page.Result {
				raws = append(raws, r)
			}
			if cursor = page.Next; cursor == "" {
				break
			}
		}
		ch := h.chains[id]
		if ch == nil {
			ch = &crashChain{id: id, st: room.New(room.Config{Limits: room.DefaultLimits()})}
			h.chains[id] = ch
		}
		if len(raws) < len(ch.raws) {
			t.Errorf("round %d: room %s lost records: %d after the restart, %d before", h.round, id, len(raws), len(ch.raws))
		}
		for i := range min(len(raws), len(ch.raws)) {
			if !bytes.Equal(raws[i], ch.raws[i]) {
				fatal("room %s seq %d changed across the restart:\nbefore %s\nafter  %s", id, i+1, ch.raws[i], raws[i])
			}
			h.stats.compared++
		}
		for i := len(ch.raws); i < len(raws); i++ {
			rec, env, err := record.Parse(raws[i])
			if err != nil {
				fatal("room %s record %d does not verify: %v\n%s", id, i+1, err, raws[i])
			}
			if rec.RoomID != id || rec.Seq != int64(i+1) {
				fatal("room %s: record %d of the listing is room %s seq %d (gap or duplicate)", id, i+1, rec.RoomID, rec.Seq)
			}
			if err := ch.st.Apply(rec, env, nil); err != nil {
				fatal("room %s seq %d does not continue the chain: %v", id, rec.Seq, err)
			}
			if prev, dup := h.envs[env.Hash]; dup {
				fatal("envelope %s is recorded twice: room %s seq %d and room %s seq %d", env.Hash, prev.room, prev.seq, id, rec.Seq)
			}
			h.envs[env.Hash] = crashLoc{id, rec.Seq}
			if ev := env.Event; ev.Nonce > h.nonces[ev.Actor] {
				h.nonces[ev.Actor] = ev.Nonce
			}
			ch.raws = append(ch.raws, raws[i])
			h.stats.verified++
		}
		var res struct {
			Seq     int64        `json:"seq"`
			Hash    string       `json:"hash"`
			PreHash *string      `json:"pre_hash"`
			Head    adptest.Head `json:"head"`
		}
		if err := json.Unmarshal(get("/v1/rooms/"+id, "").body, &res); err != nil {
			fatal("room %s: %v", id, err)
		}
		st := ch.st
		if res.Seq != st.Seq || res.Hash != st.LastHash || res.Head != adptest.Head(st.Head) {
			t.Errorf("round %d: room %s resource says seq %d hash %s head %+v; the chain ends at seq %d hash %s head %+v",
				h.round, id, res.Seq, res.Hash, res.Head, st.Seq, st.LastHash, st.Head)
		}
	}

	// Every acknowledged write is there, unchanged.
	h.mu.Lock()
	acks, inflight := h.acks, h.inflight
	h.inflight = nil
	h.mu.Unlock()
	for _, a := range acks {
		h.stats.ackChecks++
		loc, ok := h.envs[a.env]
		switch {
		case !ok:
			t.Errorf("round %d: write acknowledged in round %d (room %s seq %d) is missing after the restart", h.round, a.round, a.room, a.seq)
		case loc != crashLoc{a.room, a.seq}:
			t.Errorf("round %d: write acknowledged in round %d as room %s seq %d is now room %s seq %d", h.round, a.round, a.room, a.seq, loc.room, loc.seq)
		default:
			if hash, _, _ := h.chains[a.room].st.RecordHash(a.seq); hash != a.hash {
				t.Errorf("round %d: room %s seq %d has hash %s; acknowledged in round %d as %s", h.round, a.room, a.seq, hash, a.round, a.hash)
			}
		}
	}
	for _, s := range inflight {
		h.sent[s.env] = true
	}
	for id, ch := range h.chains {
		if len(ch.raws) == 0 {
			t.Errorf("round %d: room %s is listed but has no records", h.round, id)
		}
	}

	// Every record (room.create included, so every room) is a write of this
	// test: acknowledged, or in flight at some kill (and then checked below
	// or in an earlier round to be wholly present).
	acked := make(map[string]bool, len(acks))
	for _, a := range acks {
		acked[a.env] = true
	}
	for env, loc := range h.envs {
		if !acked[env] && !h.sent[env] {
			t.Errorf("round %d: room %s seq %d holds envelope %s that was neither acknowledged nor in flight at a kill", h.round, loc.room, loc.seq, env)
		}
	}

	// The persisted nonce of each agent is exactly the highest nonce of its
	// records: a same-nonce write is refused with that Max-Seen-Nonce.
	for _, a := range append([]*adptest.Agent{h.creator}, h.writers...) {
		max, ok := h.nonces[a.ID]
		if !ok {
			continue
		}
		roomID := h.main[0]
		st := h.chains[roomID].st
		ev := a.Event(time.Now().UnixMilli(), "message.create", roomID, st.Head.Seq, st.Head.Hash,
			map[string]any{"content_type": "text/plain", "content": "replayed nonce"})
		ev.Nonce = max
		r, err := c.do(http.MethodPost, "/v1/rooms/"+roomID, "", a.Sign(ev))
		if err != nil {
			fatal("nonce probe: %v", err)
		}
		if code, _ := r.errCode(); code != "nonce_not_greater" || r.header.Get("Max-Seen-Nonce") != strconv.FormatInt(max, 10) {
			t.Errorf("round %d: %s's highest recorded nonce is %d, but a write with it got %s (Max-Seen-Nonce %q)",
				h.round, a.Name, max, r, r.header.Get("Max-Seen-Nonce"))
		}
	}

	// Writes in flight at the kill: wholly present or wholly absent. An exact
	// resubmission is answered from the envelope index: 200 with the record
	// iff the record is in the chain.
	for _, s := range inflight {
		path := "/v1/rooms"
		if s.room != "" {
			path += "/" + s.room
		}
		loc, present := h.envs[s.env]
		r, err := c.do(http.MethodPost, path, "", s.raw)
		if err != nil {
			fatal("resubmit: %v", err)
		}
		if present {
			h.stats.present++
			want, _, _ := h.chains[loc.room].st.RecordHash(loc.seq)
			var got crashLoc
			var hash string
			if s.typ == "room.create" {
				id, head, err := parseCreated(r.body)
				if err != nil {
					t.Errorf("round %d: resubmitted room.create: %v: %s", h.round, err, r)
				}
				got, hash = crashLoc{id, head.Seq}, head.Hash
			} else if rec, _, err := record.Parse(bytes.TrimSpace(r.body)); err == nil {
				got, hash = crashLoc{rec.RoomID, rec.Seq}, rec.Hash
			}
			if r.status != http.StatusOK || got != loc || hash != want {
				t.Errorf("round %d: %s by %s in flight at the kill is room %s seq %d, but its resubmission got %s",
					h.round, s.typ, s.writer, loc.room, loc.seq, r)
			}
			continue
		}
		h.stats.absent++
		switch {
		case r.status == http.StatusCreated:
			// Absent, so the resubmission is a first acceptance.
			h.stats.retried++
			if s.typ == "room.create" {
				id, head, err := parseCreated(r.body)
				if err != nil {
					t.Errorf("round %d: resubmitted room.create: %v: %s", h.round, err, r)
					continue
				}
				h.ack(crashAck{room: id, seq: head.Seq, hash: head.Hash, env: s.env})
			} else {
				rec, env, err := record.Parse(bytes.TrimSpace(r.body))
				if err != nil || env.Hash != s.env {
					t.Errorf("round %d: resubmitted %s: %v: %s", h.round, s.typ, err, r)
					continue
				}
				h.ack(crashAck{room: rec.RoomID, seq: rec.Seq, hash: rec.Hash, env: s.env})
			}
		case r.status == http.StatusOK || r.status >= 500 || r.errCodeIs("nonce_not_greater"):
			t.Errorf("round %d: %s by %s in flight at the kill has no record, but its resubmission got %s",
				h.round, s.typ, s.writer, r)
		}
	}
}
