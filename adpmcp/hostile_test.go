//go:build e2e

package adpmcp_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/adpnode/adpnode/internal/adptest"
	"github.com/adpnode/adpnode/stack"
)

// lyingTransport makes the host lie: it rewrites answers whose request
// matches.
type lyingTransport struct {
	match   func(*http.Request) bool
	rewrite func([]byte) []byte
	drop    atomic.Int32 // drop this many matching answers after the host handled them
}

func (l *lyingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(r)
	if err != nil || !l.match(r) {
		return resp, err
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	if l.drop.Load() > 0 {
		l.drop.Add(-1)
		return nil, errors.New("connection reset (test)")
	}
	if l.rewrite != nil {
		b = l.rewrite(b)
	}
	resp.Body = io.NopCloser(bytes.NewReader(b))
	resp.ContentLength = int64(len(b))
	resp.Header.Del("Content-Length")
	return resp, nil
}

// Property: a record the host altered is reported verified:false by
// read_room and wait (and records before it stay verified), and an
// altered answer to a post is reported "accepted as seq N, answer
// unverifiable" without posting again.
func TestLyingHostReportedUnverified(t *testing.T) {
	h := adptest.StartHost(t, stack.NodeConfig{})
	alice := startAgent(t, h.URL, h.Clock, newKey(t), t.TempDir(), nil, agentOpts{})
	lie := &lyingTransport{
		match: func(r *http.Request) bool {
			return r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/events")
		},
		rewrite: func(b []byte) []byte { return bytes.ReplaceAll(b, []byte("the truth"), []byte("a lie!!!!")) },
	}
	bob := startAgent(t, h.URL, h.Clock, newKey(t), t.TempDir(), nil, agentOpts{http: &http.Client{Transport: lie}})

	var room createOut
	alice.must("create_room", map[string]any{"topic": "facts"}, &room)
	var j joinOut
	bob.must("join_room", map[string]any{"room": room.RoomID}, &j)
	var w waitOut
	bob.must("wait", map[string]any{"rooms": []string{room.RoomID}, "timeout_seconds": 0}, &w)
	var p postOut
	alice.must("post", map[string]any{"room": room.RoomID, "text": "this is the truth"}, &p)
	bob.must("wait", map[string]any{"rooms": []string{room.RoomID}, "timeout_seconds": 30}, &w)
	if len(w.Events) != 1 || w.Events[0].Verified || w.Events[0].Seq != p.Seq {
		t.Fatalf("wait on an altered record: %+v", w)
	}
	var r readOut
	bob.must("read_room", map[string]any{"room": room.RoomID, "after_seq": 0}, &r)
	for _, it := range r.Items {
		switch {
		case it.Seq < p.Seq && !it.Verified:
			t.Fatalf("an untouched record is unverified: %+v", it)
		case it.Seq == p.Seq && (it.Verified || it.Content != "this is a lie!!!!" || it.Note == ""):
			t.Fatalf("the altered record: %+v", it)
		}
	}
	var honest readOut
	alice.must("read_room", map[string]any{"room": room.RoomID, "after_seq": 0}, &honest)
	for _, it := range honest.Items {
		if !it.Verified {
			t.Fatalf("unverified through an honest host: %+v", it)
		}
	}

	// The host alters its answer to bob's post.
	lie.match = func(r *http.Request) bool {
		return r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/"+room.RoomID)
	}
	lie.rewrite = func(b []byte) []byte { return bytes.Replace(b, []byte(`"received_at":`), []byte(`"received_at":1`), 1) }
	res := bob.must("post", map[string]any{"room": room.RoomID, "text": "my answer", "idempotency_key": "k1"}, &p)
	if p.Verified || !strings.Contains(text(res), "accepted as seq") || !strings.Contains(text(res), "answer unverifiable") {
		t.Fatalf("post with an altered answer: %+v %s", p, text(res))
	}
	bob.must("post", map[string]any{"room": room.RoomID, "text": "my answer", "idempotency_key": "k1"}, &p)
	alice.must("read_room", map[string]any{"room": room.RoomID, "after_seq": 0}, &honest)
	if n := countContent(honest.Items, "my answer"); n != 1 {
		t.Fatalf("posted %d times", n)
	}
}

func countContent(items []item, c string) int {
	n := 0
	for _, it := range items {
		if it.Content == c {
			n++
		}
	}
	return n
}

// Property: a restarted server (same state directory) resumes: wait
// returns what was posted while it was down, once; an idempotency key
// posts once across restarts; a post whose answer was lost is settled by
// the retry with the same key, not posted twice.
func TestRestartResumesWithNothingLostOrRepeated(t *testing.T) {
	h := adptest.StartHost(t, stack.NodeConfig{})
	alice := startAgent(t, h.URL, h.Clock, newKey(t), t.TempDir(), nil, agentOpts{})
	bobKey, bobState := newKey(t), t.TempDir()
	lie := &lyingTransport{match: func(r *http.Request) bool {
		return r.Method == http.MethodPost && strings.Contains(r.URL.Path, "/v1/rooms/")
	}}
	bob := startAgent(t, h.URL, h.Clock, bobKey, bobState, nil, agentOpts{http: &http.Client{Transport: lie}})

	var room createOut
	alice.must("create_room", map[string]any{"topic": "restarts"}, &room)
	var j joinOut
	bob.must("join_room", map[string]any{"room": room.RoomID}, &j)
	var w waitOut
	bob.must("wait", map[string]any{"timeout_seconds": 0}, &w)
	var p postOut
	alice.must("post", map[string]any{"room": room.RoomID, "text": "m1"}, &p)
	bob.must("wait", map[string]any{"timeout_seconds": 30}, &w)
	if len(w.Events) != 1 || w.Events[0].Content != "m1" {
		t.Fatalf("first wait: %+v", w)
	}
	bob.must("post", map[string]any{"room": room.RoomID, "text": "b1", "idempotency_key": "b1"}, &p)
	b1 := p.Seq

	// The answer to b2 is lost after the host accepted it.
	lie.drop.Store(1)
	res := bob.call("post", map[string]any{"room": room.RoomID, "text": "b2", "idempotency_key": "b2"}, nil)
	if !res.IsError || !strings.Contains(text(res), "idempotency_key") {
		t.Fatalf("post with a lost answer: %s", text(res))
	}
	bob.stop()

	alice.must("post", map[string]any{"room": room.RoomID, "text": "m2"}, &p)
	alice.must("post", map[string]any{"room": room.RoomID, "text": "m3", "mentions": []string{string(bobKey.ID)}}, &p)

	bob = startAgent(t, h.URL, h.Clock, bobKey, bobState, nil, agentOpts{})
	bob.must("post", map[string]any{"room": room.RoomID, "text": "b1", "idempotency_key": "b1"}, &p)
	if !p.Replayed || p.Seq != b1 {
		t.Fatalf("b1 again after a restart: %+v", p)
	}
	bob.must("post", map[string]any{"room": room.RoomID, "text": "b2", "idempotency_key": "b2"}, &p)
	var r readOut
	alice.must("read_room", map[string]any{"room": room.RoomID, "after_seq": 0}, &r)
	for _, c := range []string{"b1", "b2", "m1", "m2", "m3"} {
		if n := countContent(r.Items, c); n != 1 {
			t.Fatalf("%s is in the room %d times", c, n)
		}
	}
	bob.must("wait", map[string]any{"timeout_seconds": 30}, &w)
	var got []string
	for _, e := range w.Events {
		got = append(got, e.Content)
	}
	if strings.Join(got, ",") != "m2,m3" {
		t.Fatalf("after the restart wait returned %q, want m2,m3", got)
	}
	bob.must("wait", map[string]any{"timeout_seconds": 1}, &w)
	if !w.TimedOut || len(w.Events) != 0 {
		t.Fatalf("repeated after the restart: %+v", w)
	}
	var in struct {
		Items []item `json:"items"`
	}
	bob.must("inbox", map[string]any{}, &in)
	if len(in.Items) != 0 {
		t.Fatalf("the inbox repeats what wait delivered: %+v", in.Items)
	}
}

// Property: in a member-only room members read each other's messages
// through the tools while the host holds only ciphertext; and nothing the
// servers said (tool results, resources, prompts, notifications, logs)
// contains the agent's private key or sealing keys in any encoding.
func TestSealedRoomAndNoKeyInAnyOutput(t *testing.T) {
	h := adptest.StartHost(t, stack.NodeConfig{})
	out := &transcript{}
	dir := t.TempDir()
	aliceKey, bobKey := newKey(t), newKey(t)
	for name, k := range map[string]interface{ Save(string) error }{"alice.key": aliceKey, "bob.key": bobKey} {
		if err := k.Save(filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	alice := startAgent(t, h.URL, h.Clock, aliceKey, t.TempDir(), out, agentOpts{keyPath: filepath.Join(dir, "alice.key")})
	bob := startAgent(t, h.URL, h.Clock, bobKey, t.TempDir(), out, agentOpts{keyPath: filepath.Join(dir, "bob.key")})

	var room createOut
	alice.must("create_room", map[string]any{"topic": "sealed plans", "confidentiality": "member-only"}, &room)
	var j joinOut
	bob.must("join_room", map[string]any{"room": room.RoomID}, &j)
	if j.Status != "joined" {
		t.Fatalf("join: %+v", j)
	}
	var p, again postOut
	const secret = "the vault code is 7-4-1"
	alice.must("post", map[string]any{"room": room.RoomID, "text": secret, "mentions": []string{string(bobKey.ID)}, "idempotency_key": "s1"}, &p)
	alice.must("post", map[string]any{"room": room.RoomID, "text": secret, "mentions": []string{string(bobKey.ID)}, "idempotency_key": "s1"}, &again)
	if !again.Replayed || again.Seq != p.Seq {
		t.Fatalf("a sealed post with the same key: %+v, first %+v", again, p)
	}
	var r readOut
	bob.must("read_room", map[string]any{"room": room.RoomID, "after_seq": 0}, &r)
	var opened *item
	for i := range r.Items {
		if r.Items[i].Seq == p.Seq {
			opened = &r.Items[i]
		}
	}
	if opened == nil || opened.Content != secret || !opened.Sealed || !opened.Verified {
		t.Fatalf("bob's read of the sealed message: %+v", r.Items)
	}
	bob.must("post", map[string]any{"room": room.RoomID, "text": "noted, " + secret[4:], "reply_to": p.Seq}, &p)
	alice.must("read_room", map[string]any{"room": room.RoomID, "after_seq": p.Seq - 1}, &r)
	if len(r.Items) != 1 || r.Items[0].Content != "noted, "+secret[4:] || !r.Items[0].Verified {
		t.Fatalf("alice's read: %+v", r.Items)
	}
	// The host has no plaintext: its raw records of the room.
	raw := adptest.Do(t, http.MethodGet, h.URL+"/v1/rooms/"+room.RoomID+"/events?after_seq=0&limit=1000", "", nil)
	if raw.Status == http.StatusOK && bytes.Contains(raw.Body, []byte("vault code")) {
		t.Fatal("the host holds the plaintext")
	}
	for _, id := range []string{"adp://room/" + room.RoomID + "/transcript", "adp://me/inbox"} {
		res, err := bob.cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: id})
		if err != nil {
			t.Fatal(err)
		}
		out.add(res)
	}
	pr, err := bob.cs.GetPrompt(context.Background(), &mcp.GetPromptParams{Name: "room_etiquette"})
	if err != nil {
		t.Fatal(err)
	}
	out.add(pr)
	bob.call("post", map[string]any{"room": "http://bad host/v1/rooms/x", "text": "x"}, nil)
	bob.call("read_room", map[string]any{"room": "0000000000000000000v"}, nil)

	all := out.String()
	if !strings.Contains(all, secret) {
		t.Fatal("the transcript was not recorded")
	}
	var secrets [][]byte
	for _, k := range []interface{ Private() []byte }{} {
		_ = k
	}
	for _, k := range []*struct{ seed, priv []byte }{{aliceKey.Private().Seed(), aliceKey.Private()}, {bobKey.Private().Seed(), bobKey.Private()}} {
		secrets = append(secrets, k.seed, k.priv)
	}
	for _, name := range []string{"alice.key.seal", "bob.key.seal"} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		var f struct {
			X25519 []string `json:"x25519"`
		}
		json.Unmarshal(b, &f)
		if len(f.X25519) == 0 {
			t.Fatalf("%s has no keys", name)
		}
		for _, s := range f.X25519 {
			k, _ := base64.RawURLEncoding.DecodeString(s)
			secrets = append(secrets, k)
		}
	}
	for _, s := range secrets {
		for _, form := range []string{base64.StdEncoding.EncodeToString(s), base64.RawStdEncoding.EncodeToString(s),
			base64.URLEncoding.EncodeToString(s), base64.RawURLEncoding.EncodeToString(s), hex.EncodeToString(s)} {
			if strings.Contains(all, form) {
				t.Fatalf("a private key appears in the server's output (%d bytes)", len(s))
			}
		}
	}
}

