//go:build linux && e2e

package node_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/adpnode/adpnode/adp/identity"
	"github.com/adpnode/adpnode/adp/record"
	"github.com/adpnode/adpnode/adp/room"
	"github.com/adpnode/adpnode/adp/types"
	"github.com/adpnode/adpnode/internal/adptest"
	"github.com/adpnode/adpnode/internal/testwait"
)

// Recovery property: a node in a child process is driven by a
// seeded random sequence of every kind of event and flow of the spec —
// public, restricted and private rooms with policies, direct joins, join
// requests approved, rejected, expired and consumed, role updates, leaves,
// removals with and without ban, pre-emptive bans and bans lifted by an
// approving review, every built-in type, type.define, registered packs and
// an external pack, agent status, scheduled → active → ended rooms, cancel
// and close, plus forged reviews and malformed payloads that must be
// refused. A scripted tour runs every flow once (whatever the seed), then
// each round runs random actions and stops the node: SIGTERM while idle,
// SIGTERM while writers are in flight, or SIGKILL while they are (busy
// writers post messages and reactions and join and leave in rooms of their
// own). After every restart, for every room:
//
//   - the chain (every page of GET events) is byte for byte what was read
//     before the stop, plus only records of writes that were in flight
//     (every acknowledged one is there); and before each stop, the chain is
//     exactly the acknowledged writes (nothing the node did not answer 2xx
//     for);
//   - the room resource is what it was (status and ended_at are checked
//     against the status the chain and the clock give), and equals the
//     resource a kernel replay of the chain from scratch gives;
//   - the members list is what it was and what the replay gives;
//   - the join requests (the creator's list and each applicant's own view)
//     are what they were, up to expiry passing meanwhile;
//   - agent status, transient (§17.4, node/status.go), is never invented:
//     any status after the restart is one set before, of an active speaking
//     member;
//   - the host log holds every record of every chain exactly once, and
//     nothing else (recovery_hostlog_test.go);
//   - writes continue: a message by a member and a direct join succeed;
//   - the node is ready again (the wait for it is bounded; the time it
//     took is logged) and its RSS stays under 512 MB.
//
// At the end every ended room's archive is checked by `adpnode verify`,
// and the test's goroutines are back to where they were.
//
//
// ADPNODE_RECOVERY_SEED repeats a run; ADPNODE_RECOVERY_ROUNDS sets the
// number of stops (default 10, under 90 s with -race on 2 cores).

const (
	propDefaultRounds = 10
	propSteps         = 45 // random actions per round (mean)
	propAgents        = 7
	propMaxRooms      = 18
	propJoinTTL       = 4 * time.Second
	propBusyWriters   = 3
)

func TestRecoveryProperty(t *testing.T) {
	if testing.Short() {
		t.Skip("builds adpnode and restarts it repeatedly; skipped with -short")
	}
	began := time.Now()
	goroutines := runtime.NumGoroutine()
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("ADPNODE_RECOVERY_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("ADPNODE_RECOVERY_SEED: %v", err)
		}
		seed = v
	}
	rounds := propDefaultRounds
	if s := os.Getenv("ADPNODE_RECOVERY_ROUNDS"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 1 {
			t.Fatalf("ADPNODE_RECOVERY_ROUNDS: %q", s)
		}
		rounds = v
	}
	t.Logf("seed %d (set ADPNODE_RECOVERY_SEED to repeat), %d rounds", seed, rounds)
	defer func() {
		if t.Failed() {
			t.Logf("failed with seed %d: ADPNODE_RECOVERY_SEED=%d go test -run TestRecoveryProperty ./node", seed, seed)
		}
	}()

	// The external pack: served until the first restart, then gone, so
	// that recovery and later declarations must use the node's cache.
	var packGone atomic.Bool
	var packFetches atomic.Int32
	packSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if packGone.Load() {
			http.Error(w, "gone", http.StatusGone)
			return
		}
		packFetches.Add(1)
		w.Write([]byte(triagePack))
	}))
	defer packSrv.Close()

	dir := t.TempDir()
	// The origin stays the same across restarts on new ports.
	origin := "http://recovery.adpnode.test"
	ch := &crashHarness{
		t: t, bin: buildAdpnode(t, dir), cfg: filepath.Join(dir, "adpnode.yaml"), data: filepath.Join(dir, "data"),
		publicURL: origin, extraArgs: []string{"--no-federation"},
	}
	cfg := "log_level: warn\nallow_private_packs: true\njoin_request_ttl: " + propJoinTTL.String() +
		"\nrates:\n  message: 0\n  signal: 0\n  control: 0\n  room_create: 0\n"
	if err := os.WriteFile(ch.cfg, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	h := &propHarness{t: t, ch: ch, origin: origin, rng: rand.New(rand.NewPCG(seed, 0x5851f42d4c957f2d)),
		packURL: packSrv.URL + "/triage.json", packDigest: types.Digest([]byte(triagePack))}
	for i := range propAgents {
		h.agents = append(h.agents, adptest.NewAgent(fmt.Sprintf("recovery-agent-%d", i)))
	}
	h.c = ch.start()
	h.anchorRoom()
	h.tour()

	for round := 1; round <= rounds; round++ {
		h.round = round
		steps := propSteps/2 + h.rng.IntN(propSteps)
		for range steps {
			h.step()
		}
		if t.Failed() {
			t.FailNow()
		}
		// A graceful stop while idle, a graceful stop while writers are
		// in flight, or a SIGKILL while they are.
		mode := h.rng.IntN(3)
		var busy []*propRoom
		if mode > 0 {
			busy = h.busyRooms()
		}
		before := h.checkpoint()
		switch mode {
		case 0:
			h.stopGraceful()
		case 1:
			h.stopBusy(busy, syscall.SIGTERM)
		default:
			h.stopBusy(busy, syscall.SIGKILL)
		}
		packGone.Store(true)
		started := time.Now()
		h.c = ch.start()
		restart := time.Since(started) // a figure for the log: start's readiness wait bounds it
		h.checkRSS()
		h.compare(before, mode > 0)
		h.checkHostLog()
		h.writesContinue()
		if t.Failed() {
			t.FailNow()
		}
		how := []string{"SIGTERM idle", "SIGTERM busy", "SIGKILL busy"}[mode]
		t.Logf("round %d: %d actions, %s, restart %v, %d rooms, %d records", round, steps, how,
			restart.Round(time.Millisecond), len(h.rooms), h.records())
	}
	h.verifyArchives()
	h.stopGraceful()
	if n := runtime.NumGoroutine(); n > goroutines+5 {
		t.Errorf("%d goroutines at the end, %d at the start", n, goroutines)
	}
	var kinds []string
	for k, n := range h.accepted {
		kinds = append(kinds, fmt.Sprintf("%s:%d", k, n))
	}
	t.Logf("%d rounds in %v; accepted %v; %d refused; external pack fetched %d times; %d in flight at kills (%d landed); %d archives verified",
		rounds, time.Since(began).Round(time.Millisecond), kinds, h.refused, packFetches.Load(), h.inflightN, h.landed, h.archives)
	if testing.Verbose() {
		t.Logf("refusals by type and code: %v", h.refusals)
	}
	t.Logf("%d members' perspectives came from auto-approved requests (kept across restarts; not in the chain)", h.gaps)
}

// propHarness drives one node process and keeps the model: each room's
// chain as acknowledged, replayed through the kernel.
type propHarness struct {
	t      *testing.T
	ch     *crashHarness
	c      *crashChild
	origin string
	rng    *rand.Rand
	round  int
	agents []*adptest.Agent
	rooms  []*propRoom
	fresh  int // agents created for "writes continue"
	busy   []*propRoom
	tokens map[*adptest.Agent]propToken

	packURL, packDigest string

	// Writes of the busy writers of the current SIGKILL round: every one
	// sent (in flight until answered) and the acknowledged ones.
	inflight, acked []string

	accepted  map[string]int
	gaps      int // members whose perspective only the join-request store holds
	refusals  map[string]int
	refused   int
	inflightN int
	landed    int
	archives  int
}

type propRoom struct {
	id      string
	creator *adptest.Agent
	anchor  bool // never closed or cancelled: writes always continue here
	busy    bool // written only by a busy writer
	st      *room.State
	raws    [][]byte // record bytes as the events listing gives them
	reqs    []*propReq

	decided map[string]bool  // join request ids a room.join.review decided
	joinReq map[int64]string // seq of a room.join -> its request_id
}

