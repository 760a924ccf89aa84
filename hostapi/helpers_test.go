package hostapi_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/adpnode/adpnode/adp"
	"github.com/adpnode/adpnode/hostapi"
	"github.com/adpnode/adpnode/internal/adptest"
	"github.com/adpnode/adpnode/node"
)

// highRates lifts the per-minute quotas for tests that write a lot; the
// error table runs on the defaults.
func highRates() node.Rates {
	return node.Rates{Message: 10000, Signal: 10000, Control: 10000,
		MessageCeiling: 10000, SignalCeiling: 10000, ControlCeiling: 10000, AgentStatus: 10000}
}

// tok returns a fresh request JWT of a for h.
func tok(h *adptest.Host, a *adptest.Agent) string {
	if a == nil {
		return ""
	}
	return a.Token(h.URL, h.Clock.Ms())
}

// get sends GET path, authenticated as a (anonymous when a is nil).
func get(t testing.TB, h *adptest.Host, a *adptest.Agent, path string) *adptest.Response {
	t.Helper()
	return adptest.Do(t, http.MethodGet, h.URL+path, tok(h, a), nil)
}

// sendJSON sends method path with a JSON body, authenticated as a.
func sendJSON(t testing.TB, h *adptest.Host, a *adptest.Agent, method, path string, body any) *adptest.Response {
	t.Helper()
	b, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	return adptest.Do(t, method, h.URL+path, tok(h, a), b)
}

// submit posts a raw envelope to the room (or to /v1/rooms when roomID is "").
func submit(t testing.TB, h *adptest.Host, roomID string, env []byte) *adptest.Response {
	t.Helper()
	path := "/v1/rooms"
	if roomID != "" {
		path += "/" + roomID
	}
	return adptest.Do(t, http.MethodPost, h.URL+path, "", env)
}

// expectCode asserts an error response with code and the status the one
// table gives for it.
func expectCode(t testing.TB, r *adptest.Response, code adp.Code) {
	t.Helper()
	if got := r.ErrorCode(); got != string(code) {
		t.Fatalf("want error %s, got %s", code, short(r))
	}
	if want := hostapi.StatusOf(code); r.Status != want {
		t.Fatalf("error %s: want HTTP %d (StatusOf), got %d", code, want, r.Status)
	}
	if r.Status < 400 {
		t.Fatalf("error %s answered with success status %d", code, r.Status)
	}
}

// short renders a response for a failure message, truncated.
func short(r *adptest.Response) string {
	if r == nil {
		return "<nil>"
	}
	s := r.String()
	if len(s) > 600 {
		s = s[:600] + "…"
	}
	return s
}

// expectStatus asserts a success status.
func expectStatus(t testing.TB, r *adptest.Response, status int) {
	t.Helper()
	if r.Status != status {
		t.Fatalf("want HTTP %d, got %s", status, short(r))
	}
}

// decode unmarshals a response body or fails.
func decode[T any](t testing.TB, r *adptest.Response) T {
	t.Helper()
	var v T
	if err := r.JSON(&v); err != nil {
		t.Fatalf("decode %s: %v", r, err)
	}
	return v
}

// roomPayload is a room.create payload starting at start and lasting d.
func roomPayload(visibility string, start int64, d time.Duration) map[string]any {
	return map[string]any{"topic": "Test room", "visibility": visibility, "start_time": start,
		"end_time": start + d.Milliseconds(), "types": []any{map[string]any{"use": "adp:reactions/1.0"}}}
}

// createRoom submits room.create and returns the room ID.
func createRoom(t testing.TB, h *adptest.Host, a *adptest.Agent, payload map[string]any) string {
	t.Helper()
	return h.CreateRoom(t, a, payload)
}

// joinRoom joins a public room directly with role.
func joinRoom(t testing.TB, h *adptest.Host, a *adptest.Agent, roomID, role string) {
	t.Helper()
	h.MustPost(t, a, roomID, "room.join", map[string]any{"role": role})
}

// msg is a text message payload.
func msg(text string) map[string]any {
	return map[string]any{"content_type": "text/plain", "content": text}
}

// wire is a server record as the wire carries it.
type wire struct {
	RoomID     string          `json:"room_id"`
	Seq        int64           `json:"seq"`
	PreHash    *string         `json:"pre_hash"`
	Hash       string          `json:"hash"`
	ReceivedAt int64           `json:"received_at"`
	Envelope   json.RawMessage `json:"envelope"`
}

// eventsPage is the GET events shape.
type eventsPage struct {
	Result     []json.RawMessage `json:"result"`
	NextCursor *string           `json:"next_cursor"`
}

// roomView is the subset of the room resource the tests read.
type roomView struct {
	ID         string       `json:"id"`
	Status     string       `json:"status"`
	URL        string       `json:"url"`
	Creator    string       `json:"creator"`
	Visibility string       `json:"visibility"`
	Seq        int64        `json:"seq"`
	Hash       string       `json:"hash"`
	Head       adptest.Head `json:"head"`
}

