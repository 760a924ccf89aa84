//go:build e2e

package hostapi_test

import (
	"crypto/ed25519"
	"encoding/json"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/adpnode/adpnode/adp"
	"github.com/adpnode/adpnode/adp/identity"
	"github.com/adpnode/adpnode/hostapi"
	"github.com/adpnode/adpnode/internal/adptest"
	"github.com/adpnode/adpnode/node"
)

// errCase provokes one error over HTTP and returns the answer; check, when
// set, asserts what the code alone does not (headers, data).
type errCase struct {
	code  adp.Code
	name  string
	run   func(t *testing.T, f *errFixture) *adptest.Response
	check func(t *testing.T, f *errFixture, r *adptest.Response)
}

// errFixture is one host on the default configuration (default rates and
// limits) with a few agents.
type errFixture struct {
	h            *adptest.Host
	creator, bob *adptest.Agent
	nonceWant    int64
}

func (f *errFixture) now() int64 { return f.h.Clock.Ms() }

// room creates a fresh room of visibility vis by the creator.
func (f *errFixture) room(t *testing.T, vis string, edit func(map[string]any)) string {
	p := roomPayload(vis, f.now(), time.Hour)
	if edit != nil {
		edit(p)
	}
	return createRoom(t, f.h, f.creator, p)
}

// resign changes one top-level envelope member of a signed envelope.
func resign(t *testing.T, env []byte, member string, value any) []byte {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(env, &m); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(value)
	m[member] = b
	out, _ := json.Marshal(m)
	return out
}

