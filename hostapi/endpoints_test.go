//go:build e2e

package hostapi_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/adpnode/adpnode/adp"
	"github.com/adpnode/adpnode/adp/archive"
	"github.com/adpnode/adpnode/adp/record"
	"github.com/adpnode/adpnode/hostport"
	"github.com/adpnode/adpnode/internal/adptest"
	"github.com/adpnode/adpnode/node"
)

func TestHealthAndDiscovery(t *testing.T) {
	h := adptest.StartHost(t, node.Config{})

	r := get(t, h, nil, "/healthz")
	expectStatus(t, r, http.StatusOK)
	if decode[map[string]string](t, r)["status"] != "ok" {
		t.Errorf("healthz: %s", r)
	}
	r = get(t, h, nil, "/readyz")
	expectStatus(t, r, http.StatusOK)
	if decode[map[string]string](t, r)["status"] != "ready" {
		t.Errorf("readyz: %s", r)
	}

	r = get(t, h, nil, "/.well-known/agent-discourse")
	expectStatus(t, r, http.StatusOK)
	var d struct {
		Protocol        string            `json:"protocol"`
		Host            string            `json:"host"`
		Features        []string          `json:"features"`
		RegisteredPacks []string          `json:"registered_packs"`
		Endpoints       map[string]string `json:"endpoints"`
		Limits          map[string]any    `json:"limits"`
	}
	if err := r.JSON(&d); err != nil {
		t.Fatal(err)
	}
	if d.Protocol != "agent-discourse/1.0" || d.Host != strings.TrimPrefix(h.URL, "http://") {
		t.Errorf("discovery protocol/host: %+v", d)
	}
	for _, f := range []string{"rooms", "restricted-rooms", "private-rooms", "join-requests", "join-review",
		"sse-event-stream", "agent-status", "archives", "registered-packs", "external-packs"} {
		if !slices.Contains(d.Features, f) {
			t.Errorf("feature %q not advertised", f)
		}
	}
	for _, p := range []string{"adp:reactions/1.0", "adp:deliberation/1.0", "adp:curation/1.0", "adp:moderation/1.0", "adp:realtime/1.0"} {
		if !slices.Contains(d.RegisteredPacks, p) {
			t.Errorf("registered pack %q not advertised", p)
		}
	}
	if d.Endpoints["api"] != h.URL+"/v1" || d.Endpoints["sse"] != h.URL+"/v1" {
		t.Errorf("endpoints %v", d.Endpoints)
	}
	rates, _ := d.Limits["rates_per_minute"].(map[string]any)
	if rates["message"] != float64(5) || rates["signal"] != float64(60) || rates["control"] != float64(10) ||
		d.Limits["payload_bytes"] != float64(64<<10) || d.Limits["request_body_bytes"] != float64(1<<20) ||
		d.Limits["mentions"] != float64(32) {
		t.Errorf("published limits %v", d.Limits)
	}
}

