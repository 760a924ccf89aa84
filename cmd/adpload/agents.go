package main

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/adpnode/adpnode/adp"
	"github.com/adpnode/adpnode/adp/identity"
)

// client posts envelopes over one keep-alive connection pool.
type client struct {
	base string
	hc   *http.Client
}

func newClient(base string, agents int, timeout time.Duration) *client {
	tr := &http.Transport{
		Proxy:               nil,
		MaxIdleConns:        2 * agents,
		MaxIdleConnsPerHost: 2 * agents,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
	}
	return &client{base: base, hc: &http.Client{Transport: tr, Timeout: timeout}}
}

// post sends body and reads the answer into buf (valid until buf is reused).
func (c *client) post(path string, body []byte, buf *bytes.Buffer) (int, http.Header, error) {
	req, err := http.NewRequest(http.MethodPost, c.base+path, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.hc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	buf.Reset()
	if _, err := buf.ReadFrom(resp.Body); err != nil {
		return 0, nil, err
	}
	return resp.StatusCode, resp.Header, nil
}

// checkHost checks the host answers and warns about rate limits it
// advertises (they would turn the run into a rate-limit measurement).
func (c *client) checkHost(o options) error {
	resp, err := c.hc.Get(c.base + "/.well-known/agent-discourse")
	if err != nil {
		return fmt.Errorf("host %s: %w", c.base, err)
	}
	defer resp.Body.Close()
	var d struct {
		Limits struct {
			Rates map[string]int `json:"rates_per_minute"`
		} `json:"limits"`
	}
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&d) != nil {
		return fmt.Errorf("host %s: discovery document: HTTP %d", c.base, resp.StatusCode)
	}
	for k, v := range d.Limits.Rates {
		if v != 0 {
			fmt.Printf("WARNING: the host limits %s writes to %d per agent per room per minute; ", k, v)
			if o.inproc {
				fmt.Println("run with -rates off to measure throughput")
			} else {
				fmt.Println("set rates: {message: 0, signal: 0, control: 0} in its config file (zero disables a limit)")
			}
		}
	}
	return nil
}

// apiError is the spec's error body.
type apiError struct {
	Error struct {
		Code string         `json:"code"`
		Data map[string]any `json:"data"`
	} `json:"error"`
}

func parseError(b []byte) apiError {
	var e apiError
	json.Unmarshal(b, &e)
	return e
}

// room is one benchmark room.
type room struct {
	id         string
	createHash string // record hash of room.create (seq 1): the signal anchor
	createEnv  string // envelope hash of room.create: the reaction target
	head       head   // head after setup
}

type head struct {
	seq  int64
	hash string
}

// agent is one benchmark agent: a key, a nonce sequence and its room.
type agent struct {
	idx   int
	key   ed25519.PrivateKey
	id    identity.AgentID
	nonce int64
	room  *room
	head  head     // message mode: the head this agent last saw
	pre   [][]byte // reaction mode: pre-signed envelopes, in nonce order
	msgs  int      // messages signed (varies the content)
	buf   bytes.Buffer
}

func newAgent(idx int) (*agent, error) {
	k, err := identity.GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	return &agent{idx: idx, key: k, id: identity.AgentIDFromKey(k.Public().(ed25519.PublicKey))}, nil
}

// sign builds and signs an event; roomID "" is room.create. payload must be
// canonical JSON.
func (a *agent) sign(typ, roomID string, h head, payload []byte) (*identity.Envelope, error) {
	now := time.Now().UnixMilli()
	a.nonce = identity.NextNonce(a.nonce, now)
	ev := identity.Event{Protocol: adp.Protocol, Type: typ, Actor: a.id, CreatedAt: now, Nonce: a.nonce, Payload: payload}
	if roomID != "" {
		seq, hash := h.seq, h.hash
		ev.RoomID, ev.BaseSeq, ev.BaseHash = &roomID, &seq, &hash
	}
	return identity.Sign(a.key, ev)
}

// messagePayload returns a canonical message.create payload with about n
// bytes of content.
func messagePayload(i, n int) []byte {
	b := make([]byte, 0, n+64)
	b = append(b, `{"content":"adpload message `...)
	b = strconv.AppendInt(b, int64(i), 10)
	b = append(b, ' ')
	for len(b) < n+12 {
		b = append(b, "lorem ipsum "...)
	}
	b = b[:n+12]
	return append(b, `","content_type":"text/plain"}`...)
}

// reactionPayload reacts to the event with envelope hash target.
func reactionPayload(target string) []byte {
	return []byte(`{"event_id":"` + target + `","reaction":"agree"}`)
}

// signMessage signs the agent's next message.create on its current head.
func (a *agent) signMessage(contentBytes int) ([]byte, error) {
	a.msgs++
	env, err := a.sign("message.create", a.room.id, a.head, messagePayload(a.msgs, contentBytes))
	if err != nil {
		return nil, err
	}
	return env.Raw, nil
}

// signReaction signs a reaction.create anchored at room.create.
func (a *agent) signReaction() ([]byte, error) {
	env, err := a.sign("reaction.create", a.room.id, head{1, a.room.createHash}, reactionPayload(a.room.createEnv))
	if err != nil {
		return nil, err
	}
	return env.Raw, nil
}