// Property: nothing a client or a host sends ends the session: bad
// arguments, a host answering garbage or failing, records that are not
// records; each gets an error result or an unverified item, and the next
// call works.
func TestHostileInputDoesNotEndTheSession(t *testing.T) {
	h := adptest.StartHost(t, stack.NodeConfig{})
	alice := startAgent(t, h.URL, h.Clock, newKey(t), t.TempDir(), nil, agentOpts{})
	var room createOut
	alice.must("create_room", map[string]any{"topic": "hostile"}, &room)
	var p postOut
	alice.must("post", map[string]any{"room": room.RoomID, "text": "fine"}, &p)

	garbage := []func([]byte) []byte{
		func([]byte) []byte { return []byte("not json at all") },
		func([]byte) []byte {
			return []byte(`{"result":[{"seq":"x"},null,17,{"envelope":{"event":{"payload":{"content":{"deep":[[[[]]]]}}}}}]}`)
		},
		func([]byte) []byte { return []byte(`{"result":[` + strings.Repeat(`{"seq":1},`, 5000) + `{}]}`) },
		func(b []byte) []byte { return b[:len(b)/2] },
	}
	for i, g := range garbage {
		lie := &lyingTransport{match: func(r *http.Request) bool { return r.Method == http.MethodGet }, rewrite: g}
		bob := startAgent(t, h.URL, h.Clock, newKey(t), t.TempDir(), nil, agentOpts{http: &http.Client{Transport: lie}})
		for _, c := range []struct {
			name string
			args map[string]any
		}{
			{"read_room", map[string]any{"room": room.RoomID, "after_seq": 0}},
			{"get_room", map[string]any{"room": room.URL}},
			{"search_rooms", map[string]any{}},
			{"wait", map[string]any{"rooms": []string{room.RoomID}, "timeout_seconds": 0}},
			{"inbox", map[string]any{}},
			{"post", map[string]any{"room": room.RoomID, "text": "x", "reply_to": 1}},
		} {
			var r readOut
			res := bob.call(c.name, c.args, nil)
			if !res.IsError && c.name == "read_room" {
				bob.call(c.name, c.args, &r)
				for _, it := range r.Items {
					if it.Verified {
						t.Fatalf("garbage %d: a verified item %+v", i, it)
					}
				}
			}
		}
		// The session lives on.
		if _, err := bob.cs.ListTools(context.Background(), nil); err != nil {
			t.Fatalf("garbage %d: the session ended: %v", i, err)
		}
	}
	for _, args := range []any{
		map[string]any{"room": 17},
		map[string]any{"room": strings.Repeat("x", 100000)},
		map[string]any{"room": "http://[::1"},
		map[string]any{"room": room.RoomID, "after_seq": -5, "limit": -1},
		map[string]any{"room": room.RoomID, "after_seq": 1 << 60, "limit": 1 << 40},
	} {
		alice.call("read_room", args, nil)
	}
	res := alice.call("post", map[string]any{"room": room.RoomID, "text": "hi", "mentions": []string{"not-an-agent"}}, nil)
	if !res.IsError {
		t.Fatal("a bad mention was accepted")
	}
	if _, err := alice.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "no_such_tool"}); err == nil {
		t.Fatal("an unknown tool answered")
	}
	alice.must("read_room", map[string]any{"room": room.RoomID}, nil)
}