// editEvent changes the event object of a signed envelope (leaving hash
// and signature as they were).
func editEvent(t *testing.T, env []byte, edit func(map[string]any)) []byte {
	var m map[string]any
	if err := json.Unmarshal(env, &m); err != nil {
		t.Fatal(err)
	}
	edit(m["event"].(map[string]any))
	out, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// envMember reads one top-level string member of an envelope.
func envMember(t *testing.T, env []byte, member string) string {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(env, &m); err != nil {
		t.Fatal(err)
	}
	var s string
	json.Unmarshal(m[member], &s)
	return s
}

// errCases covers every code hostapi.ErrorCodes lists except internal_error.
func errCases() []errCase {
	zero32 := identity.EncodeB64(make([]byte, 32))
	return []errCase{
		{code: adp.CodeInvalidRequest, name: "limit_out_of_range", run: func(t *testing.T, f *errFixture) *adptest.Response {
			return get(t, f.h, nil, "/v1/rooms/"+f.room(t, "public", nil)+"/events?limit=0")
		}},
		{code: adp.CodeInvalidRequest, name: "bad_events_cursor", run: func(t *testing.T, f *errFixture) *adptest.Response {
			return get(t, f.h, nil, "/v1/rooms/"+f.room(t, "public", nil)+"/events?cursor=zzz")
		}},
		{code: adp.CodeInvalidEvent, name: "unknown_event_member", run: func(t *testing.T, f *errFixture) *adptest.Response {
			env := f.creator.Envelope(f.now(), "room.create", "", 0, "", roomPayload("public", f.now(), time.Hour))
			return submit(t, f.h, "", editEvent(t, env, func(ev map[string]any) { ev["color"] = "blue" }))
		}, check: func(t *testing.T, f *errFixture, r *adptest.Response) {
			if r.ErrorData()["reason"] != "unknown_field" {
				t.Errorf("data.reason = %v", r.ErrorData()["reason"])
			}
		}},
		{code: adp.CodeInvalidEvent, name: "duration_limit", run: func(t *testing.T, f *errFixture) *adptest.Response {
			return submit(t, f.h, "", f.creator.Envelope(f.now(), "room.create", "", 0, "", roomPayload("public", f.now(), time.Minute)))
		}, check: func(t *testing.T, f *errFixture, r *adptest.Response) {
			if r.ErrorData()["limit"] != "min_duration" {
				t.Errorf("data.limit = %v", r.ErrorData()["limit"])
			}
		}},
		{code: adp.CodeInvalidEventHash, name: "hash_of_other_event", run: func(t *testing.T, f *errFixture) *adptest.Response {
			env := f.creator.Envelope(f.now(), "room.create", "", 0, "", roomPayload("public", f.now(), time.Hour))
			return submit(t, f.h, "", resign(t, env, "hash", zero32))
		}},
		{code: adp.CodeInvalidSignature, name: "signature_of_other_event", run: func(t *testing.T, f *errFixture) *adptest.Response {
			a := f.creator.Envelope(f.now(), "room.create", "", 0, "", roomPayload("public", f.now(), time.Hour))
			b := f.creator.Envelope(f.now(), "room.create", "", 0, "", roomPayload("public", f.now(), 2*time.Hour))
			return submit(t, f.h, "", resign(t, a, "signature", envMember(t, b, "signature")))
		}},
		{code: adp.CodeInvalidSignature, name: "signed_by_another_key", run: func(t *testing.T, f *errFixture) *adptest.Response {
			// An event naming the creator as actor, signed with Bob's key.
			ev := f.creator.Event(f.now(), "room.create", "", 0, "", roomPayload("public", f.now(), time.Hour))
			digest, _ := ev.Digest()
			canon, _ := ev.Canonical()
			env := map[string]any{"event": json.RawMessage(canon), "hash": identity.EncodeB64(digest[:]),
				"signature": identity.EncodeB64(ed25519.Sign(f.bob.Key, digest[:]))}
			b, _ := json.Marshal(env)
			return submit(t, f.h, "", b)
		}},
		{code: adp.CodeInvalidActor, name: "malformed_actor", run: func(t *testing.T, f *errFixture) *adptest.Response {
			env := f.creator.Envelope(f.now(), "room.create", "", 0, "", roomPayload("public", f.now(), time.Hour))
			return submit(t, f.h, "", editEvent(t, env, func(ev map[string]any) { ev["actor"] = "did:agent:not-a-key" }))
		}},
		{code: adp.CodeTimestampOutOfWindow, name: "created_at_301s_old", run: func(t *testing.T, f *errFixture) *adptest.Response {
			ev := f.creator.Event(f.now(), "room.create", "", 0, "", roomPayload("public", f.now(), time.Hour))
			ev.CreatedAt = f.now() - 301_000
			return submit(t, f.h, "", f.creator.Sign(ev))
		}, check: func(t *testing.T, f *errFixture, r *adptest.Response) {
			if r.ErrorData()["window_ms"] != float64(300_000) {
				t.Errorf("data = %v", r.ErrorData())
			}
		}},
		{code: adp.CodeTimestampOutOfWindow, name: "created_at_301s_ahead", run: func(t *testing.T, f *errFixture) *adptest.Response {
			ev := f.creator.Event(f.now(), "room.create", "", 0, "", roomPayload("public", f.now(), time.Hour))
			ev.CreatedAt = f.now() + 301_000
			return submit(t, f.h, "", f.creator.Sign(ev))
		}},
		{code: adp.CodeNonceNotGreater, name: "replayed_nonce", run: func(t *testing.T, f *errFixture) *adptest.Response {
			a := adptest.NewAgent("nonce-agent")
			first := a.Event(f.now(), "room.create", "", 0, "", roomPayload("public", f.now(), time.Hour))
			r := submit(t, f.h, "", a.Sign(first))
			expectStatus(t, r, http.StatusCreated)
			if r.Header.Get("Max-Seen-Nonce") != strconv.FormatInt(first.Nonce, 10) {
				t.Errorf("accepted write: Max-Seen-Nonce %q, want %d", r.Header.Get("Max-Seen-Nonce"), first.Nonce)
			}
			// A different event with a smaller nonce.
			second := a.Event(f.now(), "room.create", "", 0, "", roomPayload("public", f.now(), 2*time.Hour))
			second.Nonce = first.Nonce - 1
			f.nonceWant = first.Nonce
			return submit(t, f.h, "", a.Sign(second))
		}, check: func(t *testing.T, f *errFixture, r *adptest.Response) {
			if got := r.Header.Get("Max-Seen-Nonce"); got != strconv.FormatInt(f.nonceWant, 10) {
				t.Errorf("Max-Seen-Nonce header %q, want %d", got, f.nonceWant)
			}
		}},
		{code: adp.CodeRoomNotFound, name: "unknown_room", run: func(t *testing.T, f *errFixture) *adptest.Response {
			return get(t, f.h, f.bob, "/v1/rooms/d8ftedhpqhsusbg001tg")
		}},
		{code: adp.CodeRoomNotFound, name: "write_to_unknown_room", run: func(t *testing.T, f *errFixture) *adptest.Response {
			return submit(t, f.h, "d8ftedhpqhsusbg001tg", f.bob.Envelope(f.now(), "message.create", "d8ftedhpqhsusbg001tg", 1, zero32, msg("hi")))
		}},
		{code: adp.CodeRoomNotFound, name: "private_room_outsider", run: func(t *testing.T, f *errFixture) *adptest.Response {
			return get(t, f.h, f.bob, "/v1/rooms/"+f.room(t, "private", nil))
		}},
		{code: adp.CodeRoomNotFound, name: "join_request_in_unknown_room", run: func(t *testing.T, f *errFixture) *adptest.Response {
			id := f.room(t, "restricted", nil)
			jr := createJR(t, f.h, f.bob, id, "speaker")
			return get(t, f.h, f.bob, "/v1/rooms/d8ftedhpqhsusbg001tg/join-requests/"+jr.id())
		}},
		{code: adp.CodeRoomNotFound, name: "join_requests_of_private_room_outsider", run: func(t *testing.T, f *errFixture) *adptest.Response {
			return get(t, f.h, f.bob, "/v1/rooms/"+f.room(t, "private", nil)+"/join-requests")
		}},
		{code: adp.CodeRoomNotActive, name: "message_while_scheduled", run: func(t *testing.T, f *errFixture) *adptest.Response {
			id := createRoom(t, f.h, f.creator, roomPayload("public", f.now()+time.Hour.Milliseconds(), time.Hour))
			return f.h.Post(t, f.creator, id, "message.create", msg("too early"))
		}},
		{code: adp.CodeRoomNotActive, name: "cancel_active_room", run: func(t *testing.T, f *errFixture) *adptest.Response {
			return f.h.Post(t, f.creator, f.room(t, "public", nil), "room.cancel", map[string]any{})
		}},
		{code: adp.CodeRoomEnded, name: "message_after_close", run: func(t *testing.T, f *errFixture) *adptest.Response {
			id := f.room(t, "public", nil)
			f.h.MustPost(t, f.creator, id, "room.close", map[string]any{"reason": "done"})
			return f.h.Post(t, f.creator, id, "message.create", msg("too late"))
		}},
		{code: adp.CodePermissionDenied, name: "outsider_message", run: func(t *testing.T, f *errFixture) *adptest.Response {
			return f.h.Post(t, f.bob, f.room(t, "public", nil), "message.create", msg("let me in"))
		}},
		{code: adp.CodePermissionDenied, name: "list_join_requests_as_outsider", run: func(t *testing.T, f *errFixture) *adptest.Response {
			return get(t, f.h, f.bob, "/v1/rooms/"+f.room(t, "restricted", nil)+"/join-requests")
		}},
		{code: adp.CodeApprovalRequired, name: "direct_join_restricted", run: func(t *testing.T, f *errFixture) *adptest.Response {
			return f.h.Post(t, f.bob, f.room(t, "restricted", nil), "room.join", map[string]any{"role": "speaker"})
		}},
		{code: adp.CodeJoinRequestNotFound, name: "join_with_unknown_request", run: func(t *testing.T, f *errFixture) *adptest.Response {
			return f.h.Post(t, f.bob, f.room(t, "restricted", nil), "room.join", map[string]any{"role": "speaker", "request_id": "jr_unknown"})
		}},
		{code: adp.CodeJoinRequestNotFound, name: "get_unknown_request", run: func(t *testing.T, f *errFixture) *adptest.Response {
			return get(t, f.h, f.creator, "/v1/rooms/"+f.room(t, "restricted", nil)+"/join-requests/jr_unknown")
		}},
		{code: adp.CodeJoinRequestNotApproved, name: "join_with_pending_request", run: func(t *testing.T, f *errFixture) *adptest.Response {
			id := f.room(t, "restricted", nil)
			jr := createJR(t, f.h, f.bob, id, "speaker")
			return f.h.Post(t, f.bob, id, "room.join", map[string]any{"role": "speaker", "request_id": jr.id()})
		}},
		{code: adp.CodeJoinRequestRoleMismatch, name: "join_with_other_role", run: func(t *testing.T, f *errFixture) *adptest.Response {
			id := f.room(t, "public", nil)
			jr := createJR(t, f.h, f.bob, id, "speaker")
			return f.h.Post(t, f.bob, id, "room.join", map[string]any{"role": "observer", "request_id": jr.id()})
		}, check: func(t *testing.T, f *errFixture, r *adptest.Response) {
			if r.ErrorData()["approved_role"] != "speaker" {
				t.Errorf("data = %v", r.ErrorData())
			}
		}},
		{code: adp.CodeJoinRequestExpired, name: "consumed_request_reused", run: func(t *testing.T, f *errFixture) *adptest.Response {
			id := f.room(t, "public", nil)
			jr := createJR(t, f.h, f.bob, id, "speaker")
			f.h.MustPost(t, f.bob, id, "room.join", map[string]any{"role": "speaker", "request_id": jr.id()})
			f.h.MustPost(t, f.bob, id, "room.leave", map[string]any{})
			return f.h.Post(t, f.bob, id, "room.join", map[string]any{"role": "speaker", "request_id": jr.id()})
		}},
		{code: adp.CodeMemberBanned, name: "banned_direct_join", run: func(t *testing.T, f *errFixture) *adptest.Response {
			id := f.room(t, "public", nil)
			f.h.MustPost(t, f.creator, id, "room.member.remove", map[string]any{"member": string(f.bob.ID), "ban": true})
			return f.h.Post(t, f.bob, id, "room.join", map[string]any{"role": "speaker"})
		}},
		{code: adp.CodeRoleNotAllowed, name: "observer_join_when_not_allowed", run: func(t *testing.T, f *errFixture) *adptest.Response {
			id := f.room(t, "public", func(p map[string]any) { p["policy"] = map[string]any{"observer_allowed": false} })
			return f.h.Post(t, f.bob, id, "room.join", map[string]any{"role": "observer"})
		}},
		{code: adp.CodeRoleNotAllowed, name: "observer_request_when_not_allowed", run: func(t *testing.T, f *errFixture) *adptest.Response {
			id := f.room(t, "restricted", func(p map[string]any) { p["policy"] = map[string]any{"observer_allowed": false} })
			return sendJSON(t, f.h, f.bob, http.MethodPost, "/v1/rooms/"+id+"/join-requests", map[string]any{"role": "observer"})
		}},
		{code: adp.CodeMaxSpeakersExceeded, name: "speaker_over_quota", run: func(t *testing.T, f *errFixture) *adptest.Response {
			// The creator (moderator) already holds the one speaking seat.
			id := f.room(t, "public", func(p map[string]any) { p["policy"] = map[string]any{"max_speakers": 1} })
			return f.h.Post(t, f.bob, id, "room.join", map[string]any{"role": "speaker"})
		}},
		{code: adp.CodeMembershipRequired, name: "restricted_events_anonymous", run: func(t *testing.T, f *errFixture) *adptest.Response {
			return get(t, f.h, nil, "/v1/rooms/"+f.room(t, "restricted", nil)+"/events")
		}},
		{code: adp.CodeMembershipRequired, name: "sse_non_member", run: func(t *testing.T, f *errFixture) *adptest.Response {
			_, r := dialSSE(t, f.h, f.bob, f.room(t, "public", nil))
			return r
		}},
		{code: adp.CodeInvalidToken, name: "garbage_token", run: func(t *testing.T, f *errFixture) *adptest.Response {
			return adptest.Do(t, http.MethodGet, f.h.URL+"/v1/me/rooms", "not.a.jwt", nil)
		}},
		{code: adp.CodeInvalidToken, name: "wrong_audience", run: func(t *testing.T, f *errFixture) *adptest.Response {
			return adptest.Do(t, http.MethodGet, f.h.URL+"/v1/me/rooms", f.bob.Token("https://other.example", f.now()), nil)
		}, check: func(t *testing.T, f *errFixture, r *adptest.Response) {
			if r.ErrorData()["reason"] != "aud" {
				t.Errorf("data = %v", r.ErrorData())
			}
		}},
		{code: adp.CodeInvalidToken, name: "expired", run: func(t *testing.T, f *errFixture) *adptest.Response {
			// Expired ten minutes ago: beyond the 60 s skew.
			return adptest.Do(t, http.MethodGet, f.h.URL+"/v1/me/rooms", f.bob.Token(f.h.URL, f.now()-12*60_000), nil)
		}, check: func(t *testing.T, f *errFixture, r *adptest.Response) {
			if r.ErrorData()["reason"] != "expired" {
				t.Errorf("data = %v", r.ErrorData())
			}
		}},
		{code: adp.CodeInvalidToken, name: "missing_on_authenticated_endpoint", run: func(t *testing.T, f *errFixture) *adptest.Response {
			return get(t, f.h, nil, "/v1/me/rooms")
		}},
		{code: adp.CodeInvalidToken, name: "bad_token_on_optional_read", run: func(t *testing.T, f *errFixture) *adptest.Response {
			return adptest.Do(t, http.MethodGet, f.h.URL+"/v1/rooms/"+f.room(t, "public", nil), "garbage", nil)
		}},
		{code: adp.CodeRoomHeadMismatch, name: "stale_head", run: func(t *testing.T, f *errFixture) *adptest.Response {
			id := f.room(t, "public", nil)
			head := f.h.Head(t, f.creator, id)
			f.h.MustPost(t, f.creator, id, "message.create", msg("first"))
			return submit(t, f.h, id, f.creator.Envelope(f.now(), "message.create", id, head.Seq, head.Hash, msg("stale")))
		}, check: func(t *testing.T, f *errFixture, r *adptest.Response) {
			d := r.ErrorData()
			if d["base_seq"] != float64(1) || d["current_seq"] != float64(2) || !strings.HasSuffix(d["events_url"].(string), "/events?after_seq=1") {
				t.Errorf("data = %v", d)
			}
		}},
		{code: adp.CodeBaseRecordMismatch, name: "signal_on_unknown_record", run: func(t *testing.T, f *errFixture) *adptest.Response {
			id := f.room(t, "public", nil)
			return submit(t, f.h, id, f.creator.Envelope(f.now(), "reaction.create", id, 1, zero32,
				map[string]any{"event_id": zero32, "reaction": "agree"}))
		}},
		{code: adp.CodeAgentStatusNotFound, name: "no_status", run: func(t *testing.T, f *errFixture) *adptest.Response {
			return get(t, f.h, nil, "/v1/rooms/"+f.room(t, "public", nil)+"/agent-status/"+string(f.creator.ID))
		}},
		{code: adp.CodeRateLimited, name: "sixth_message_in_a_minute", run: func(t *testing.T, f *errFixture) *adptest.Response {
			id := f.room(t, "public", nil)
			for i := range 5 {
				f.h.MustPost(t, f.creator, id, "message.create", msg("m"+strconv.Itoa(i)))
			}
			return f.h.Post(t, f.creator, id, "message.create", msg("one too many"))
		}, check: func(t *testing.T, f *errFixture, r *adptest.Response) {
			if r.ErrorData()["limit_per_minute"] != float64(5) {
				t.Errorf("data = %v", r.ErrorData())
			}
			if ra, err := strconv.Atoi(r.Header.Get("Retry-After")); err != nil || ra < 1 || ra > 60 {
				t.Errorf("Retry-After %q", r.Header.Get("Retry-After"))
			}
		}},
		{code: adp.CodePayloadTooLarge, name: "body_over_1MiB", run: func(t *testing.T, f *errFixture) *adptest.Response {
			body := []byte(`{"hash":"` + strings.Repeat("a", 1<<20) + `"}`)
			return submit(t, f.h, "", body)
		}, check: func(t *testing.T, f *errFixture, r *adptest.Response) {
			if r.ErrorData()["limit"] != float64(1<<20) {
				t.Errorf("data = %v", r.ErrorData())
			}
		}},
		{code: adp.CodePayloadTooLarge, name: "payload_over_64KiB", run: func(t *testing.T, f *errFixture) *adptest.Response {
			return f.h.Post(t, f.creator, f.room(t, "public", nil), "message.create", msg(strings.Repeat("x", 65<<10)))
		}, check: func(t *testing.T, f *errFixture, r *adptest.Response) {
			if r.ErrorData()["limit"] != float64(64<<10) {
				t.Errorf("data = %v", r.ErrorData())
			}
		}},
		{code: adp.CodeTypeNotDefined, name: "undeclared_type", run: func(t *testing.T, f *errFixture) *adptest.Response {
			return f.h.Post(t, f.creator, f.room(t, "public", nil), "poll.create", map[string]any{"question": "?"})
		}},
		{code: adp.CodeTypeDisabled, name: "disabled_type", run: func(t *testing.T, f *errFixture) *adptest.Response {
			id := f.room(t, "public", func(p map[string]any) {
				p["types"] = []any{map[string]any{"type": "note.flag", "kind": "signal", "title": "Flag",
					"schema": map[string]any{"type": "object"}, "status": "disabled"}}
			})
			return f.h.Post(t, f.creator, id, "note.flag", map[string]any{})
		}},
		{code: adp.CodePayloadSchemaViolation, name: "reaction_without_event_id", run: func(t *testing.T, f *errFixture) *adptest.Response {
			return f.h.Post(t, f.creator, f.room(t, "public", nil), "reaction.create", map[string]any{"reaction": "agree"})
		}},
		{code: adp.CodePackUnavailable, name: "external_pack_not_https", run: func(t *testing.T, f *errFixture) *adptest.Response {
			// Refused before any connection: plain HTTP, private fetches off.
			return f.h.Post(t, f.creator, f.room(t, "public", nil), "type.define",
				map[string]any{"pack": "http://127.0.0.1:1/pack.json", "digest": "sha256:" + zero32})
		}},
		{code: adp.CodeNotFound, name: "unknown_endpoint", run: func(t *testing.T, f *errFixture) *adptest.Response {
			return get(t, f.h, nil, "/v1/nothing-here")
		}},
		{code: adp.CodeArchiveUnavailable, name: "archive_of_active_room", run: func(t *testing.T, f *errFixture) *adptest.Response {
			return get(t, f.h, nil, "/v1/rooms/"+f.room(t, "public", nil)+"/archive")
		}, check: func(t *testing.T, f *errFixture, r *adptest.Response) {
			if r.ErrorData()["status"] != "active" {
				t.Errorf("data = %v", r.ErrorData())
			}
		}},
		{code: adp.CodeUnavailable, name: "node_closing", run: func(t *testing.T, f *errFixture) *adptest.Response {
			// A second host whose node is shut down under its HTTP server.
			h := adptest.StartHost(t, node.Config{})
			h.Node.Close()
			r := submit(t, h, "", f.creator.Envelope(h.Clock.Ms(), "room.create", "", 0, "", roomPayload("public", h.Clock.Ms(), time.Hour)))
			expectCode(t, r, adp.CodeUnavailable)
			if r.Header.Get("Retry-After") == "" {
				t.Error("unavailable write without Retry-After")
			}
			return get(t, h, nil, "/readyz")
		}},
	}
}

// TestErrorCodes walks every code the host can answer (hostapi.ErrorCodes)
// and provokes each over real HTTP, asserting the exact code and the HTTP
// status of the one table. internal_error is the only code without a case:
// it is what an unexpected host failure (a storage read error, a corrupt
// stored record) turns into, and no request can provoke one on a healthy
// node.
func TestErrorCodes(t *testing.T) {
	f := &errFixture{h: adptest.StartHost(t, node.Config{}),
		creator: adptest.NewAgent("err-creator"), bob: adptest.NewAgent("err-bob")}
	unreachable := map[adp.Code]string{adp.CodeInternal: "only unexpected host failures",
		adp.CodeRelayFailed: "needs a federation: federation.TestRelayOverHTTP provokes it",
		// The witness codes need a mirror's witness (a federation) or a
		// witness.Witness: witness.TestAddCheckpointHostile and
		// TestAddCheckpointAndRestart provoke each over HTTP with its
		// status and code, mirror.TestMirrorWitnessCatchesForkedHost on
		// POST /v1/witness/add-checkpoint.
		adp.CodeUntrustedCheckpoint:    "a witness: witness.TestAddCheckpointHostile",
		adp.CodeCheckpointStale:        "a witness: witness.TestAddCheckpointAndRestart",
		adp.CodeInconsistentCheckpoint: "a witness: witness.TestAddCheckpointHostile"}

	cases := errCases()
	covered := map[adp.Code]bool{}
	table := hostapi.ErrorCodes()
	for _, c := range cases {
		if _, ok := table[c.code]; !ok {
			t.Errorf("case %s/%s: code not in hostapi.ErrorCodes()", c.code, c.name)
		}
		covered[c.code] = true
	}
	codes := make([]string, 0, len(table))
	for c := range table {
		codes = append(codes, string(c))
	}
	sort.Strings(codes)
	for _, c := range codes {
		if !covered[adp.Code(c)] && unreachable[adp.Code(c)] == "" {
			t.Errorf("error code %s has no test case", c)
		}
	}
	// Every ADP §20 code is in the table.
	for _, c := range []adp.Code{adp.CodeInvalidEvent, adp.CodeInvalidEventHash, adp.CodeInvalidSignature, adp.CodeInvalidActor,
		adp.CodeTimestampOutOfWindow, adp.CodeNonceNotGreater, adp.CodeRoomNotFound, adp.CodeRoomNotActive, adp.CodeRoomEnded,
		adp.CodePermissionDenied, adp.CodeApprovalRequired, adp.CodeJoinRequestNotFound, adp.CodeJoinRequestNotApproved,
		adp.CodeJoinRequestRoleMismatch, adp.CodeJoinRequestExpired, adp.CodeMemberBanned, adp.CodeRoleNotAllowed,
		adp.CodeMaxSpeakersExceeded, adp.CodeMembershipRequired, adp.CodeInvalidToken, adp.CodeRoomHeadMismatch,
		adp.CodeBaseRecordMismatch, adp.CodeAgentStatusNotFound, adp.CodeRateLimited, adp.CodePayloadTooLarge,
		adp.CodeTypeNotDefined, adp.CodeTypeDisabled, adp.CodePayloadSchemaViolation, adp.CodePackUnavailable} {
		if _, ok := table[c]; !ok {
			t.Errorf("§20 code %s missing from the status table", c)
		}
	}

	for _, c := range cases {
		t.Run(string(c.code)+"/"+c.name, func(t *testing.T) {
			r := c.run(t, f)
			if r == nil {
				t.Fatal("case returned no response")
			}
			expectCode(t, r, c.code)
			if !strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
				t.Errorf("error Content-Type %q", r.Header.Get("Content-Type"))
			}
			var body struct {
				Error struct {
					Code    string         `json:"code"`
					Message string         `json:"message"`
					Data    map[string]any `json:"data"`
				} `json:"error"`
			}
			if err := r.JSON(&body); err != nil || body.Error.Message == "" || body.Error.Data == nil {
				t.Errorf("error body is not the §20 shape: %s", r)
			}
			if c.check != nil {
				c.check(t, f, r)
			}
		})
	}
}