type propReq struct {
	id        string
	applicant *adptest.Agent
	fact      json.RawMessage
	role      string
	created   time.Time
	pending   bool // created pending (not auto-approved)
}

// pickReq picks a join request of pr: mostly a live one (younger than the
// TTL) that live(jr) accepts, else any.
func (h *propHarness) pickReq(pr *propRoom, live func(*propReq) bool) *propReq {
	var fresh []*propReq
	for _, jr := range pr.reqs {
		if time.Since(jr.created) < propJoinTTL && live(jr) {
			fresh = append(fresh, jr)
		}
	}
	if len(fresh) > 0 && h.rng.IntN(4) > 0 {
		return fresh[h.rng.IntN(len(fresh))]
	}
	return pr.reqs[h.rng.IntN(len(pr.reqs))]
}

// propPacks serves the external pack to kernel replays.
type propPacks struct{ digest string }

func (p propPacks) ExternalPack(uri, digest string) ([]byte, error) {
	if digest != p.digest {
		return nil, fmt.Errorf("no pack %s", digest)
	}
	return []byte(triagePack), nil
}

func (h *propHarness) newState() *room.State {
	return room.New(room.Config{Limits: room.DefaultLimits(), Packs: propPacks{h.packDigest}})
}

func (h *propHarness) records() int {
	n := 0
	for _, r := range h.rooms {
		n += len(r.raws)
	}
	return n
}

type propToken struct {
	tok    string
	minted time.Time
}

// token returns a request JWT for a, reused for a minute (it is valid for
// two).
func (h *propHarness) token(a *adptest.Agent) string {
	if t, ok := h.tokens[a]; ok && time.Since(t.minted) < time.Minute {
		return t.tok
	}
	if h.tokens == nil {
		h.tokens = map[*adptest.Agent]propToken{}
	}
	now := time.Now()
	tok := a.Token(h.origin, now.UnixMilli())
	h.tokens[a] = propToken{tok, now}
	return tok
}

// get reads path as a (nil: anonymously) and fails the test unless 200.
func (h *propHarness) get(a *adptest.Agent, path string) []byte {
	h.t.Helper()
	r := h.getAny(a, path)
	if r.status != http.StatusOK {
		h.t.Fatalf("round %d: GET %s: %s", h.round, path, r)
	}
	return r.body
}

func (h *propHarness) getAny(a *adptest.Agent, path string) crashReply {
	h.t.Helper()
	tok := ""
	if a != nil {
		tok = h.token(a)
	}
	r, err := h.c.do(http.MethodGet, path, tok, nil)
	if err != nil {
		h.t.Fatalf("round %d: GET %s: %v\n%s", h.round, path, err, h.c.log.String())
	}
	return r
}

func (h *propHarness) send(method, path string, a *adptest.Agent, body []byte) crashReply {
	h.t.Helper()
	tok := ""
	if a != nil {
		tok = h.token(a)
	}
	r, err := h.c.do(method, path, tok, body)
	if err != nil {
		h.t.Fatalf("round %d: %s %s: %v\n%s", h.round, method, path, err, h.c.log.String())
	}
	return r
}

// ---- writes ----

func (h *propHarness) count(kind string) {
	if h.accepted == nil {
		h.accepted = map[string]int{}
	}
	h.accepted[kind]++
}

// create submits room.create; on 201 the room joins the model.
func (h *propHarness) create(a *adptest.Agent, payload map[string]any) *propRoom {
	h.t.Helper()
	r := h.send(http.MethodPost, "/v1/rooms", nil, a.Envelope(time.Now().UnixMilli(), "room.create", "", 0, "", payload))
	if r.status != http.StatusCreated {
		h.refused++
		return nil
	}
	id, head, err := parseCreated(r.body)
	if err != nil || head.Seq != 1 {
		h.t.Fatalf("room.create answer %s: %v", r, err)
	}
	pr := &propRoom{id: id, creator: a, st: h.newState()}
	h.rooms = append(h.rooms, pr)
	h.pull(pr, h.c)
	if len(pr.raws) != 1 || pr.st.LastHash != head.Hash {
		h.t.Fatalf("room %s after create: %d records, hash %s, answered %s", id, len(pr.raws), pr.st.LastHash, head.Hash)
	}
	h.count("room.create")
	return pr
}

// pull reads records after the model's last seq and applies them; it
// returns the raw records read.
func (h *propHarness) pull(pr *propRoom, c *crashChild) [][]byte {
	h.t.Helper()
	var got [][]byte
	for cursor := ""; ; {
		path := fmt.Sprintf("/v1/rooms/%s/events?limit=250&after_seq=%d", pr.id, len(pr.raws))
		if cursor != "" {
			path += "&cursor=" + cursor
		}
		var page struct {
			Result []json.RawMessage `json:"result"`
			Next   string            `json:"next_cursor"`
		}
		if err := json.Unmarshal(h.get(pr.creator, path), &page); err != nil {
			h.t.Fatalf("events of %s: %v", pr.id, err)
		}
		for _, raw := range page.Result {
			got = append(got, raw)
		}
		if cursor = page.Next; cursor == "" {
			break
		}
	}
	for _, raw := range got {
		h.apply(pr, raw)
	}
	return got
}

// apply verifies one record of the listing and replays it into the model.
func (h *propHarness) apply(pr *propRoom, raw []byte) {
	h.t.Helper()
	rec, env, err := record.Parse(raw)
	if err != nil {
		h.t.Fatalf("round %d: room %s record %d does not verify: %v\n%s", h.round, pr.id, len(pr.raws)+1, err, raw)
	}
	if rec.RoomID != pr.id || rec.Seq != int64(len(pr.raws)+1) {
		h.t.Fatalf("round %d: room %s: listing entry %d is room %s seq %d", h.round, pr.id, len(pr.raws)+1, rec.RoomID, rec.Seq)
	}
	if err := pr.st.Apply(rec, env, nil); err != nil {
		h.t.Fatalf("round %d: room %s seq %d (%s) does not replay from the chain alone: %v", h.round, pr.id, rec.Seq, env.Event.Type, err)
	}
	pr.raws = append(pr.raws, bytes.Clone(raw))
	var p struct {
		RequestID string `json:"request_id"`
		Request   struct {
			ID string `json:"id"`
		} `json:"request"`
	}
	json.Unmarshal(env.Event.Payload, &p)
	switch env.Event.Type {
	case "room.join.review":
		if pr.decided == nil {
			pr.decided = map[string]bool{}
		}
		pr.decided[p.Request.ID] = true
	case "room.join":
		if p.RequestID != "" {
			if pr.joinReq == nil {
				pr.joinReq = map[int64]string{}
			}
			pr.joinReq[rec.Seq] = p.RequestID
		}
	}
}

// post submits an event on the model's head. ok is a 201; the record then
// is in the model.
func (h *propHarness) post(a *adptest.Agent, pr *propRoom, typ string, payload any, mentions []string) (crashReply, bool) {
	h.t.Helper()
	ev := a.Event(time.Now().UnixMilli(), typ, pr.id, pr.st.Head.Seq, pr.st.Head.Hash, payload)
	ev.Mentions = mentions
	env, err := identity.Sign(a.Key, ev)
	if err != nil {
		h.t.Fatal(err)
	}
	r := h.send(http.MethodPost, "/v1/rooms/"+pr.id, nil, env.Raw)
	if r.status != http.StatusCreated {
		if r.status >= 500 {
			h.t.Errorf("round %d: %s by %s in %s: %s", h.round, typ, a.Name, pr.id, r)
		}
		h.refused++
		if h.refusals == nil {
			h.refusals = map[string]int{}
		}
		code, reason := r.errCode()
		h.refusals[typ+":"+code+"/"+reason]++
		return r, false
	}
	rec, renv, err := record.Parse(bytes.TrimSpace(r.body))
	if err != nil || renv.Hash != env.Hash {
		h.t.Fatalf("round %d: %s answer is not the record of the write: %v: %s", h.round, typ, err, r)
	}
	h.pull(pr, h.c)
	if int64(len(pr.raws)) < rec.Seq {
		h.t.Fatalf("round %d: acknowledged %s seq %d is not in the listing", h.round, typ, rec.Seq)
	}
	if got, _, _ := pr.st.RecordHash(rec.Seq); got != rec.Hash {
		h.t.Fatalf("round %d: acknowledged %s seq %d hash %s, listing %s", h.round, typ, rec.Seq, rec.Hash, got)
	}
	h.count(typ)
	return r, true
}