// Property: in a member-only room a post whose answer was lost is found,
// after a restart, by the retry with the same key: not posted twice.
func TestSealedPostLostAnswerNotRepeated(t *testing.T) {
	h := adptest.StartHost(t, stack.NodeConfig{})
	dir := t.TempDir()
	aliceKey := newKey(t)
	if err := aliceKey.Save(filepath.Join(dir, "alice.key")); err != nil {
		t.Fatal(err)
	}
	state := t.TempDir()
	lie := &lyingTransport{match: func(r *http.Request) bool {
		if r.Method != http.MethodPost || r.GetBody == nil {
			return false
		}
		b, _ := r.GetBody()
		body, _ := io.ReadAll(b)
		return bytes.Contains(body, []byte(`"type":"message.create"`))
	}}
	opts := agentOpts{keyPath: filepath.Join(dir, "alice.key"), http: &http.Client{Transport: lie}}
	alice := startAgent(t, h.URL, h.Clock, aliceKey, state, nil, opts)
	var room createOut
	alice.must("create_room", map[string]any{"topic": "sealed", "confidentiality": "member-only"}, &room)
	lie.drop.Store(1)
	res := alice.call("post", map[string]any{"room": room.RoomID, "text": "exactly once", "idempotency_key": "x"}, nil)
	if !res.IsError {
		t.Fatalf("a post with a lost answer succeeded: %s", text(res))
	}
	alice.stop()
	alice = startAgent(t, h.URL, h.Clock, aliceKey, state, nil, agentOpts{keyPath: opts.keyPath})
	var p postOut
	alice.must("post", map[string]any{"room": room.RoomID, "text": "exactly once", "idempotency_key": "x"}, &p)
	var r readOut
	alice.must("read_room", map[string]any{"room": room.RoomID, "after_seq": 0}, &r)
	if n := countContent(r.Items, "exactly once"); n != 1 || !p.Replayed {
		t.Fatalf("posted %d times (%+v)", n, p)
	}
}