func getRoom(t testing.TB, h *adptest.Host, a *adptest.Agent, id string) roomView {
	t.Helper()
	r := get(t, h, a, "/v1/rooms/"+id)
	expectStatus(t, r, http.StatusOK)
	return decode[roomView](t, r)
}

// eventType returns the event type inside a record's envelope.
func eventType(t testing.TB, rec json.RawMessage) (string, wire) {
	t.Helper()
	var w wire
	if err := json.Unmarshal(rec, &w); err != nil {
		t.Fatal(err)
	}
	var env struct {
		Event struct {
			Type  string `json:"type"`
			Actor string `json:"actor"`
		} `json:"event"`
	}
	if err := json.Unmarshal(w.Envelope, &env); err != nil {
		t.Fatal(err)
	}
	return env.Event.Type, w
}

// sseItem is one parsed SSE item: an event with data, or a comment.
type sseItem struct {
	Event   string
	Data    []byte
	Comment string // set (and Event empty) for ": ..." lines
}

// sseStream is a live stream read with a hand-written text/event-stream
// parser (bufio over the response body).
type sseStream struct {
	t      testing.TB
	resp   *http.Response
	items  chan sseItem
	cancel context.CancelFunc
	mu     sync.Mutex
	closed bool
}

// dialSSE opens GET events/live as a. On a non-200 answer it returns the
// error response and a nil stream.
func dialSSE(t testing.TB, h *adptest.Host, a *adptest.Agent, roomID string) (*sseStream, *adptest.Response) {
	t.Helper()
	return dialSSEQuery(t, h, a, roomID, "")
}

// dialSSEQuery is dialSSE with a query string ("?..." or "").
func dialSSEQuery(t testing.TB, h *adptest.Host, a *adptest.Agent, roomID, query string) (*sseStream, *adptest.Response) {
	t.Helper()
	token := ""
	if a != nil {
		token = tok(h, a)
	}
	return dialStream(t, h.URL+"/v1/rooms/"+roomID+"/events/live"+query, token, 8192)
}

// dialStream opens an SSE stream at url (with a bearer token unless "").
// On a non-200 answer it returns the answer and a nil stream.
func dialStream(t testing.TB, url, token string, buf int) (*sseStream, *adptest.Response) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	req.Header.Set("Accept", "text/event-stream")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		defer cancel()
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return nil, &adptest.Response{Status: resp.StatusCode, Header: resp.Header, Body: b}
	}
	s := &sseStream{t: t, resp: resp, items: make(chan sseItem, buf), cancel: cancel}
	go s.read()
	t.Cleanup(s.Close)
	return s, nil
}

// openSSE opens a stream that must succeed and waits until the host has
// registered the subscription (its ": subscribed" comment).
func openSSE(t testing.TB, h *adptest.Host, a *adptest.Agent, roomID string) *sseStream {
	t.Helper()
	s, r := dialSSE(t, h, a, roomID)
	if s == nil {
		t.Fatalf("subscribe: %s", r)
	}
	if ct := s.resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		t.Fatalf("SSE Content-Type %q", ct)
	}
	if cc := s.resp.Header.Get("Cache-Control"); cc != "no-cache" {
		t.Fatalf("SSE Cache-Control %q", cc)
	}
	it, ok := s.nextAny(20 * time.Second)
	if !ok || it.Comment != "subscribed" {
		t.Fatalf("first SSE item is %+v (ok=%v), want the subscribed comment", it, ok)
	}
	return s
}

func (s *sseStream) read() {
	defer close(s.items)
	br := bufio.NewReader(s.resp.Body)
	var ev string
	var data [][]byte
	for {
		line, err := br.ReadBytes('\n')
		if err != nil {
			return
		}
		line = bytes.TrimSuffix(bytes.TrimSuffix(line, []byte("\n")), []byte("\r"))
		switch {
		case len(line) == 0:
			if ev != "" || data != nil {
				if ev == "" {
					ev = "message"
				}
				s.items <- sseItem{Event: ev, Data: bytes.Join(data, []byte("\n"))}
			}
			ev, data = "", nil
		case line[0] == ':':
			s.items <- sseItem{Comment: strings.TrimSpace(string(line[1:]))}
		default:
			field, value, _ := bytes.Cut(line, []byte(":"))
			value = bytes.TrimPrefix(value, []byte(" "))
			switch string(field) {
			case "event":
				ev = string(value)
			case "data":
				data = append(data, append([]byte(nil), value...))
			}
		}
	}
}

// Close ends the client side of the stream.
func (s *sseStream) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	s.closed = true
	s.cancel()
	s.resp.Body.Close()
}