// TestStatusTable pins the DECISIONS 4 classes of the status table.
func TestStatusTable(t *testing.T) {
	want := map[int][]adp.Code{
		400: {adp.CodeInvalidRequest, adp.CodeInvalidEvent, adp.CodeInvalidEventHash, adp.CodeInvalidSignature, adp.CodeInvalidActor, adp.CodeTimestampOutOfWindow},
		401: {adp.CodeInvalidToken},
		403: {adp.CodePermissionDenied, adp.CodeApprovalRequired, adp.CodeMemberBanned, adp.CodeMembershipRequired},
		404: {adp.CodeRoomNotFound, adp.CodeJoinRequestNotFound, adp.CodeAgentStatusNotFound},
		409: {adp.CodeRoomHeadMismatch, adp.CodeBaseRecordMismatch, adp.CodeNonceNotGreater},
		413: {adp.CodePayloadTooLarge},
		422: {adp.CodePayloadSchemaViolation},
		429: {adp.CodeRateLimited},
	}
	for status, codes := range want {
		for _, c := range codes {
			if got := hostapi.StatusOf(c); got != status {
				t.Errorf("StatusOf(%s) = %d, want %d", c, got, status)
			}
		}
	}
	if hostapi.StatusOf("no_such_code") != 500 {
		t.Error("unknown codes must map to 500")
	}
}