// recordHead extracts seq and hash from a record answer. The record's own
// members come before "envelope" in the host's fixed member order
// (room_id, seq, pre_hash, hash, received_at, envelope); anything else
// falls back to a full decode.
func recordHead(b []byte) (head, bool) {
	top := b
	if i := bytes.Index(b, []byte(`"envelope":`)); i >= 0 {
		top = b[:i]
	}
	var h head
	if i := bytes.Index(top, []byte(`"seq":`)); i >= 0 {
		j := i + len(`"seq":`)
		k := j
		for k < len(top) && top[k] >= '0' && top[k] <= '9' {
			k++
		}
		h.seq, _ = strconv.ParseInt(string(top[j:k]), 10, 64)
	}
	if i := bytes.Index(top, []byte(`"hash":"`)); i >= 0 {
		j := i + len(`"hash":"`)
		if k := bytes.IndexByte(top[j:], '"'); k == 43 {
			h.hash = string(top[j : j+k])
		}
	}
	if h.seq > 0 && h.hash != "" {
		return h, true
	}
	var r struct {
		Seq  int64  `json:"seq"`
		Hash string `json:"hash"`
	}
	if json.Unmarshal(b, &r) != nil || r.Seq == 0 || r.Hash == "" {
		return head{}, false
	}
	return head{r.Seq, r.Hash}, true
}

// setup creates the agents and rooms: agent r creates room r, and every
// other agent i joins room i mod rooms as a speaker. Rooms are set up
// concurrently, each room's writes in order.
func setup(cl *client, o options) ([]*agent, error) {
	start := time.Now()
	agents := make([]*agent, o.agents)
	for i := range agents {
		a, err := newAgent(i)
		if err != nil {
			return nil, err
		}
		agents[i] = a
	}
	span := max(time.Hour, 2*(o.warmup+o.duration)+10*time.Minute)
	errs := make(chan error, o.rooms)
	var wg sync.WaitGroup
	for r := 0; r < o.rooms; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- setupRoom(cl, r, agents, o.rooms, span)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			return nil, err
		}
	}
	fmt.Printf("setup:           %d rooms, %d agents (%d per room) in %s\n", o.rooms, o.agents,
		(o.agents+o.rooms-1)/o.rooms, time.Since(start).Round(time.Millisecond))
	return agents, nil
}

func setupRoom(cl *client, r int, agents []*agent, rooms int, span time.Duration) error {
	creator := agents[r]
	now := time.Now().UnixMilli()
	payload := fmt.Appendf(nil, `{"end_time":%d,"start_time":%d,"topic":"adpload room %d","types":[{"use":"adp:reactions/1.0"}],"visibility":"public"}`,
		now+span.Milliseconds(), now, r)
	env, err := creator.sign("room.create", "", head{}, payload)
	if err != nil {
		return err
	}
	status, _, err := cl.post("/v1/rooms", env.Raw, &creator.buf)
	if err != nil {
		return fmt.Errorf("room.create: %w", err)
	}
	if status != http.StatusCreated {
		return fmt.Errorf("room.create: HTTP %d %s", status, bytes.TrimSpace(creator.buf.Bytes()))
	}
	var created struct {
		ID   string `json:"id"`
		Seq  int64  `json:"seq"`
		Hash string `json:"hash"`
	}
	if err := json.Unmarshal(creator.buf.Bytes(), &created); err != nil || created.ID == "" || created.Seq != 1 {
		return fmt.Errorf("room.create: unexpected answer %s", creator.buf.Bytes())
	}
	rm := &room{id: created.ID, createHash: created.Hash, createEnv: env.Hash, head: head{1, created.Hash}}
	creator.room = rm
	for i := r + rooms; i < len(agents); i += rooms {
		a := agents[i]
		a.room = rm
		env, err := a.sign("room.join", rm.id, rm.head, []byte(`{"role":"speaker"}`))
		if err != nil {
			return err
		}
		status, _, err := cl.post("/v1/rooms/"+rm.id, env.Raw, &a.buf)
		if err != nil {
			return fmt.Errorf("room.join: %w", err)
		}
		h, ok := recordHead(a.buf.Bytes())
		if status != http.StatusCreated || !ok {
			return fmt.Errorf("room.join: HTTP %d %s", status, bytes.TrimSpace(a.buf.Bytes()))
		}
		rm.head = h
	}
	for i := r; i < len(agents); i += rooms {
		agents[i].head = rm.head
	}
	return nil
}

// presign signs per reaction envelopes for every agent, all cores busy.
func presign(agents []*agent, per int) (time.Duration, error) {
	start := time.Now()
	var wg sync.WaitGroup
	errs := make([]error, len(agents))
	sem := make(chan struct{}, max(1, numProcs()))
	for i, a := range agents {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			a.pre = make([][]byte, 0, per)
			for range per {
				b, err := a.signReaction()
				if err != nil {
					errs[i] = err
					return
				}
				a.pre = append(a.pre, b)
			}
		}()
	}
	wg.Wait()
	return time.Since(start), errors.Join(errs...)
}