// nextAny returns the next item, comments included.
func (s *sseStream) nextAny(d time.Duration) (sseItem, bool) {
	select {
	case it, ok := <-s.items:
		return it, ok
	case <-time.After(d):
		return sseItem{}, false
	}
}

// next returns the next event item, skipping comments (heartbeats). ok is
// false when the stream ended or nothing came within d.
func (s *sseStream) next(d time.Duration) (sseItem, bool) {
	deadline := time.After(d)
	for {
		select {
		case it, ok := <-s.items:
			if !ok {
				return sseItem{}, false
			}
			if it.Comment != "" {
				continue
			}
			return it, true
		case <-deadline:
			return sseItem{}, false
		}
	}
}

// mustNext returns the next event item of the given SSE event name.
func (s *sseStream) mustNext(event string) sseItem {
	s.t.Helper()
	it, ok := s.next(20 * time.Second)
	if !ok {
		s.t.Fatalf("no %s item on the stream", event)
	}
	if it.Event != event {
		s.t.Fatalf("want a %s item, got %s %s", event, it.Event, it.Data)
	}
	return it
}

// nextRecord returns the next room.event record.
func (s *sseStream) nextRecord() wire {
	s.t.Helper()
	it := s.mustNext("room.event")
	var w wire
	if err := json.Unmarshal(it.Data, &w); err != nil {
		s.t.Fatal(err)
	}
	return w
}

// waitEnd waits for the server to end the stream and returns the reason
// from its closing comment and the event items that came before the end.
func (s *sseStream) waitEnd(d time.Duration) (string, []sseItem) {
	s.t.Helper()
	deadline := time.After(d)
	reason := ""
	var items []sseItem
	for {
		select {
		case it, ok := <-s.items:
			if !ok {
				return reason, items
			}
			if r, found := strings.CutPrefix(it.Comment, "closed "); found {
				reason = r
			} else if it.Comment == "" {
				items = append(items, it)
			}
		case <-deadline:
			s.t.Fatalf("stream did not end within %s", d)
		}
	}
}

// noRecordField asserts a non-record SSE item carries none of the record
// fields (§17.4, §17.5).
func noRecordField(t testing.TB, data []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"seq", "pre_hash", "hash", "envelope"} {
		if _, ok := m[f]; ok {
			t.Fatalf("non-record SSE item carries %q: %s", f, data)
		}
	}
	return m
}

func fmtSeq(n int64) string { return fmt.Sprint(n) }

// jrView is the HTTP shape of a join request.
type jrView struct {
	Request      json.RawMessage `json:"request"`
	Status       string          `json:"status"`
	ApprovedRole *string         `json:"approved_role"`
	ReviewReason *string         `json:"review_reason"`
	ReviewedBy   *string         `json:"reviewed_by"`
	ReviewedAt   *int64          `json:"reviewed_at"`
	ConsumedSeq  int64           `json:"consumed_seq"`
}

// jrFact is the immutable request object.
type jrFact struct {
	ID          string `json:"id"`
	RoomID      string `json:"room_id"`
	Applicant   string `json:"applicant"`
	Role        string `json:"role"`
	Perspective string `json:"perspective"`
	Reason      string `json:"reason"`
	CreatedAt   int64  `json:"created_at"`
	ExpiresAt   int64  `json:"expires_at"`
}

func (j jrView) fact() jrFact {
	var f jrFact
	json.Unmarshal(j.Request, &f)
	return f
}

func (j jrView) id() string { return j.fact().ID }

// createJR creates a join request for role as a; it must succeed.
func createJR(t testing.TB, h *adptest.Host, a *adptest.Agent, roomID, role string) jrView {
	t.Helper()
	r := sendJSON(t, h, a, http.MethodPost, "/v1/rooms/"+roomID+"/join-requests", map[string]any{"role": role})
	expectStatus(t, r, http.StatusCreated)
	return decode[jrView](t, r)
}

// tryDo is adptest.Do without testing.T, for goroutines other than the
// test's (which must not call t.Fatal).
func tryDo(method, url, token string, body []byte) (*adptest.Response, error) {
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return &adptest.Response{Status: resp.StatusCode, Header: resp.Header, Body: b}, err
}

// tryHead reads a room head without testing.T.
func tryHead(h *adptest.Host, a *adptest.Agent, roomID string) (adptest.Head, error) {
	r, err := tryDo(http.MethodGet, h.URL+"/v1/rooms/"+roomID, tok(h, a), nil)
	if err != nil {
		return adptest.Head{}, err
	}
	if r.Status != http.StatusOK {
		return adptest.Head{}, fmt.Errorf("get room: %s", short(r))
	}
	var out struct {
		Head adptest.Head `json:"head"`
	}
	err = r.JSON(&out)
	return out.Head, err
}

func decodeJSON(t testing.TB, data []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatalf("decode %s: %v", data, err)
	}
}