// TestCreateSubmitAndRead covers POST /v1/rooms, POST /v1/rooms/{id}, GET
// room (head vs latest record), exact resubmission and the record shape.
func TestCreateSubmitAndRead(t *testing.T) {
	h := adptest.StartHost(t, node.Config{})
	c, s := adptest.NewAgent("crud-creator"), adptest.NewAgent("crud-speaker")

	createEnv := c.Envelope(h.Clock.Ms(), "room.create", "", 0, "", map[string]any{
		"topic": "Code review", "agenda": "Compare strategies", "visibility": "public",
		"start_time": h.Clock.Ms(), "end_time": h.Clock.Ms() + time.Hour.Milliseconds(),
		"tags": []string{"review"}, "language": "en", "types": []any{map[string]any{"use": "adp:reactions/1.0"}}})
	r := submit(t, h, "", createEnv)
	expectStatus(t, r, http.StatusCreated)
	var created struct {
		ID         string  `json:"id"`
		Status     string  `json:"status"`
		URL        string  `json:"url"`
		Seq        int64   `json:"seq"`
		PreHash    *string `json:"pre_hash"`
		Hash       string  `json:"hash"`
		ReceivedAt int64   `json:"received_at"`
	}
	if err := r.JSON(&created); err != nil {
		t.Fatal(err)
	}
	if !record.ValidRoomID(created.ID) || created.Status != "active" || created.URL != h.URL+"/v1/rooms/"+created.ID ||
		created.Seq != 1 || created.PreHash != nil || created.Hash == "" || created.ReceivedAt != h.Clock.Ms() {
		t.Fatalf("room.create response %s", r)
	}
	if r.Header.Get("Location") != created.URL || r.Header.Get("Max-Seen-Nonce") == "" {
		t.Errorf("create headers %v", r.Header)
	}
	// Exact resubmission: the original acceptance, 200, nothing new.
	again := submit(t, h, "", createEnv)
	expectStatus(t, again, http.StatusOK)
	if !bytes.Equal(again.Body, r.Body) {
		t.Errorf("resubmitted create answered %s, first %s", again, r)
	}
	id := created.ID

	room := getRoom(t, h, nil, id)
	if room.ID != id || room.Status != "active" || room.URL != created.URL || room.Creator != string(c.ID) ||
		room.Seq != 1 || room.Hash != created.Hash || room.Head != (adptest.Head{Seq: 1, Hash: created.Hash}) {
		t.Fatalf("room resource %+v", room)
	}
	var full map[string]any
	get(t, h, nil, "/v1/rooms/"+id).JSON(&full)
	for _, f := range []string{"topic", "agenda", "visibility", "start_time", "end_time", "tags", "language", "policy", "types", "created_at", "received_at", "pre_hash"} {
		if _, ok := full[f]; !ok {
			t.Errorf("room resource lacks %q", f)
		}
	}
	if types, _ := full["types"].([]any); len(types) != 1 {
		t.Errorf("materialised registry %v", full["types"])
	}

	// A join is a signal: it takes a seq but leaves the head alone.
	joinEnv := s.Envelope(h.Clock.Ms(), "room.join", id, 1, created.Hash, map[string]any{"role": "speaker", "perspective": "tester"})
	r = submit(t, h, id, joinEnv)
	expectStatus(t, r, http.StatusCreated)
	var joined wire
	if err := r.JSON(&joined); err != nil {
		t.Fatal(err)
	}
	if joined.Seq != 2 || joined.PreHash == nil || *joined.PreHash != created.Hash || joined.RoomID != id {
		t.Fatalf("join record %s", r)
	}
	again = submit(t, h, id, joinEnv)
	expectStatus(t, again, http.StatusOK)
	if !bytes.Equal(again.Body, r.Body) {
		t.Errorf("resubmitted join answered %s", again)
	}
	room = getRoom(t, h, s, id)
	if room.Seq != 2 || room.Hash != joined.Hash || room.Head.Seq != 1 || room.Head.Hash != created.Hash {
		t.Fatalf("after a signal the head must stay at seq 1: %+v", room)
	}
	// A message advances the head.
	r = h.MustPost(t, s, id, "message.create", msg("hello"))
	var m wire
	r.JSON(&m)
	room = getRoom(t, h, nil, id)
	if room.Head != (adptest.Head{Seq: 3, Hash: m.Hash}) || room.Seq != 3 {
		t.Fatalf("after a message the head is the message: %+v", room)
	}

	// Records have exactly the DECISIONS 17 fields and verify.
	page := decode[eventsPage](t, get(t, h, nil, "/v1/rooms/"+id+"/events"))
	if len(page.Result) != 3 || page.NextCursor != nil {
		t.Fatalf("events: %d records, cursor %v", len(page.Result), page.NextCursor)
	}
	checkChain(t, page.Result, 1)

	// Members (DECISIONS 20).
	var members struct {
		Result []hostport.MemberView `json:"result"`
	}
	if err := get(t, h, nil, "/v1/rooms/"+id+"/members").JSON(&members); err != nil {
		t.Fatal(err)
	}
	if len(members.Result) != 2 {
		t.Fatalf("members %+v", members.Result)
	}
	for _, mv := range members.Result {
		switch mv.AgentID {
		case c.ID:
			if mv.Role != adp.RoleModerator || !mv.Creator || mv.JoinedSeq != 1 {
				t.Errorf("creator entry %+v", mv)
			}
		case s.ID:
			if mv.Role != adp.RoleSpeaker || mv.Creator || mv.Perspective != "tester" || mv.JoinedSeq != 2 {
				t.Errorf("speaker entry %+v", mv)
			}
		default:
			t.Errorf("unexpected member %+v", mv)
		}
	}
	// Leaving removes the member from the list.
	h.MustPost(t, s, id, "room.leave", map[string]any{"reason": "bye"})
	if err := get(t, h, nil, "/v1/rooms/"+id+"/members").JSON(&members); err != nil || len(members.Result) != 1 {
		t.Fatalf("members after leave %+v", members.Result)
	}

	// Wrong endpoint / room mismatch are invalid_event.
	expectCode(t, submit(t, h, "", s.Envelope(h.Clock.Ms(), "message.create", id, 3, m.Hash, msg("x"))), adp.CodeInvalidEvent)
	expectCode(t, submit(t, h, id, c.Envelope(h.Clock.Ms(), "room.create", "", 0, "", roomPayload("public", h.Clock.Ms(), time.Hour))), adp.CodeInvalidEvent)
	other := createRoom(t, h, c, roomPayload("public", h.Clock.Ms(), time.Hour))
	expectCode(t, submit(t, h, other, c.Envelope(h.Clock.Ms(), "message.create", id, 3, m.Hash, msg("x"))), adp.CodeInvalidEvent)
	// Method not allowed on a known path.
	expectCode(t, adptest.Do(t, http.MethodDelete, h.URL+"/v1/rooms/"+id, "", nil), adp.CodeInvalidRequest)
}

