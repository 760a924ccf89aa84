//go:build e2e

package node_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/adpnode/adpnode/adp/types"
	"github.com/adpnode/adpnode/internal/adptest"
	"github.com/adpnode/adpnode/node"
)

// An attacker whose key shares the victim's actor-lock stripe
// creates a room whose external pack answers slowly. The fetch runs before
// any shared lock, so the victim's unrelated write is not held up.
func TestAttackSlowPackSharesStripe(t *testing.T) {
	arrived, release := make(chan struct{}, 4), make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		w.Write([]byte(triagePack))
	}))
	defer srv.Close()
	defer close(release)
	h := adptest.StartHost(t, node.Config{Packs: node.PackFetchConfig{AllowPrivate: true, Timeout: 20 * time.Second}})
	// Two keys on one stripe (a birthday search: ~80 keys for 4096
	// stripes); the first is the victim.
	var victim, attacker *adptest.Agent
	seen := map[int]*adptest.Agent{}
	for i := 0; attacker == nil; i++ {
		a := adptest.NewAgent(fmt.Sprint("stripe-", i))
		if v, ok := seen[node.ActorStripe(a.ID)]; ok {
			victim, attacker = v, a
		}
		seen[node.ActorStripe(a.ID)] = a
		if i > 100000 {
			t.Fatal("no two keys on one stripe")
		}
	}
	room := h.CreateRoom(t, victim, h.RoomPayload("public"))
	p := h.RoomPayload("public")
	p["types"] = []any{map[string]any{"pack": srv.URL + "/slow.json", "digest": types.Digest([]byte(triagePack))}}
	env := attacker.Envelope(h.Clock.Ms(), "room.create", "", 0, "", p)
	done := make(chan *adptest.Response, 1)
	go func() {
		r, _ := tryPost(h.URL+"/v1/rooms", env)
		done <- r
	}()
	select {
	case <-arrived:
	case <-time.After(20 * time.Second):
		t.Fatal("the pack server was never asked")
	}
	// The attacker's fetch is in flight: the victim writes, twice, and both
	// writes are accepted while the fetch is still held (checked below: the
	// attacker's create has not finished), so neither waited on it.
	for i := 0; i < 2; i++ {
		h.MustPost(t, victim, room, "message.create", map[string]any{"content_type": "text/plain", "content": "hello"})
	}
	select {
	case r := <-done:
		t.Fatalf("the attacker's create finished before its pack arrived: %v", r)
	default:
	}
	release <- struct{}{}
	select {
	case r := <-done:
		if r == nil || r.Status != http.StatusCreated {
			t.Fatalf("attacker's create after the slow pack: %v", r)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the attacker's create never finished")
	}
}

func tryPost(url string, body []byte) (*adptest.Response, error) {
	resp, err := http.Post(url, "application/json", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return &adptest.Response{Status: resp.StatusCode, Header: resp.Header, Body: b}, err
}

// 40 room.create with a wrong pack digest dial once (the failure is
// cached per URL and digest); 40 with 40 different wrong digests dial at
// most the room.create quota, because every fetch is charged before it
// dials. Another agent is unaffected.
func TestAttackWrongDigestCreates(t *testing.T) {
	var fetches atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fetches.Add(1)
		w.Write([]byte(triagePack))
	}))
	defer srv.Close()
	rates := node.DefaultRates()
	rates.Create = 5
	h := adptest.StartHost(t, node.Config{Rates: rates, Packs: node.PackFetchConfig{AllowPrivate: true}})
	mallory, bob := adptest.NewAgent("mallory"), adptest.NewAgent("bob")
	create := func(a *adptest.Agent, digest string) *adptest.Response {
		p := h.RoomPayload("public")
		p["types"] = []any{map[string]any{"pack": srv.URL + "/triage.json", "digest": digest}}
		return adptest.Do(t, http.MethodPost, h.URL+"/v1/rooms", "", a.Envelope(h.Clock.Ms(), "room.create", "", 0, "", p))
	}
	wrong := "sha256:" + strings.Repeat("A", 43)
	for i := 0; i < 40; i++ {
		if r := create(mallory, wrong); r.ErrorCode() != "pack_unavailable" {
			t.Fatalf("wrong digest %d: %s", i, r)
		}
	}
	if n := fetches.Load(); n != 1 {
		t.Fatalf("40 creates with one wrong digest made %d fetches, want 1", n)
	}
	limited := 0
	for i := 0; i < 40; i++ {
		d := "sha256:" + strings.Repeat("A", 40) + fmt.Sprintf("%03d", i)
		switch r := create(mallory, d); r.ErrorCode() {
		case "pack_unavailable":
		case "rate_limited":
			limited++
		default:
			t.Fatalf("distinct wrong digest %d: %s", i, r)
		}
	}
	if n := fetches.Load(); n > int32(rates.Create) {
		t.Fatalf("80 hostile creates made %d outbound fetches (quota %d)", n, rates.Create)
	}
	if limited < 35 {
		t.Fatalf("only %d of 40 creates were rate limited", limited)
	}
	// The honest agent's create with the right digest still works.
	if r := create(bob, types.Digest([]byte(triagePack))); r.Status != http.StatusCreated {
		t.Fatalf("bob: %s", r)
	}
}

// Pack URLs in every non-public range are refused without a dial,
// with a generic message; loopback is allowed only when the operator says.
func TestPackSSRFRanges(t *testing.T) {
	h := adptest.StartHost(t, node.Config{})
	alice := adptest.NewAgent("alice")
	d := "sha256:" + strings.Repeat("C", 43)
	for _, host := range []string{"127.0.0.1", "100.64.0.1", "198.18.0.1", "192.0.0.1", "240.0.0.1", "[64:ff9b::7f00:1]", "[::ffff:127.0.0.1]", "169.254.169.254", "10.0.0.1"} {
		p := h.RoomPayload("public")
		p["types"] = []any{map[string]any{"pack": "https://" + host + ":1/p.json", "digest": d}}
		// "not a public address" is said before any dial, so the node
		// did not wait on an address that does not answer.
		r := adptest.Do(t, http.MethodPost, h.URL+"/v1/rooms", "", alice.Envelope(h.Clock.Ms(), "room.create", "", 0, "", p))
		if r.ErrorCode() != "pack_unavailable" || !strings.Contains(string(r.Body), "not a public address") {
			t.Errorf("%s: %s", host, r)
		}
		if strings.Contains(string(r.Body), "dial") || strings.Contains(string(r.Body), "connect") {
			t.Errorf("%s: raw dial error echoed: %s", host, r)
		}
	}
}
