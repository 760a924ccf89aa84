//go:build e2e

package adpmcp_test

import (
	"testing"
	"time"

	"github.com/adpnode/adpnode/internal/adptest"
	"github.com/adpnode/adpnode/internal/testwait"
	"github.com/adpnode/adpnode/stack"
)

type subsOut struct {
	Subscriptions []struct {
		SubscriptionID string `json:"subscription_id"`
		Changes        []struct {
			RoomID string `json:"room_id"`
			Kind   string `json:"kind"`
			Topic  string `json:"topic"`
		} `json:"changes"`
	} `json:"subscriptions"`
}

// Property: directory subscriptions made through the tools report each
// matching new room once, across a restart of the server on its state
// directory, and end with unsubscribe.
func TestDirectorySubscriptionsResumeAcrossRestart(t *testing.T) {
	h := adptest.StartHost(t, stack.NodeConfig{})
	alice := startAgent(t, h.URL, h.Clock, newKey(t), t.TempDir(), nil, agentOpts{})
	bobKey, bobState := newKey(t), t.TempDir()
	bob := startAgent(t, h.URL, h.Clock, bobKey, bobState, nil, agentOpts{})
	var sub struct {
		SubscriptionID string `json:"subscription_id"`
	}
	bob.must("subscribe_directory", map[string]any{"tags": []string{"chess"}}, &sub)
	var r1, r2 createOut
	alice.must("create_room", map[string]any{"topic": "openings", "tags": []string{"chess"}}, &r1)
	alice.must("create_room", map[string]any{"topic": "cooking", "tags": []string{"food"}}, &r2)
	var got subsOut
	testwait.Until(t, 30*time.Second, "the new chess room is reported", func() bool {
		bob.must("list_subscriptions", map[string]any{}, &got)
		return len(got.Subscriptions) == 1 && len(got.Subscriptions[0].Changes) > 0
	})
	if c := got.Subscriptions[0].Changes; len(c) != 1 || c[0].RoomID != r1.RoomID || c[0].Kind != "appeared" {
		t.Fatalf("changes: %+v", c)
	}
	bob.stop()
	var r3 createOut
	alice.must("create_room", map[string]any{"topic": "endgames", "tags": []string{"chess"}}, &r3)
	bob = startAgent(t, h.URL, h.Clock, bobKey, bobState, nil, agentOpts{})
	testwait.Until(t, 30*time.Second, "the room made during the restart is reported", func() bool {
		bob.must("list_subscriptions", map[string]any{}, &got)
		return len(got.Subscriptions) == 1 && len(got.Subscriptions[0].Changes) > 0
	})
	if c := got.Subscriptions[0].Changes; len(c) != 1 || c[0].RoomID != r3.RoomID {
		t.Fatalf("after the restart: %+v (want only %s)", c, r3.RoomID)
	}
	bob.must("unsubscribe", map[string]any{"subscription_id": sub.SubscriptionID}, nil)
	bob.must("list_subscriptions", map[string]any{}, &got)
	if len(got.Subscriptions) != 0 {
		t.Fatalf("after unsubscribe: %+v", got)
	}
}