// checkChain asserts records are consecutive from firstSeq, link by
// pre_hash, carry exactly the record fields and verify (hashes, signature).
func checkChain(t testing.TB, recs []json.RawMessage, firstSeq int64) {
	t.Helper()
	var prev *record.Record
	for i, raw := range recs {
		var fields map[string]json.RawMessage
		json.Unmarshal(raw, &fields)
		if len(fields) != 6 {
			t.Fatalf("record %d has fields %v", i, keys(fields))
		}
		for _, f := range []string{"room_id", "seq", "pre_hash", "hash", "received_at", "envelope"} {
			if _, ok := fields[f]; !ok {
				t.Fatalf("record %d lacks %q", i, f)
			}
		}
		rec, _, err := record.Parse(raw)
		if err != nil {
			t.Fatalf("record %d does not verify: %v", i, err)
		}
		if rec.Seq != firstSeq+int64(i) {
			t.Fatalf("record %d has seq %d, want %d", i, rec.Seq, firstSeq+int64(i))
		}
		if prev != nil {
			if err := record.Link(prev, rec); err != nil {
				t.Fatalf("chain broken at seq %d: %v", rec.Seq, err)
			}
		} else if rec.Seq == 1 && rec.PreHash != "" {
			t.Fatal("seq 1 has a pre_hash")
		}
		prev = rec
	}
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// TestEventsPagination covers after_seq, limit, cursor, and next_cursor
// present exactly when more records follow.
func TestEventsPagination(t *testing.T) {
	h := adptest.StartHost(t, node.Config{Rates: highRates()})
	c := adptest.NewAgent("page-creator")
	id := createRoom(t, h, c, roomPayload("public", h.Clock.Ms(), time.Hour))
	for i := 2; i <= 25; i++ {
		h.MustPost(t, c, id, "message.create", msg("m"+fmtSeq(int64(i))))
	}
	events := func(q string) eventsPage {
		t.Helper()
		r := get(t, h, nil, "/v1/rooms/"+id+"/events"+q)
		expectStatus(t, r, http.StatusOK)
		return decode[eventsPage](t, r)
	}
	seqs := func(p eventsPage) []int64 {
		var out []int64
		for _, raw := range p.Result {
			var w wire
			json.Unmarshal(raw, &w)
			out = append(out, w.Seq)
		}
		return out
	}
	span := func(from, to int64) []int64 {
		var out []int64
		for s := from; s <= to; s++ {
			out = append(out, s)
		}
		return out
	}
	cases := []struct {
		q        string
		want     []int64
		moreWant bool
	}{
		{"", span(1, 25), false},
		{"?limit=25", span(1, 25), false},
		{"?limit=24", span(1, 24), true},
		{"?limit=26", span(1, 25), false},
		{"?after_seq=20", span(21, 25), false},
		{"?after_seq=15&limit=10", span(16, 25), false}, // exactly the rest: no cursor
		{"?after_seq=14&limit=10", span(15, 24), true},
		{"?after_seq=25", nil, false},
		{"?after_seq=99", nil, false},
		{"?limit=1000", span(1, 25), false},
	}
	for _, tc := range cases {
		p := events(tc.q)
		if got := seqs(p); !slices.Equal(got, tc.want) {
			t.Errorf("events%s: seqs %v, want %v", tc.q, got, tc.want)
		}
		if (p.NextCursor != nil) != tc.moreWant {
			t.Errorf("events%s: next_cursor %v, want present=%v", tc.q, p.NextCursor, tc.moreWant)
		}
		if p.Result == nil {
			t.Errorf("events%s: result must be an array, not null", tc.q)
		}
	}
	// Walk with cursors: pages of 10, 10, 5; the last has no cursor.
	var all []json.RawMessage
	q := "?limit=10"
	var sizes []int
	for pages := 0; ; pages++ {
		if pages > 5 {
			t.Fatal("cursor walk does not end")
		}
		p := events(q)
		all = append(all, p.Result...)
		sizes = append(sizes, len(p.Result))
		if p.NextCursor == nil {
			break
		}
		q = "?limit=10&cursor=" + *p.NextCursor
	}
	if !slices.Equal(sizes, []int{10, 10, 5}) {
		t.Errorf("page sizes %v", sizes)
	}
	checkChain(t, all, 1)
	// The cursor overrides after_seq.
	first := events("?limit=10")
	if got := seqs(events("?after_seq=3&limit=10&cursor=" + *first.NextCursor)); !slices.Equal(got, span(11, 20)) {
		t.Errorf("cursor with after_seq: %v", got)
	}
	for _, bad := range []string{"?limit=0", "?limit=1001", "?limit=x", "?after_seq=-1", "?cursor=!!!", "?cursor=c2VxOng"} {
		expectCode(t, get(t, h, nil, "/v1/rooms/"+id+"/events"+bad), adp.CodeInvalidRequest)
	}
}

// TestAgentStatusEndpoints covers PUT, GET list and GET one.
func TestAgentStatusEndpoints(t *testing.T) {
	h := adptest.StartHost(t, node.Config{})
	c, s, o, x := adptest.NewAgent("st-creator"), adptest.NewAgent("st-speaker"), adptest.NewAgent("st-observer"), adptest.NewAgent("st-outsider")
	id := createRoom(t, h, c, roomPayload("public", h.Clock.Ms(), time.Hour))
	joinRoom(t, h, s, id, "speaker")
	joinRoom(t, h, o, id, "observer")
	head := h.Head(t, c, id)

	list := func() []hostport.AgentStatus {
		t.Helper()
		var out struct {
			Result []hostport.AgentStatus `json:"result"`
		}
		r := get(t, h, nil, "/v1/rooms/"+id+"/agent-status")
		expectStatus(t, r, http.StatusOK)
		if err := r.JSON(&out); err != nil || out.Result == nil {
			t.Fatalf("status list %s", r)
		}
		return out.Result
	}
	if len(list()) != 0 {
		t.Fatal("fresh room has statuses")
	}
	now := h.Clock.Ms()
	r := sendJSON(t, h, s, http.MethodPut, "/v1/rooms/"+id+"/agent-status", map[string]any{
		"state": "drafting", "summary": "on retries", "seen_seq": head.Seq, "seen_hash": head.Hash,
		"claim_id": "ticket-1", "activity": "reviewing", "expires_at": now + time.Hour.Milliseconds(), "extra": map[string]any{"k": 1}})
	expectStatus(t, r, http.StatusOK)
	st := decode[hostport.AgentStatus](t, r)
	if st.AgentID != s.ID || st.RoomID != id || st.State != "drafting" || st.SeenSeq == nil || *st.SeenSeq != head.Seq ||
		st.ExpiresAt != now+300_000 || st.UpdatedAt != now {
		t.Fatalf("PUT status answered %s (expiry must be capped at 300 s)", r)
	}
	// Without expires_at the maximum TTL applies; a new status replaces the old one.
	r = sendJSON(t, h, s, http.MethodPut, "/v1/rooms/"+id+"/agent-status", map[string]any{"state": "waiting", "expires_at": now + 60_000})
	expectStatus(t, r, http.StatusOK)
	r = sendJSON(t, h, c, http.MethodPut, "/v1/rooms/"+id+"/agent-status", map[string]any{"state": "idle"})
	expectStatus(t, r, http.StatusOK)
	if decode[hostport.AgentStatus](t, r).ExpiresAt != now+300_000 {
		t.Errorf("default expiry: %s", r)
	}
	l := list()
	if len(l) != 2 || l[0].AgentID == l[1].AgentID {
		t.Fatalf("status list %+v", l)
	}
	r = get(t, h, nil, "/v1/rooms/"+id+"/agent-status/"+string(s.ID))
	expectStatus(t, r, http.StatusOK)
	if got := decode[hostport.AgentStatus](t, r); got.State != "waiting" || got.ExpiresAt != now+60_000 {
		t.Errorf("GET one %s", r)
	}
	// Refusals.
	expectCode(t, sendJSON(t, h, o, http.MethodPut, "/v1/rooms/"+id+"/agent-status", map[string]any{"state": "idle"}), adp.CodePermissionDenied)
	expectCode(t, sendJSON(t, h, x, http.MethodPut, "/v1/rooms/"+id+"/agent-status", map[string]any{"state": "idle"}), adp.CodeMembershipRequired)
	expectCode(t, sendJSON(t, h, nil, http.MethodPut, "/v1/rooms/"+id+"/agent-status", map[string]any{"state": "idle"}), adp.CodeInvalidToken)
	expectCode(t, sendJSON(t, h, s, http.MethodPut, "/v1/rooms/"+id+"/agent-status", map[string]any{"expires_at": now - 1}), adp.CodeInvalidRequest)
	expectCode(t, sendJSON(t, h, s, http.MethodPut, "/v1/rooms/"+id+"/agent-status", map[string]any{"seq": 1}), adp.CodeInvalidRequest)
	expectCode(t, get(t, h, nil, "/v1/rooms/"+id+"/agent-status/not-an-agent"), adp.CodeInvalidRequest)
	expectCode(t, get(t, h, nil, "/v1/rooms/"+id+"/agent-status/"+string(o.ID)), adp.CodeAgentStatusNotFound)

	// Expiry: past 60 s the speaker's status is gone, the creator's stays.
	h.Clock.Advance(61 * time.Second)
	expectCode(t, get(t, h, nil, "/v1/rooms/"+id+"/agent-status/"+string(s.ID)), adp.CodeAgentStatusNotFound)
	if l := list(); len(l) != 1 || l[0].AgentID != c.ID {
		t.Errorf("after expiry %+v", l)
	}
	// Demotion to observer clears the status (§17.4).
	sendJSON(t, h, s, http.MethodPut, "/v1/rooms/"+id+"/agent-status", map[string]any{"state": "working"})
	h.MustPost(t, c, id, "room.member.role.update", map[string]any{"member": string(s.ID), "role": "observer"})
	expectCode(t, get(t, h, nil, "/v1/rooms/"+id+"/agent-status/"+string(s.ID)), adp.CodeAgentStatusNotFound)
	// Removal clears it too.
	h.MustPost(t, c, id, "room.member.role.update", map[string]any{"member": string(s.ID), "role": "speaker"})
	expectStatus(t, sendJSON(t, h, s, http.MethodPut, "/v1/rooms/"+id+"/agent-status", map[string]any{"state": "working"}), http.StatusOK)
	h.MustPost(t, c, id, "room.member.remove", map[string]any{"member": string(s.ID)})
	expectCode(t, get(t, h, nil, "/v1/rooms/"+id+"/agent-status/"+string(s.ID)), adp.CodeAgentStatusNotFound)
}

// TestArchiveEndpoints covers archive, archive.jsonl and archive.md of a
// room ended by room.close.
func TestArchiveEndpoints(t *testing.T) {
	h := adptest.StartHost(t, node.Config{})
	c, s := adptest.NewAgent("ar-creator"), adptest.NewAgent("ar-speaker")
	p := roomPayload("public", h.Clock.Ms(), time.Hour)
	p["topic"] = "Archive *test* <b>"
	id := createRoom(t, h, c, p)
	joinRoom(t, h, s, id, "speaker")
	r := h.MustPost(t, s, id, "message.create", msg("<script>alert(1)</script>\n# not a heading\n```"))
	var m wire
	r.JSON(&m)
	h.MustPost(t, c, id, "reaction.create", map[string]any{"event_id": m.Hash, "reaction": "agree"})
	for _, f := range []string{"/archive", "/archive.jsonl", "/archive.md"} {
		expectCode(t, get(t, h, nil, "/v1/rooms/"+id+f), adp.CodeArchiveUnavailable)
	}
	h.Clock.Advance(time.Second)
	h.MustPost(t, c, id, "room.close", map[string]any{"reason": "done"})

	r = get(t, h, nil, "/v1/rooms/"+id+"/archive")
	expectStatus(t, r, http.StatusOK)
	a, err := archive.ParseJSON(r.Body)
	if err != nil {
		t.Fatalf("parse archive: %v", err)
	}
	rep, err := archive.Verify(a, archive.Options{})
	if err != nil {
		t.Fatalf("archive does not verify: %v", err)
	}
	if rep.Records != 5 || rep.Status != "ended" || a.Manifest.RoomID != id || a.Manifest.URL != h.URL+"/v1/rooms/"+id ||
		a.Manifest.ArchiveRoot == a.Manifest.EventsSHA3 || len(a.Manifest.ArchiveRoot) != 43 || a.Manifest.Formats["jsonl"] != h.URL+"/v1/rooms/"+id+"/archive.jsonl" ||
		a.Manifest.Formats["markdown"] != h.URL+"/v1/rooms/"+id+"/archive.md" || len(a.Packs) != 1 || a.Manifest.Type != "room.archive" {
		t.Fatalf("archive manifest %+v report %+v", a.Manifest, rep)
	}
	var res roomView
	json.Unmarshal(a.Room, &res)
	if res.ID != id || res.Status != "ended" {
		t.Errorf("archive room %s", a.Room)
	}
	// The archive records are the events records, served without HTML
	// escaping (the signed bytes as they are).
	er := get(t, h, nil, "/v1/rooms/"+id+"/events")
	if !bytes.Contains(er.Body, []byte("<script>alert(1)</script>")) {
		t.Error("events re-escaped agent content")
	}
	page := decode[eventsPage](t, er)
	checkChain(t, page.Result, 1)
	for i := range page.Result {
		if !bytes.Equal(bytes.TrimSpace(page.Result[i]), bytes.TrimSpace(a.Records[i])) {
			t.Errorf("archive record %d differs from the events record", i+1)
		}
	}
	// A tampered archive fails verification.
	a.Manifest.LastHash = a.Manifest.EventsSHA3
	if _, err := archive.Verify(a, archive.Options{}); err == nil {
		t.Error("tampered manifest verified")
	}

	r = get(t, h, nil, "/v1/rooms/"+id+"/archive.jsonl")
	expectStatus(t, r, http.StatusOK)
	if ct := r.Header.Get("Content-Type"); ct != "application/x-ndjson" {
		t.Errorf("jsonl Content-Type %q", ct)
	}
	man, packs, raws, err := archive.ParseJSONL(r.Body)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := archive.VerifyRecords(man, packs, raws, archive.Options{}); err != nil {
		t.Fatalf("jsonl archive does not verify: %v", err)
	}
	if len(raws) != 5 || man.EventsSHA3 != a.Manifest.EventsSHA3 || man.GeneratedAt != a.Manifest.GeneratedAt {
		t.Errorf("jsonl: %d records, manifest %+v", len(raws), man)
	}
	if lines := bytes.Count(bytes.TrimSpace(r.Body), []byte("\n")) + 1; lines != 6 {
		t.Errorf("jsonl has %d lines, want manifest + 5", lines)
	}

	r = get(t, h, nil, "/v1/rooms/"+id+"/archive.md")
	expectStatus(t, r, http.StatusOK)
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/markdown") || r.Header.Get("X-Content-Type-Options") != "nosniff" {
		t.Errorf("markdown headers %v", r.Header)
	}
	md := string(r.Body)
	for _, want := range []string{"# Archive \\*test\\* \\<b\\>", "## Transcript", "## Members", string(c.ID), "message.create", a.Manifest.EventsSHA3} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q", want)
		}
	}
	// Agent content is fenced: the script tag only appears inside a fence
	// longer than the backticks in the content.
	i := strings.Index(md, "<script>")
	if i < 0 || !strings.Contains(md[:i], "````\n") || strings.Contains(md, "\n# not a heading\n\n") {
		t.Errorf("message content is not fenced:\n%s", md)
	}
}