// ---- the random driver ----

func (h *propHarness) pick() *adptest.Agent { return h.agents[h.rng.IntN(len(h.agents))] }

// pickRoom picks a room for the random driver (not a busy writer's).
func (h *propHarness) pickRoom() *propRoom {
	for {
		if pr := h.rooms[h.rng.IntN(len(h.rooms))]; !pr.busy {
			return pr
		}
	}
}

func (h *propHarness) role() string {
	return []string{"speaker", "speaker", "observer", "moderator"}[h.rng.IntN(4)]
}

// manager returns the creator or an active moderator, mostly; sometimes
// anyone (then the write should be refused).
func (h *propHarness) manager(pr *propRoom) *adptest.Agent {
	if h.rng.IntN(6) == 0 {
		return h.pick()
	}
	var mods []*adptest.Agent
	for _, a := range h.agents {
		if m, ok := pr.st.Member(a.ID); ok && m.Active && m.Role == "moderator" {
			mods = append(mods, a)
		}
	}
	if len(mods) == 0 || h.rng.IntN(2) == 0 {
		return pr.creator
	}
	return mods[h.rng.IntN(len(mods))]
}

// member returns an active member, mostly; sometimes anyone.
func (h *propHarness) member(pr *propRoom) *adptest.Agent {
	var ms []*adptest.Agent
	for _, a := range h.agents {
		if pr.st.IsActiveMember(a.ID) {
			ms = append(ms, a)
		}
	}
	if len(ms) == 0 || h.rng.IntN(8) == 0 {
		return h.pick()
	}
	return ms[h.rng.IntN(len(ms))]
}

func (h *propHarness) someIDs(n int) []string {
	var out []string
	for range n {
		out = append(out, string(h.pick().ID))
	}
	return out
}

