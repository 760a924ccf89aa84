//go:build e2e

package client_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/adpnode/adpnode/adp"
	"github.com/adpnode/adpnode/adp/identity"
	"github.com/adpnode/adpnode/client"
	"github.com/adpnode/adpnode/internal/adptest"
	"github.com/adpnode/adpnode/node"
)

// Property: an agent sets its profile through the client and anyone looks
// it up verified; the client takes the name from the signed envelope, so
// a host that serves another agent's profile, or edits the name beside
// the envelope, is caught.
func TestClientProfile(t *testing.T) {
	h := adptest.StartHost(t, node.Config{})
	ctx := context.Background()
	alice, bob := newClient(t, h, "alice"), newClient(t, h, "bob")
	p, err := alice.SetProfile(ctx, "Alice", []string{"research"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if p.Name != "Alice" || p.AgentID != alice.Key.ID || p.Label() != "Alice ("+string(alice.Key.ID)[10:18]+")" {
		t.Fatalf("set: %+v %q", p, p.Label())
	}
	// The agent's room writes go on after the nonce the profile spent.
	if _, err := alice.CreateRoom(ctx, h.RoomPayload("public")); err != nil {
		t.Fatal(err)
	}
	anon := client.New(h.URL, nil)
	got, err := anon.Profile(ctx, alice.Key.ID, "")
	if err != nil || got.Name != "Alice" || strings.Join(got.Capabilities, ",") != "research" {
		t.Fatalf("lookup: %+v %v", got, err)
	}
	if _, err := anon.Profile(ctx, bob.Key.ID, ""); client.CodeOf(err) != adp.CodeNotFound {
		t.Fatalf("no profile: %v", err)
	}
	all, err := anon.Profiles(ctx, []identity.AgentID{alice.Key.ID, bob.Key.ID}, "")
	if err != nil || len(all) != 1 || all[alice.Key.ID].Name != "Alice" {
		t.Fatalf("batch: %v %v", all, err)
	}

	// A lying host: Alice's envelope served as Bob's, and a wrapper whose
	// name differs from the signed one.
	var served map[string]any
	if err := json.Unmarshal(mustGet(t, h.URL+"/v1/profiles/"+string(alice.Key.ID)), &served); err != nil {
		t.Fatal(err)
	}
	liar := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m := map[string]any{}
		for k, v := range served {
			m[k] = v
		}
		m["name"] = "Root Admin"
		if strings.Contains(r.URL.Path, string(bob.Key.ID)) {
			m["agent_id"] = string(bob.Key.ID)
		}
		_ = json.NewEncoder(w).Encode(m)
	}))
	defer liar.Close()
	lc := client.New(liar.URL, nil)
	if _, err := lc.Profile(ctx, bob.Key.ID, ""); err == nil {
		t.Fatal("a profile signed by Alice was taken as Bob's")
	}
	if p, err := lc.Profile(ctx, alice.Key.ID, ""); err != nil || p.Name != "Alice" {
		t.Fatalf("the host's wrapper name was believed: %+v %v", p, err)
	}
}

func mustGet(t *testing.T, url string) []byte {
	t.Helper()
	r := adptest.Do(t, http.MethodGet, url, "", nil)
	if r.Status != http.StatusOK {
		t.Fatalf("GET %s: %d", url, r.Status)
	}
	return r.Body
}
