//go:build e2e

package federation_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/adpnode/adpnode/adp/room"
	"github.com/adpnode/adpnode/federation"
	"github.com/adpnode/adpnode/internal/adptest"
	"github.com/adpnode/adpnode/internal/testwait"
)

// The HTTP face of the federation: the federated directory with scope,
// relay submit through the standard write endpoint, relay_failed when the
// host is gone, and the host binding in discovery, cross-checked.
func TestRelayOverHTTP(t *testing.T) {
	peers := network(t, 3, nil)
	a, c := peers[0], peers[2]
	alice := adptest.NewAgent("alice")
	id := createRoom(t, a, alice, room.Public, "over http")
	testwait.Until(t, 20*time.Second, "listed on C", func() bool { _, ok := listed(c, id); return ok })

	// Directory: federated by default, local on request.
	var dir struct {
		Result []struct {
			ID, URL, Host string
		} `json:"result"`
	}
	r := adptest.Do(t, http.MethodGet, c.URL+"/v1/rooms/public?tag=fed", "", nil)
	if r.JSON(&dir); len(dir.Result) != 1 || dir.Result[0].ID != id || dir.Result[0].URL != a.URL+"/v1/rooms/"+id || dir.Result[0].Host != a.Node.Host() {
		t.Fatalf("federated directory on C: %s", r)
	}
	r = adptest.Do(t, http.MethodGet, c.URL+"/v1/rooms/public?scope=local", "", nil)
	if r.JSON(&dir); len(dir.Result) != 0 {
		t.Fatalf("local directory on C lists remote rooms: %s", r)
	}
	if r = adptest.Do(t, http.MethodGet, c.URL+"/v1/rooms/public?scope=galaxy", "", nil); r.ErrorCode() != "invalid_request" {
		t.Fatalf("bad scope: %s", r)
	}

	// Relay through C's ordinary write endpoint.
	head, _ := a.Node.Room(id, "")
	body := alice.Envelope(a.Clock.Ms(), "message.create", id, head.Head.Seq, head.Head.Hash, map[string]any{"content_type": "text/plain", "content": "through C"})
	r = adptest.Do(t, http.MethodPost, c.URL+"/v1/rooms/"+id, "", body)
	if r.Status != http.StatusCreated || r.Header.Get("X-ADP-Relayed") != "true" || r.Header.Get("Max-Seen-Nonce") == "" {
		t.Fatalf("relay: %s %v", r, r.Header)
	}
	onA := adptest.Do(t, http.MethodGet, a.URL+"/v1/rooms/"+id+"/events?after_seq=1", "", nil)
	var evs struct {
		Result []json.RawMessage `json:"result"`
	}
	onA.JSON(&evs)
	if len(evs.Result) != 1 || string(evs.Result[0])+"\n" != string(r.Body) {
		t.Fatalf("record returned by C differs from A's:\n%s\n%s", r.Body, onA.Body)
	}
	// A's rejection (a stale head) comes back with its data.
	stale := alice.Envelope(a.Clock.Ms(), "message.create", id, head.Head.Seq, head.Head.Hash, map[string]any{"content_type": "text/plain", "content": "stale"})
	r = adptest.Do(t, http.MethodPost, c.URL+"/v1/rooms/"+id, "", stale)
	if d := r.ErrorData(); r.Status != http.StatusConflict || r.ErrorCode() != "room_head_mismatch" || d["current_seq"] != float64(2) || d["events_url"] == nil {
		t.Fatalf("relayed rejection: %s", r)
	}

	// Discovery publishes the binding; C's cross-check confirms A's.
	var doc struct {
		HostKey  string   `json:"host_key"`
		PeerID   string   `json:"peer_id"`
		P2PAddrs []string `json:"p2p_addrs"`
	}
	adptest.Do(t, http.MethodGet, a.URL+"/.well-known/agent-discourse", "", nil).JSON(&doc)
	if doc.HostKey != string(a.Fed.HostKey()) || doc.PeerID != a.Fed.PeerID().String() || len(doc.P2PAddrs) == 0 {
		t.Fatalf("discovery binding: %+v", doc)
	}
	var bound bool
	for _, h := range c.Fed.KnownHosts() {
		if h.Key == a.Fed.HostKey() {
			if err := c.Fed.CheckBinding(context.Background(), h.Binding); err != nil {
				t.Fatalf("binding check: %v", err)
			}
			bound = true
		}
	}
	if !bound {
		t.Fatal("C does not know A's binding")
	}
	var hosts struct {
		Result []federation.HostInfo `json:"result"`
	}
	adptest.Do(t, http.MethodGet, c.URL+"/v1/federation/hosts", "", nil).JSON(&hosts)
	verified := false
	for _, h := range hosts.Result {
		verified = verified || h.Key == a.Fed.HostKey() && h.Verified
	}
	if !verified {
		t.Fatalf("hosts endpoint: %+v", hosts.Result)
	}
	// A forged binding (A's key with another origin) fails the check.
	forged := a.Fed.Binding()
	forged.Origin = c.URL
	if err := c.Fed.CheckBinding(context.Background(), forged); err == nil {
		t.Fatal("a binding to the wrong origin was confirmed")
	}

	// With A gone, C answers relay_failed (502) and nothing is accepted.
	a.Stop()
	r = adptest.Do(t, http.MethodPost, c.URL+"/v1/rooms/"+id, "", body)
	if r.Status != http.StatusBadGateway || r.ErrorCode() != "relay_failed" {
		t.Fatalf("relay to a stopped host: %s", r)
	}
}