// refs returns up to n record hashes of the room.
func (h *propHarness) refs(pr *propRoom, n int) []string {
	out := []string{}
	for range h.rng.IntN(n + 1) {
		if hash, ok, _ := pr.st.RecordHash(1 + h.rng.Int64N(pr.st.Seq)); ok && !contains(out, hash) {
			out = append(out, hash)
		}
	}
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func (h *propHarness) policy() map[string]any {
	p := map[string]any{}
	if h.rng.IntN(2) == 0 {
		p["moderator_agent_ids"] = h.someIDs(1 + h.rng.IntN(2))
	}
	if h.rng.IntN(3) == 0 {
		p["max_speakers"] = 2 + h.rng.IntN(4)
	}
	if h.rng.IntN(3) == 0 {
		p["observer_allowed"] = false
	}
	return p
}

func (h *propHarness) declarations() []any {
	var out []any
	for _, d := range []map[string]any{
		{"use": "adp:reactions/1.0"}, {"use": "adp:deliberation/1.0"},
		{"pack": h.packURL, "digest": h.packDigest},
		{"type": "note.flag", "kind": "signal", "title": "Flag", "schema": map[string]any{"type": "object"}},
	} {
		if h.rng.IntN(2) == 0 {
			out = append(out, d)
		}
	}
	return out
}

// anchorRoom creates the long-lived public room and its external pack use
// (while the pack server is up).
func (h *propHarness) anchorRoom() {
	now := time.Now().UnixMilli()
	pr := h.create(h.agents[0], map[string]any{"topic": "anchor", "visibility": "public", "start_time": now, "end_time": now + 6*3_600_000,
		"types": []any{map[string]any{"use": "adp:reactions/1.0"}, map[string]any{"pack": h.packURL, "digest": h.packDigest}}})
	if pr == nil {
		h.t.Fatal("anchor room refused")
	}
	pr.anchor = true
}

func (h *propHarness) createRandom() {
	now := time.Now().UnixMilli()
	start := now
	if h.rng.IntN(3) == 0 {
		start = now + 500 + h.rng.Int64N(4000) // scheduled, active a little later
	}
	p := map[string]any{"topic": fmt.Sprintf("room %d", len(h.rooms)),
		"visibility": []string{"public", "restricted", "private"}[h.rng.IntN(3)],
		"start_time": start, "end_time": start + 11*60_000 + h.rng.Int64N(3_600_000)}
	if pol := h.policy(); len(pol) > 0 {
		p["policy"] = pol
	}
	if d := h.declarations(); len(d) > 0 {
		p["types"] = d
	}
	if h.rng.IntN(3) == 0 {
		p["tags"] = []string{"prop", fmt.Sprint(h.round)}
		p["agenda"] = "agenda of round " + fmt.Sprint(h.round)
	}
	h.create(h.pick(), p)
}

// step runs one random action.
func (h *propHarness) step() {
	if len(h.rooms) < propMaxRooms && h.rng.IntN(12) == 0 {
		h.createRandom()
		return
	}
	pr := h.pickRoom()
	switch x := h.rng.IntN(100); {
	case x < 8: // room.update
		p := map[string]any{}
		switch h.rng.IntN(4) {
		case 0:
			p["topic"] = fmt.Sprintf("topic r%d", h.round)
		case 1:
			if !pr.anchor { // the anchor room keeps admitting joins
				p["policy"] = h.policy()
			} else {
				p["language"] = "en"
			}
		case 2:
			p["end_time"] = pr.st.EndTime + 60_000
		default:
			p["tags"] = []string{"updated"}
			p["guidance"] = "be brief"
		}
		h.post(h.manager(pr), pr, "room.update", p, nil)
	case x < 16: // direct join
		a := h.pick()
		p := map[string]any{"role": h.role()}
		if h.rng.IntN(2) == 0 {
			p["perspective"] = "direct " + a.Name
		}
		h.post(a, pr, "room.join", p, nil)
	case x < 26: // join request
		a := h.pick()
		body, _ := json.Marshal(map[string]any{"role": h.role(), "perspective": "applicant " + a.Name, "reason": "please"})
		r := h.send(http.MethodPost, "/v1/rooms/"+pr.id+"/join-requests", a, body)
		if r.status != http.StatusCreated {
			h.refused++
			return
		}
		var v struct {
			Request json.RawMessage `json:"request"`
			Status  string          `json:"status"`
		}
		var f struct {
			ID   string `json:"id"`
			Role string `json:"role"`
		}
		if json.Unmarshal(r.body, &v) != nil || json.Unmarshal(v.Request, &f) != nil || f.ID == "" {
			h.t.Fatalf("join request answer: %s", r)
		}
		pr.reqs = append(pr.reqs, &propReq{id: f.ID, applicant: a, fact: v.Request, role: f.Role, created: time.Now(), pending: v.Status == "pending"})
		h.count("join-request")
	case x < 36: // review
		if len(pr.reqs) == 0 {
			return
		}
		jr := h.pickReq(pr, func(jr *propReq) bool { return jr.pending && !pr.reviewed(jr.id) })
		p := map[string]any{"request": jr.fact, "decision": "reject", "reason": "review r" + fmt.Sprint(h.round)}
		if h.rng.IntN(3) > 0 {
			p["decision"], p["role"] = "approve", jr.role
			if h.rng.IntN(4) == 0 {
				p["role"] = h.role()
			}
		}
		h.post(h.manager(pr), pr, "room.join.review", p, nil)
	case x < 44: // join with a request
		if len(pr.reqs) == 0 {
			return
		}
		jr := h.pickReq(pr, func(jr *propReq) bool { return !pr.st.IsActiveMember(jr.applicant.ID) })
		role := jr.role
		if h.rng.IntN(5) == 0 {
			role = h.role()
		}
		a := jr.applicant
		if h.rng.IntN(8) == 0 {
			a = h.pick() // someone else's request
		}
		h.post(a, pr, "room.join", map[string]any{"role": role, "request_id": jr.id}, nil)
	case x < 47: // forged review: must be refused
		h.forgedReview(pr)
	case x < 52: // role update
		m := h.member(pr)
		h.post(h.manager(pr), pr, "room.member.role.update", map[string]any{"member": string(m.ID), "role": h.role(), "reason": "rotation"}, nil)
	case x < 56: // leave
		h.post(h.member(pr), pr, "room.leave", map[string]any{"reason": "done"}, nil)
	case x < 61: // remove, with or without ban; a ban of a non-member is pre-emptive
		target := h.pick()
		p := map[string]any{"member": string(target.ID), "ban": h.rng.IntN(2) == 0, "reason": "moderation"}
		if refs := h.refs(pr, 1); len(refs) > 0 {
			p["references"] = refs
		}
		h.post(h.manager(pr), pr, "room.member.remove", p, nil)
	case x < 76: // message.create with references and mentions
		p := map[string]any{"content_type": "text/plain", "content": fmt.Sprintf("message r%d", h.round)}
		if h.rng.IntN(3) == 0 {
			p["content_type"], p["content"] = "application/json", map[string]any{"n": h.rng.IntN(1000)}
		}
		if refs := h.refs(pr, 2); len(refs) > 0 {
			p["references"] = refs
		}
		var mentions []string
		if h.rng.IntN(2) == 0 {
			mentions = h.someIDs(1 + h.rng.IntN(2))
		}
		h.post(h.member(pr), pr, "message.create", p, mentions)
	case x < 84: // custom types
		a := h.member(pr)
		ref := pr.st.LastHash
		switch h.rng.IntN(5) {
		case 0:
			h.post(a, pr, "reaction.create", map[string]any{"event_id": ref, "reaction": "agree", "score": 0.5}, nil)
		case 1:
			h.post(a, pr, "question.create", map[string]any{"question": "why?", "references": []string{ref}}, nil)
		case 2:
			h.post(a, pr, "poll.create", map[string]any{"poll_id": fmt.Sprintf("p%d", h.rng.IntN(1000)), "question": "which?",
				"options": []any{map[string]any{"id": "a", "label": "A"}, map[string]any{"id": "b", "label": "B"}}}, nil)
		case 3:
			h.post(a, pr, "triage.label", map[string]any{"label": "bug"}, nil)
		default:
			h.post(a, pr, "note.flag", map[string]any{"flag": true}, nil)
		}
	case x < 88: // type.define
		decls := []any{
			map[string]any{"use": "adp:curation/1.0"},
			map[string]any{"use": "adp:reactions/1.0"},
			map[string]any{"pack": h.packURL, "digest": h.packDigest},
			map[string]any{"type": fmt.Sprintf("note.kind%d", h.rng.IntN(3)), "kind": "message", "title": "Note", "schema": map[string]any{"type": "object"}},
		}
		h.post(h.manager(pr), pr, "type.define", decls[h.rng.IntN(len(decls))], nil)
	case x < 94: // agent status
		a := h.member(pr)
		body, _ := json.Marshal(map[string]any{"state": "thinking", "summary": "r" + fmt.Sprint(h.round), "seen_seq": pr.st.Seq, "seen_hash": pr.st.LastHash})
		if r := h.send(http.MethodPut, "/v1/rooms/"+pr.id+"/agent-status", a, body); r.status == http.StatusOK {
			h.count("agent-status")
		} else {
			h.refused++
		}
	case x < 97: // close
		if !pr.anchor {
			h.post(h.manager(pr), pr, "room.close", map[string]any{"reason": "concluded", "references": h.refs(pr, 1)}, nil)
		}
	default: // cancel (scheduled rooms only)
		if !pr.anchor {
			h.post(h.manager(pr), pr, "room.cancel", map[string]any{"reason": "called off"}, nil)
		}
	}
}

// forgedReview submits a review that the node must refuse: a request fact
// altered (role raised, expiry pushed out), or a request that was never
// made. A refusal changes nothing; an acceptance is a bug.
func (h *propHarness) forgedReview(pr *propRoom) {
	var fact map[string]any
	if len(pr.reqs) > 0 {
		jr := pr.reqs[h.rng.IntN(len(pr.reqs))]
		json.Unmarshal(jr.fact, &fact)
		if h.rng.IntN(2) == 0 {
			fact["role"] = "moderator"
			if jr.role == "moderator" {
				fact["role"] = "speaker"
			}
		} else {
			fact["expires_at"] = int64(fact["expires_at"].(float64)) + 3_600_000
		}
	} else {
		now := time.Now().UnixMilli()
		fact = map[string]any{"id": "jr_01J0000000000000000000FAKE", "room_id": pr.id, "applicant": string(h.pick().ID),
			"role": "speaker", "created_at": now, "expires_at": now + 3_600_000, "extra": map[string]any{}}
	}
	p := map[string]any{"request": fact, "decision": "approve", "role": fact["role"]}
	if r, ok := h.post(pr.creator, pr, "room.join.review", p, nil); ok {
		h.t.Errorf("round %d: a review with a forged request was accepted in %s: %s", h.round, pr.id, r)
	}
}

// ---- checkpoints ----

// propView is what the node shows of one room.
type propView struct {
	raws     [][]byte
	resource map[string]any // without status / ended_at
	status   string
	endedAt  any
	members  []any
	jrList   []map[string]any
	jrOwn    map[string]map[string]any // request id -> the applicant's view
	statuses map[string]map[string]any // agent -> status
	archive  []byte                    // archive.jsonl of an ended room
	// terminal holds, for an ended or cancelled room (cold after a
	// restart: its state is read from storage on demand), more reads to
	// compare byte for byte: the JSON and Markdown archives, its entry in
	// the creator's /v1/me/rooms and in the directory.
	terminal map[string][]byte
	canRead  map[string]int // request id -> the applicant's GET room status
	readAt   [2]int64       // ms bounds of the reads
}

func decodeJSON(t *testing.T, b []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
}

// view reads everything the node shows of pr.
func (h *propHarness) view(pr *propRoom) *propView {
	t := h.t
	v := &propView{jrOwn: map[string]map[string]any{}, statuses: map[string]map[string]any{}, canRead: map[string]int{}}
	v.readAt[0] = time.Now().UnixMilli()
	for cursor := ""; ; {
		path := "/v1/rooms/" + pr.id + "/events?limit=250"
		if cursor != "" {
			path += "&cursor=" + cursor
		}
		var page struct {
			Result []json.RawMessage `json:"result"`
			Next   string            `json:"next_cursor"`
		}
		decodeJSON(t, h.get(pr.creator, path), &page)
		for _, r := range page.Result {
			v.raws = append(v.raws, r)
		}
		if cursor = page.Next; cursor == "" {
			break
		}
	}
	decodeJSON(t, h.get(pr.creator, "/v1/rooms/"+pr.id), &v.resource)
	v.status, _ = v.resource["status"].(string)
	v.endedAt = v.resource["ended_at"]
	delete(v.resource, "status")
	delete(v.resource, "ended_at")
	var ms struct {
		Result []any `json:"result"`
	}
	decodeJSON(t, h.get(pr.creator, "/v1/rooms/"+pr.id+"/members"), &ms)
	v.members = ms.Result
	var jl struct {
		Result []map[string]any `json:"result"`
	}
	decodeJSON(t, h.get(pr.creator, "/v1/rooms/"+pr.id+"/join-requests"), &jl)
	v.jrList = jl.Result
	for _, jr := range pr.reqs {
		var own map[string]any
		decodeJSON(t, h.get(jr.applicant, "/v1/rooms/"+pr.id+"/join-requests/"+jr.id), &own)
		v.jrOwn[jr.id] = own
		// An approved applicant may read even a private room (§16).
		v.canRead[jr.id] = h.getAny(jr.applicant, "/v1/rooms/"+pr.id).status
	}
	var sl struct {
		Result []map[string]any `json:"result"`
	}
	decodeJSON(t, h.get(pr.creator, "/v1/rooms/"+pr.id+"/agent-status"), &sl)
	for _, s := range sl.Result {
		v.statuses[s["agent_id"].(string)] = s
	}
	if v.status == "ended" {
		v.archive = withoutHostLog(h.t, h.get(pr.creator, "/v1/rooms/"+pr.id+"/archive.jsonl"), true)
	}
	if v.status == "ended" || v.status == "cancelled" {
		v.terminal = map[string][]byte{}
		if v.status == "ended" {
			v.terminal["archive"] = withoutHostLog(h.t, h.get(pr.creator, "/v1/rooms/"+pr.id+"/archive"), false)
			v.terminal["archive.md"] = h.get(pr.creator, "/v1/rooms/"+pr.id+"/archive.md")
		}
		v.terminal["me/rooms"] = h.listed(pr, pr.creator, "/v1/me/rooms?membership=creator&limit=200")
		if pr.st.Visibility != room.Private {
			v.terminal["directory"] = h.listed(pr, nil, "/v1/rooms/public?status="+v.status+"&limit=200")
		}
	}
	v.readAt[1] = time.Now().UnixMilli()
	return v
}

// listed returns pr's entry in a listing (every page), read as a; nil when
// it is not listed.
func (h *propHarness) listed(pr *propRoom, a *adptest.Agent, path string) []byte {
	for cursor := ""; ; {
		p := path
		if cursor != "" {
			p += "&cursor=" + cursor
		}
		var page struct {
			Result []json.RawMessage `json:"result"`
			Next   string            `json:"next_cursor"`
		}
		var body []byte
		if a == nil {
			body = h.getAny(nil, p).body
		} else {
			body = h.get(a, p)
		}
		decodeJSON(h.t, body, &page)
		for _, r := range page.Result {
			var e struct {
				ID string `json:"id"`
			}
			if json.Unmarshal(r, &e) == nil && e.ID == pr.id {
				return r
			}
		}
		if cursor = page.Next; cursor == "" {
			return nil
		}
	}
}

// consistent checks a view against the model (the kernel replay of the
// acknowledged chain).
func (h *propHarness) consistent(pr *propRoom, v *propView, when string) {
	t := h.t
	t.Helper()
	if len(v.raws) != len(pr.raws) {
		t.Errorf("round %d %s: room %s lists %d records, the acknowledged chain has %d", h.round, when, pr.id, len(v.raws), len(pr.raws))
	}
	for i := range min(len(v.raws), len(pr.raws)) {
		if !bytes.Equal(v.raws[i], pr.raws[i]) {
			t.Errorf("round %d %s: room %s seq %d changed:\nwas %s\nnow %s", h.round, when, pr.id, i+1, pr.raws[i], v.raws[i])
			break
		}
	}
	// The resource as the kernel computes it from the chain alone.
	url, _ := v.resource["url"].(string)
	var want map[string]any
	b, _ := json.Marshal(pr.st.Resource(v.readAt[0], url))
	decodeJSON(t, b, &want)
	delete(want, "status")
	delete(want, "ended_at")
	if !reflect.DeepEqual(v.resource, want) {
		t.Errorf("round %d %s: room %s resource differs from the replay of its chain:\nnode   %s\nreplay %s", h.round, when, pr.id, mustJSON(v.resource), mustJSON(want))
	}
	s0, s1 := string(pr.st.StatusAt(v.readAt[0])), string(pr.st.StatusAt(v.readAt[1]))
	if v.status != s0 && v.status != s1 {
		t.Errorf("round %d %s: room %s status %q; the chain and the clock say %q", h.round, when, pr.id, v.status, s1)
	}
	if v.status == "ended" && jsonNumber(v.endedAt) != pr.st.EndedAt() {
		t.Errorf("round %d %s: room %s ended_at %v, the chain says %d", h.round, when, pr.id, v.endedAt, pr.st.EndedAt())
	}
	wantMembers := []any{}
	for _, m := range pr.st.Members() {
		e := map[string]any{"agent_id": string(m.Agent), "role": string(m.Role), "joined_seq": float64(m.JoinedSeq)}
		if m.Perspective != "" {
			e["perspective"] = m.Perspective
		}
		if m.Agent == pr.st.Creator {
			e["creator"] = true
		}
		wantMembers = append(wantMembers, e)
	}
	if !reflect.DeepEqual(h.withoutStoreFacts(pr, v.members), h.withoutStoreFacts(pr, wantMembers)) {
		t.Errorf("round %d %s: room %s members differ from the replay:\nnode   %s\nreplay %s", h.round, when, pr.id, mustJSON(v.members), mustJSON(wantMembers))
	}
	// Statuses belong to active speaking members (§17.4: cleared on leave,
	// removal and demotion to observer).
	for agent := range v.statuses {
		m, ok := pr.st.Member(identity.AgentID(agent))
		if !ok || !m.Active || m.Role == "observer" {
			t.Errorf("round %d %s: room %s shows an agent status of %s, who is not an active speaking member (%+v)", h.round, when, pr.id, agent, m)
		}
	}
}

// withoutStoreFacts drops what an offline replay of the chain cannot know:
// the perspective of a member who joined with an auto-approved join
// request (no room.join.review carries that request, and a room.join with
// request_id has no perspective of its own, §10.2). The node keeps it
// across restarts (its join-request store lends the request's immutable
// fact), so only the comparison with the test's own offline replay drops it.
func (h *propHarness) withoutStoreFacts(pr *propRoom, members []any) []any {
	out := make([]any, len(members))
	for i, m := range members {
		e := maps(m.(map[string]any))
		if id, ok := pr.joinReq[jsonNumber(e["joined_seq"])]; ok && !pr.reviewed(id) {
			if _, had := e["perspective"]; had {
				h.gaps++
			}
			delete(e, "perspective")
		}
		out[i] = e
	}
	return out
}

// reviewed reports whether a room.join.review in the chain decided id.
func (pr *propRoom) reviewed(id string) bool { return pr.decided[id] }

func jsonNumber(v any) int64 {
	f, _ := v.(float64)
	return int64(f)
}

// withoutHostLog removes the manifest's extra.host_log from an archive
// (JSONL when jsonl, else the JSON archive) after checking that it proves
// the room's last record. The host log grows, so that proof is taken
// against the newest checkpoint at each request; every other byte of an
// ended room's archive is fixed, across restarts too.
func withoutHostLog(t *testing.T, raw []byte, jsonl bool) []byte {
	t.Helper()
	first, rest := raw, []byte(nil)
	if jsonl {
		if i := bytes.IndexByte(raw, '\n'); i >= 0 {
			first, rest = raw[:i], raw[i:]
		}
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(first, &top); err != nil {
		t.Fatalf("archive: %v", err)
	}
	manifest := top
	if !jsonl {
		manifest = nil
		if err := json.Unmarshal(top["manifest"], &manifest); err != nil {
			t.Fatalf("archive manifest: %v", err)
		}
	}
	var extra map[string]json.RawMessage
	if len(manifest["extra"]) > 0 {
		if err := json.Unmarshal(manifest["extra"], &extra); err != nil {
			t.Fatalf("archive extra: %v", err)
		}
	}
	if hl, ok := extra["host_log"]; ok {
		var p struct {
			RecordHash string `json:"record_hash"`
		}
		var last string
		json.Unmarshal(hl, &p)
		json.Unmarshal(manifest["last_hash"], &last)
		if p.RecordHash != last {
			t.Errorf("archive host_log proves %q, not the last record %q", p.RecordHash, last)
		}
		delete(extra, "host_log")
		manifest["extra"], _ = json.Marshal(extra)
	}
	if !jsonl {
		top["manifest"], _ = json.Marshal(manifest)
	}
	out, _ := json.Marshal(top)
	return append(out, rest...)
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// checkpoint reads every room, checks it against the model and returns
// the views to compare after the restart.
func (h *propHarness) checkpoint() map[string]*propView {
	out := map[string]*propView{}
	for _, pr := range h.rooms {
		v := h.view(pr)
		h.consistent(pr, v, "before the stop")
		out[pr.id] = v
	}
	return out
}

// compare checks every room after a restart against the view before it.
// After a SIGKILL the busy rooms may have grown by writes in flight; those
// are applied to the model first (inflight names the allowed envelopes).
func (h *propHarness) compare(before map[string]*propView, busy bool) {
	t := h.t
	// The room list: every room is still there.
	listed := map[string]bool{}
	creators := map[*adptest.Agent]bool{}
	for _, pr := range h.rooms {
		creators[pr.creator] = true
	}
	for a := range creators {
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
			decodeJSON(t, h.get(a, path), &page)
			for _, r := range page.Result {
				listed[r.ID] = true
			}
			if cursor = page.Next; cursor == "" {
				break
			}
		}
	}
	if len(listed) != len(h.rooms) {
		t.Errorf("round %d: the node lists %d rooms by their creators, the model has %d", h.round, len(listed), len(h.rooms))
	}
	for _, pr := range h.rooms {
		if !listed[pr.id] {
			t.Errorf("round %d: room %s is gone after the restart", h.round, pr.id)
			continue
		}
		b := before[pr.id]
		after := h.view(pr)
		grew := len(after.raws) > len(pr.raws)
		if grew {
			if !busy {
				t.Errorf("round %d: room %s has %d records after a restart with nothing in flight, %d before", h.round, pr.id, len(after.raws), len(pr.raws))
			}
			for _, raw := range after.raws[len(pr.raws):] {
				_, env, err := record.Parse(raw)
				if err != nil || !h.wasInflight(env.Hash) {
					t.Errorf("round %d: room %s holds a record that was neither acknowledged nor in flight: %s", h.round, pr.id, raw)
					continue
				}
				h.landed++
				h.apply(pr, raw)
			}
		}
		h.consistent(pr, after, "after the restart")
		if !grew {
			if !reflect.DeepEqual(after.resource, b.resource) {
				t.Errorf("round %d: room %s resource changed across the restart:\nbefore %s\nafter  %s", h.round, pr.id, mustJSON(b.resource), mustJSON(after.resource))
			}
			if b.archive != nil && !bytes.Equal(after.archive, b.archive) {
				t.Errorf("round %d: room %s (ended) has another archive after the restart:\nbefore %s\nafter  %s", h.round, pr.id, b.archive, after.archive)
			}
			for k, was := range b.terminal {
				if now := after.terminal[k]; !bytes.Equal(now, was) {
					t.Errorf("round %d: room %s (%s) answers %s differently after the restart:\nbefore %s\nafter  %s", h.round, pr.id, b.status, k, was, now)
				}
			}
			if !reflect.DeepEqual(after.members, b.members) {
				t.Errorf("round %d: room %s members changed across the restart:\nbefore %s\nafter  %s", h.round, pr.id, mustJSON(b.members), mustJSON(after.members))
			}
		}
		if len(after.jrList) != len(b.jrList) {
			t.Errorf("round %d: room %s lists %d join requests after the restart, %d before", h.round, pr.id, len(after.jrList), len(b.jrList))
		} else {
			for i := range b.jrList {
				h.sameRequest(pr, "creator's list", b.jrList[i], after.jrList[i], after.readAt[1])
			}
		}
		for id, was := range b.jrOwn {
			h.sameRequest(pr, "applicant's view", was, after.jrOwn[id], after.readAt[1])
			var fact struct {
				ExpiresAt int64 `json:"expires_at"`
			}
			req, _ := json.Marshal(was["request"])
			json.Unmarshal(req, &fact)
			if fact.ExpiresAt > after.readAt[1] && !grew && after.canRead[id] != b.canRead[id] {
				t.Errorf("round %d: room %s: the applicant of %s read the room with %d before the restart, %d after", h.round, pr.id, id, b.canRead[id], after.canRead[id])
			}
		}
		for agent, s := range after.statuses {
			if was, ok := b.statuses[agent]; !ok || !reflect.DeepEqual(was, s) {
				t.Errorf("round %d: room %s shows agent status %s for %s after the restart, which was not there before (%v)", h.round, pr.id, mustJSON(s), agent, was)
			}
		}
	}
	// Every acknowledged busy write is in its chain.
	for _, env := range h.acked {
		found := false
		for _, pr := range h.rooms {
			if _, ok, _ := pr.st.SeqOf(env); ok {
				found = true
				break
			}
		}
		if !found {
			t.Errorf("round %d: a write acknowledged before the SIGKILL (envelope %s) is missing after the restart", h.round, env)
		}
	}
	// Then a kernel replay from scratch of every chain gives the model.
	for _, pr := range h.rooms {
		st := h.newState()
		for i, raw := range pr.raws {
			rec, env, err := record.Parse(raw)
			if err == nil {
				err = st.Apply(rec, env, nil)
			}
			if err != nil {
				t.Fatalf("round %d: room %s seq %d does not replay from scratch: %v", h.round, pr.id, i+1, err)
			}
		}
		if !bytes.Equal(st.Snapshot(), pr.st.Snapshot()) {
			t.Errorf("round %d: room %s: a replay from scratch differs from the incremental one", h.round, pr.id)
		}
	}
	h.inflight, h.acked = nil, nil
}

// sameRequest compares a join request view across a restart: equal, except
// that an unconsumed, unrejected request may have expired meanwhile.
func (h *propHarness) sameRequest(pr *propRoom, where string, was, now map[string]any, at int64) {
	t := h.t
	if now == nil {
		t.Errorf("round %d: room %s: join request %s is gone from the %s", h.round, pr.id, mustJSON(was), where)
		return
	}
	w, n := maps(was), maps(now)
	ws, ns := w["status"], n["status"]
	delete(w, "status")
	delete(n, "status")
	var fact struct {
		ExpiresAt int64 `json:"expires_at"`
	}
	req, _ := json.Marshal(now["request"])
	json.Unmarshal(req, &fact)
	expiredSince := ns == "expired" && (ws == "pending" || ws == "approved") && at >= fact.ExpiresAt
	if !reflect.DeepEqual(w, n) || ws != ns && !expiredSince {
		t.Errorf("round %d: room %s: join request changed across the restart (%s):\nbefore %s\nafter  %s", h.round, pr.id, where, mustJSON(was), mustJSON(now))
	}
}

func maps(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// ---- stops ----

func (h *propHarness) stopGraceful() {
	t := h.t
	c := h.c
	if err := c.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-c.done:
		if !c.cmd.ProcessState.Success() {
			t.Errorf("round %d: graceful stop: %v\n%s", h.round, c.cmd.ProcessState, c.log.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("round %d: graceful stop did not finish in 20s", h.round)
	}
	c.client.CloseIdleConnections()
	h.ch.checkLog(c)
}

// busyRooms returns the rooms of the busy writers, one each, created on
// the first SIGKILL round.
func (h *propHarness) busyRooms() []*propRoom {
	if h.busy != nil {
		return h.busy
	}
	var out []*propRoom
	for i := range propBusyWriters {
		a := adptest.NewAgent(fmt.Sprintf("recovery-busy-%d", i))
		now := time.Now().UnixMilli()
		pr := h.create(a, map[string]any{"topic": "busy", "visibility": "public", "start_time": now, "end_time": now + 3_600_000,
			"types": []any{map[string]any{"use": "adp:reactions/1.0"}}})
		if pr == nil {
			h.t.Fatal("busy room refused")
		}
		pr.anchor, pr.busy = true, true
		out = append(out, pr)
	}
	h.busy = out
	return out
}

// stopBusy runs a writer in each busy room and signals the node while they
// write; the writes whose answers never arrived are in flight. After a
// SIGTERM the node may refuse writes while it drains: a refused write is
// not in flight (it must not be in the chain).
func (h *propHarness) stopBusy(rooms []*propRoom, sig syscall.Signal) {
	t := h.t
	type busy struct {
		pr     *propRoom
		a      *adptest.Agent
		joiner *adptest.Agent // joins and leaves
	}
	var bs []busy
	for i, pr := range rooms {
		bs = append(bs, busy{pr, pr.creator, adptest.NewAgent(fmt.Sprintf("recovery-busy-joiner-%d", i))})
	}
	h.inflight, h.acked = nil, nil
	var mu sync.Mutex
	var problems []string
	var signalled atomic.Bool
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, b := range bs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			head := adptest.Head(b.pr.st.Head)
			joined := b.pr.st.IsActiveMember(b.joiner.ID)
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				a, typ, payload := b.a, "message.create", any(map[string]any{"content_type": "text/plain", "content": fmt.Sprintf("busy %d", n)})
				switch {
				case n%4 == 2:
					typ, payload = "reaction.create", map[string]any{"event_id": head.Hash, "reaction": "+1"}
				case n%4 == 3 && joined:
					a, typ, payload = b.joiner, "room.leave", map[string]any{"reason": "busy"}
				case n%4 == 3:
					a, typ, payload = b.joiner, "room.join", map[string]any{"role": "speaker", "perspective": "busy joiner"}
				}
				ev := a.Event(time.Now().UnixMilli(), typ, b.pr.id, head.Seq, head.Hash, payload)
				env, err := identity.Sign(a.Key, ev)
				if err != nil {
					panic(err)
				}
				mu.Lock()
				h.inflight = append(h.inflight, env.Hash)
				mu.Unlock()
				r, err := h.c.do(http.MethodPost, "/v1/rooms/"+b.pr.id, "", env.Raw)
				if err != nil {
					return // no answer: stays in flight
				}
				if r.status != http.StatusCreated {
					mu.Lock()
					if signalled.Load() && r.status == http.StatusServiceUnavailable {
						h.inflight = slices.DeleteFunc(h.inflight, func(e string) bool { return e == env.Hash })
					} else {
						problems = append(problems, fmt.Sprintf("busy %s by %s: %s", typ, b.a.Name, r))
					}
					mu.Unlock()
					return
				}
				rec, _, err := record.Parse(bytes.TrimSpace(r.body))
				if err != nil {
					mu.Lock()
					problems = append(problems, fmt.Sprintf("busy answer: %v", err))
					mu.Unlock()
					return
				}
				mu.Lock()
				h.acked = append(h.acked, env.Hash)
				mu.Unlock()
				if typ == "message.create" { // membership events and signals do not move the head
					head = adptest.Head{Seq: rec.Seq, Hash: rec.Hash}
				}
				if typ == "room.join" || typ == "room.leave" {
					joined = typ == "room.join"
				}
			}
		}()
	}
	time.Sleep(time.Duration(20+h.rng.IntN(200)) * time.Millisecond)
	c := h.c
	if c.exited() {
		t.Fatalf("round %d: adpnode exited before the kill (%v):\n%s", h.round, c.cmd.ProcessState, c.log.String())
	}
	signalled.Store(true)
	c.cmd.Process.Signal(sig)
	select {
	case <-c.done:
	case <-time.After(20 * time.Second):
		t.Fatalf("round %d: adpnode did not exit within 20s of %v", h.round, sig)
	}
	close(stop)
	wg.Wait()
	c.client.CloseIdleConnections()
	ws, _ := c.cmd.ProcessState.Sys().(syscall.WaitStatus)
	if sig == syscall.SIGTERM && !c.cmd.ProcessState.Success() || sig == syscall.SIGKILL && ws.Signal() != syscall.SIGKILL {
		t.Errorf("round %d: adpnode ended with %v after %v\n%s", h.round, c.cmd.ProcessState, sig, c.log.String())
	}
	for _, p := range problems {
		t.Errorf("round %d: %s", h.round, p)
	}
	h.inflightN += len(h.inflight) - len(h.acked)
	h.ch.checkLog(c)
}

func (h *propHarness) wasInflight(env string) bool { return contains(h.inflight, env) }

// checkRSS bounds the child's memory after a restart.
func (h *propHarness) checkRSS() {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", h.c.cmd.Process.Pid))
	if err != nil {
		return
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.Atoi(f[1])
			if kb > 512<<10 {
				h.t.Errorf("round %d: adpnode RSS %d kB after the restart", h.round, kb)
			}
		}
	}
}

