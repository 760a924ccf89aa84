package index_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/adpnode/adpnode/adp"
	"github.com/adpnode/adpnode/adp/assertion"
	"github.com/adpnode/adpnode/adp/identity"
	"github.com/adpnode/adpnode/index"
)

const issued int64 = 1_780_000_000_000

// announcement returns a valid announcement's payload as a generic map, so
// tests can break one field at a time and sign the result.
func announcement(t *testing.T, h host) map[string]any {
	t.Helper()
	e := h.entry(t, roomID(1), issued, issued, issued+60_000)
	b, err := json.Marshal(e.Announcement)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestParseAnnouncement(t *testing.T) {
	h := newHost(t, "host", 8080)
	e := h.entry(t, roomID(1), issued, issued-5, issued+60_000)
	if e.Host.Key != h.signer.HostKey() || e.Room.ID != roomID(1) || e.IssuedAt != issued || e.ExpiresAt != issued+60_000 || e.Nonce < 1 {
		t.Fatalf("entry %+v", e)
	}
	again, err := index.Parse(e.Raw)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := json.Marshal(e.Announcement)
	b, _ := json.Marshal(again.Announcement)
	if string(a) != string(b) || again.Nonce != e.Nonce {
		t.Fatalf("parsing the same bytes twice differs:\n%s\n%s", a, b)
	}
}

// TestParseRefusesAnnouncements: hostile announcements, each refused with
// the reason given.
func TestParseRefusesAnnouncements(t *testing.T) {
	h, other := newHost(t, "host", 8080), newHost(t, "other", 8081)
	room := func(m map[string]any) map[string]any { return m["room"].(map[string]any) }
	for _, c := range []struct {
		name   string
		by     host
		typ    string
		break_ func(m map[string]any)
		code   adp.Code
		reason string
	}{
		{"signed by another key", other, assertion.TypeAnnounce, func(m map[string]any) {}, adp.CodeInvalidEvent, "wrong_key"},
		{"not an announcement", h, assertion.TypeCheckpoint, func(m map[string]any) {}, adp.CodeInvalidEvent, "assertion_type"},
		{"bad room ID", h, assertion.TypeAnnounce, func(m map[string]any) { room(m)["id"] = "../../etc" }, adp.CodeInvalidEvent, "room_id"},
		{"private room", h, assertion.TypeAnnounce, func(m map[string]any) { room(m)["visibility"] = "private" }, adp.CodeInvalidEvent, "private"},
		{"unknown visibility", h, assertion.TypeAnnounce, func(m map[string]any) { room(m)["visibility"] = "secret" }, adp.CodeInvalidEvent, "visibility"},
		{"expires before issue", h, assertion.TypeAnnounce, func(m map[string]any) { m["expires_at"] = issued }, adp.CodeInvalidEvent, "expiry"},
		{"origin with a path", h, assertion.TypeAnnounce, func(m map[string]any) { m["host"].(map[string]any)["origin"] = "http://127.0.0.1:8080/x" }, adp.CodeInvalidEvent, "origin"},
		{"origin not http", h, assertion.TypeAnnounce, func(m map[string]any) { m["host"].(map[string]any)["origin"] = "file:///etc" }, adp.CodeInvalidEvent, "origin"},
		{"room URL on another origin", h, assertion.TypeAnnounce, func(m map[string]any) {
			room(m)["url"] = "http://127.0.0.1:9999/v1/rooms/" + roomID(1)
		}, adp.CodeInvalidEvent, "room_url"},
		{"room host not the origin's", h, assertion.TypeAnnounce, func(m map[string]any) { room(m)["host"] = "127.0.0.1:9999" }, adp.CodeInvalidEvent, "room_url"},
		{"payload field of the wrong type", h, assertion.TypeAnnounce, func(m map[string]any) { m["expires_at"] = "soon" }, adp.CodeInvalidEvent, "payload"},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := announcement(t, h)
			c.break_(m)
			raw, err := c.by.signer.Sign(c.typ, m, issued)
			if err != nil {
				t.Fatal(err)
			}
			_, err = index.Parse(raw)
			var e *adp.Error
			if !errors.As(err, &e) || e.Code != c.code || e.Data["reason"] != c.reason {
				t.Fatalf("Parse = %v, want %s %s", err, c.code, c.reason)
			}
		})
	}
	t.Run("oversize", func(t *testing.T) {
		m := announcement(t, h)
		room(m)["topic"] = strings.Repeat("x", index.MaxAnnouncementBytes)
		raw, err := h.signer.Sign(assertion.TypeAnnounce, m, issued)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := index.Parse(raw); adp.CodeOf(err) != adp.CodePayloadTooLarge {
			t.Fatalf("Parse = %v, want payload_too_large", err)
		}
	})
	t.Run("tampered", func(t *testing.T) {
		raw := h.entry(t, roomID(1), issued, issued, issued+60_000).Raw
		bad := []byte(strings.Replace(string(raw), roomID(1), roomID(2), -1))
		if _, err := index.Parse(bad); err == nil {
			t.Fatal("tampered announcement parsed")
		}
	})
}

// FuzzParse: whatever index.Parse accepts is an envelope signed by the
// host key it names, keeps its bytes, and parses again to the same entry.
func FuzzParse(f *testing.F) {
	seed := make([]byte, 32)
	copy(seed, "host")
	k, err := identity.KeyFromSeed(seed)
	if err != nil {
		f.Fatal(err)
	}
	h := host{signer: assertion.NewSigner(k), origin: "http://127.0.0.1:8080"}
	for i, vis := range []string{"public", "restricted"} {
		m := map[string]any{"room": map[string]any{"id": roomID(i), "url": h.origin + "/v1/rooms/" + roomID(i), "host": h.origin[len("http://"):],
			"status": "active", "visibility": vis, "topic": "t", "creator": string(h.signer.HostKey()), "seq": 1,
			"head": map[string]any{"seq": 1, "hash": identity.EncodeB64(make([]byte, 32))}, "members": 1, "last_active": issued},
			"host": map[string]any{"key": string(h.signer.HostKey()), "peer_id": "p", "origin": h.origin}, "expires_at": issued + 1}
		raw, err := h.signer.Sign(assertion.TypeAnnounce, m, issued)
		if err != nil {
			f.Fatal(err)
		}
		if _, err := index.Parse(raw); err != nil {
			f.Fatalf("seed %d: %v", i, err)
		}
		f.Add(raw)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := index.Parse(b)
		if err != nil {
			if adp.CodeOf(err) == adp.CodeInternal {
				t.Fatalf("error without an ADP code: %v", err)
			}
			return
		}
		env, err := identity.OpenEnvelope(b)
		if err != nil || env.Event.Actor != e.Host.Key || string(e.Raw) != string(b) {
			t.Fatalf("accepted an announcement that is not its host's: %v", err)
		}
		again, err := index.Parse(e.Raw)
		if err != nil || again.Nonce != e.Nonce || again.Room.ID != e.Room.ID || again.Host.Key != e.Host.Key || again.Host.Origin != e.Host.Origin {
			t.Fatalf("re-parse differs: %v", err)
		}
	})
}