// writesContinue: after a restart a member posts in the anchor room and a
// new agent joins it.
func (h *propHarness) writesContinue() {
	pr := h.rooms[0]
	if !pr.st.IsActiveMember(pr.creator.ID) {
		if _, ok := h.post(pr.creator, pr, "room.join", map[string]any{"role": "moderator"}, nil); !ok {
			h.t.Errorf("round %d: the anchor room's creator cannot rejoin after the restart", h.round)
			return
		}
	}
	if m, _ := pr.st.Member(pr.creator.ID); m.Role == "observer" {
		if r, ok := h.post(pr.creator, pr, "room.member.role.update", map[string]any{"member": string(pr.creator.ID), "role": "moderator"}, nil); !ok {
			h.t.Errorf("round %d: the anchor room's creator cannot take the moderator role back: %s", h.round, r)
			return
		}
	}
	if r, ok := h.post(pr.creator, pr, "message.create", map[string]any{"content_type": "text/plain", "content": "after the restart"}, nil); !ok {
		h.t.Errorf("round %d: message after the restart refused: %s", h.round, r)
	}
	h.fresh++
	a := adptest.NewAgent(fmt.Sprintf("recovery-fresh-%d", h.fresh))
	if r, ok := h.post(a, pr, "room.join", map[string]any{"role": "speaker"}, nil); !ok {
		h.t.Errorf("round %d: join after the restart refused: %s", h.round, r)
	}
}

// verifyArchives runs `adpnode verify` on the archive of every ended room.
func (h *propHarness) verifyArchives() {
	dir := h.t.TempDir()
	for _, pr := range h.rooms {
		if pr.st.StatusAt(time.Now().UnixMilli()) != room.StatusEnded {
			continue
		}
		body := h.get(pr.creator, "/v1/rooms/"+pr.id+"/archive.jsonl")
		f := filepath.Join(dir, pr.id+".jsonl")
		if err := os.WriteFile(f, body, 0o600); err != nil {
			h.t.Fatal(err)
		}
		out, err := exec.Command(h.ch.bin, "verify", f).CombinedOutput()
		if err != nil || !bytes.HasPrefix(out, []byte("OK ")) {
			h.t.Errorf("adpnode verify of room %s's archive: %v\n%s", pr.id, err, out)
			continue
		}
		if want := fmt.Sprintf("%d records", len(pr.raws)); !bytes.Contains(out, []byte(want)) {
			h.t.Errorf("adpnode verify of room %s: %s (want %s)", pr.id, out, want)
		}
		h.archives++
	}
}

// ---- the tour: every flow once, each step required to succeed ----

func (h *propHarness) must(a *adptest.Agent, pr *propRoom, typ string, payload any, mentions ...string) {
	h.t.Helper()
	if r, ok := h.post(a, pr, typ, payload, mentions); !ok {
		h.t.Fatalf("tour: %s by %s in %s: %s", typ, a.Name, pr.id, r)
	}
}

func (h *propHarness) mustRefuse(a *adptest.Agent, pr *propRoom, typ string, payload any, code string) {
	h.t.Helper()
	r, ok := h.post(a, pr, typ, payload, nil)
	if got, _ := r.errCode(); ok || got != code {
		h.t.Fatalf("tour: %s by %s in %s: want %s, got %s", typ, a.Name, pr.id, code, r)
	}
}

func (h *propHarness) mustCreate(a *adptest.Agent, p map[string]any) *propRoom {
	h.t.Helper()
	pr := h.create(a, p)
	if pr == nil {
		h.t.Fatalf("tour: room.create %v refused", p)
	}
	return pr
}

// mustRequest creates a join request; status is the state it must start in.
func (h *propHarness) mustRequest(a *adptest.Agent, pr *propRoom, role, status string) *propReq {
	h.t.Helper()
	body, _ := json.Marshal(map[string]any{"role": role, "perspective": "tour " + a.Name})
	r := h.send(http.MethodPost, "/v1/rooms/"+pr.id+"/join-requests", a, body)
	var v struct {
		Request json.RawMessage `json:"request"`
		Status  string          `json:"status"`
	}
	var f struct {
		ID string `json:"id"`
	}
	if r.status != http.StatusCreated || json.Unmarshal(r.body, &v) != nil || json.Unmarshal(v.Request, &f) != nil || v.Status != status {
		h.t.Fatalf("tour: join request by %s in %s: want %s, got %s", a.Name, pr.id, status, r)
	}
	jr := &propReq{id: f.ID, applicant: a, fact: v.Request, role: role, created: time.Now(), pending: v.Status == "pending"}
	pr.reqs = append(pr.reqs, jr)
	h.count("join-request")
	return jr
}

func (h *propHarness) review(a *adptest.Agent, pr *propRoom, jr *propReq, decision, role string) {
	h.t.Helper()
	p := map[string]any{"request": jr.fact, "decision": decision, "reason": "tour"}
	if role != "" {
		p["role"] = role
	}
	h.must(a, pr, "room.join.review", p)
}

// waitUntil polls cond (a time condition of the node's clock) for up to d.
func (h *propHarness) waitUntil(d time.Duration, what string, cond func() bool) {
	h.t.Helper()
	testwait.Until(h.t, d, "tour: "+what, cond)
}

// tour drives every flow of the spec once, deterministically, before the
// first stop, so that every run covers all of them whatever the seed.
func (h *propHarness) tour() {
	ag := h.agents
	c, mod, ok, no, wait, banned, obs := ag[0], ag[1], ag[2], ag[3], ag[4], ag[5], ag[6]
	now := time.Now().UnixMilli()
	hour := int64(3_600_000)

	// Restricted room: listed moderator, speaker cap, no observers.
	r := h.mustCreate(c, map[string]any{"topic": "tour restricted", "visibility": "restricted", "start_time": now, "end_time": now + hour,
		"agenda": "every flow", "tags": []string{"tour"}, "language": "en",
		"policy": map[string]any{"moderator_agent_ids": []string{string(mod.ID)}, "max_speakers": 6, "observer_allowed": false},
		"types":  []any{map[string]any{"use": "adp:deliberation/1.0"}}})
	// Approved and consumed.
	jrOK := h.mustRequest(ok, r, "speaker", "pending")
	h.review(c, r, jrOK, "approve", "speaker")
	h.must(ok, r, "room.join", map[string]any{"role": "speaker", "request_id": jrOK.id})
	h.mustRefuse(ok, r, "room.leave", map[string]any{"reason": "x", "extra": "not an object"}, "invalid_event")
	// A listed moderator's moderator request is auto-approved, then consumed.
	jrMod := h.mustRequest(mod, r, "moderator", "approved")
	h.must(mod, r, "room.join", map[string]any{"role": "moderator", "request_id": jrMod.id})
	h.mustRefuse(mod, r, "room.leave", map[string]any{"reason": 7}, "invalid_event")
	// Rejected, by the moderator.
	jrNo := h.mustRequest(no, r, "speaker", "pending")
	h.review(mod, r, jrNo, "reject", "")
	h.mustRefuse(no, r, "room.join", map[string]any{"role": "speaker", "request_id": jrNo.id}, "join_request_not_approved")
	// Pending until it expires.
	h.mustRequest(wait, r, "speaker", "pending")
	// Observers are not allowed here.
	body, _ := json.Marshal(map[string]any{"role": "observer"})
	if rr := h.send(http.MethodPost, "/v1/rooms/"+r.id+"/join-requests", obs, body); rr.status == http.StatusCreated {
		h.t.Fatalf("tour: an observer request in a room without observers was accepted: %s", rr)
	}
	// Pre-emptive ban, lifted by an approving review.
	h.must(c, r, "room.member.remove", map[string]any{"member": string(banned.ID), "ban": true, "reason": "pre-emptive"})
	jrBan := h.mustRequest(banned, r, "speaker", "pending")
	h.review(c, r, jrBan, "approve", "speaker")
	h.must(banned, r, "room.join", map[string]any{"role": "speaker", "request_id": jrBan.id})
	// Roles, removal without ban, leave.
	h.must(c, r, "room.member.role.update", map[string]any{"member": string(ok.ID), "role": "moderator", "reason": "trusted"})
	h.must(ok, r, "room.member.role.update", map[string]any{"member": string(banned.ID), "role": "speaker"})
	h.must(c, r, "room.member.remove", map[string]any{"member": string(ok.ID), "reason": "rotation", "references": []string{r.st.LastHash}})
	h.mustRefuse(ok, r, "room.join", map[string]any{"role": "speaker"}, "approval_required")
	h.must(banned, r, "room.leave", map[string]any{"reason": "done"})
	// Types and content.
	h.must(c, r, "type.define", map[string]any{"use": "adp:curation/1.0"})
	h.must(c, r, "message.create", map[string]any{"content_type": "text/markdown", "content": "**hello**", "references": []string{r.st.LastHash}},
		string(mod.ID), string(wait.ID))
	h.must(c, r, "question.create", map[string]any{"question": "what survives a restart?"})
	h.must(c, r, "poll.create", map[string]any{"poll_id": "p1", "question": "ok?", "options": []any{map[string]any{"id": "y", "label": "yes"}}})
	h.must(c, r, "resource.add", map[string]any{"resource_type": "doc", "uri": "https://example.org/spec", "title": "spec"})
	h.must(c, r, "room.update", map[string]any{"topic": "tour restricted (updated)", "guidance": "short answers",
		"policy": map[string]any{"moderator_agent_ids": []string{string(mod.ID), string(no.ID)}, "max_speakers": 5}})
	h.putStatus(c, r)

	// Private room: an observer admitted by review; an approval left unused.
	p := h.mustCreate(c, map[string]any{"topic": "tour private", "visibility": "private", "start_time": now, "end_time": now + hour})
	jrObs := h.mustRequest(obs, p, "observer", "pending")
	h.review(c, p, jrObs, "approve", "observer")
	h.must(obs, p, "room.join", map[string]any{"role": "observer", "request_id": jrObs.id})
	jrIdle := h.mustRequest(wait, p, "speaker", "pending")
	h.review(c, p, jrIdle, "approve", "speaker") // expires unconsumed
	h.must(c, p, "room.member.role.update", map[string]any{"member": string(obs.ID), "role": "speaker"})
	h.putStatus(obs, p)

	// Public room: direct joins, an auto-approved request, every pack.
	q := h.rooms[0] // the anchor: reactions and the external pack
	h.must(ok, q, "room.join", map[string]any{"role": "speaker", "perspective": "tour reviewer"})
	h.must(ok, q, "reaction.create", map[string]any{"event_id": q.st.LastHash, "reaction": "agree"})
	h.must(ok, q, "triage.label", map[string]any{"label": "bug"})
	h.must(c, q, "type.define", map[string]any{"type": "note.flag", "kind": "signal", "title": "Flag", "schema": map[string]any{"type": "object"}})
	h.must(ok, q, "note.flag", map[string]any{"why": "tour"})
	h.must(obs, q, "room.join", map[string]any{"role": "observer"})
	h.mustRefuse(obs, q, "message.create", map[string]any{"content_type": "text/plain", "content": "observer"}, "permission_denied")
	jrPub := h.mustRequest(no, q, "speaker", "approved")
	h.must(no, q, "room.join", map[string]any{"role": "speaker", "request_id": jrPub.id})
	h.must(c, q, "room.member.remove", map[string]any{"member": string(no.ID), "ban": true, "reason": "spam"})
	h.mustRefuse(no, q, "room.join", map[string]any{"role": "speaker"}, "member_banned")
	h.putStatus(ok, q)

	// Scheduled → active → ended by close; and a cancelled one.
	s := h.mustCreate(c, map[string]any{"topic": "tour scheduled", "visibility": "public", "start_time": now + 3000, "end_time": now + 3000 + hour})
	h.must(mod, s, "room.join", map[string]any{"role": "speaker"})
	h.mustRefuse(mod, s, "message.create", map[string]any{"content_type": "text/plain", "content": "early"}, "room_not_active")
	h.must(c, s, "room.update", map[string]any{"agenda": "starts soon"})
	x := h.mustCreate(c, map[string]any{"topic": "tour cancelled", "visibility": "restricted", "start_time": now + hour, "end_time": now + 2*hour})
	h.must(c, x, "room.cancel", map[string]any{"reason": "no quorum"})
	h.waitUntil(8*time.Second, "the scheduled room starting", func() bool { return s.st.StatusAt(time.Now().UnixMilli()) == room.StatusActive })
	h.must(mod, s, "message.create", map[string]any{"content_type": "text/plain", "content": "started"})
	h.must(c, s, "room.close", map[string]any{"reason": "done", "references": []string{s.st.LastHash}})
	h.mustRefuse(mod, s, "message.create", map[string]any{"content_type": "text/plain", "content": "late"}, "room_ended")

	// Expiry: the pending and the unused approved request expire.
	h.waitUntil(propJoinTTL+2*time.Second, "join requests expiring", func() bool {
		var v struct {
			Status string `json:"status"`
		}
		json.Unmarshal(h.get(wait, "/v1/rooms/"+p.id+"/join-requests/"+jrIdle.id), &v)
		return v.Status == "expired"
	})
	h.mustRefuse(wait, p, "room.join", map[string]any{"role": "speaker", "request_id": jrIdle.id}, "join_request_expired")
}

func (h *propHarness) putStatus(a *adptest.Agent, pr *propRoom) {
	h.t.Helper()
	body, _ := json.Marshal(map[string]any{"state": "drafting", "summary": "tour", "seen_seq": pr.st.Seq, "seen_hash": pr.st.LastHash})
	if r := h.send(http.MethodPut, "/v1/rooms/"+pr.id+"/agent-status", a, body); r.status != http.StatusOK {
		h.t.Fatalf("tour: agent status of %s in %s: %s", a.Name, pr.id, r)
	}
	h.count("agent-status")
}
