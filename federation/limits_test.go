package federation

import (
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/adpnode/adpnode/adp/identity"
)

// One host key gets its burst and then its rate, whatever it sends; other
// keys are unaffected; the bucket map stays bounded under many keys.
func TestHostRate(t *testing.T) {
	r := newHostRate(100, 10)
	now := time.Unix(1000, 0)
	n := 0
	for i := 0; i < 1000; i++ {
		if r.allow("did:agent:flooder", now) {
			n++
		}
	}
	if n != 100 {
		t.Fatalf("burst let %d through, want 100", n)
	}
	if !r.allow("did:agent:honest", now) {
		t.Fatal("another host was limited")
	}
	now = now.Add(time.Second)
	n = 0
	for i := 0; i < 1000; i++ {
		if r.allow("did:agent:flooder", now) {
			n++
		}
	}
	if n != 10 {
		t.Fatalf("after 1 s %d through, want 10", n)
	}
	for i := 0; i < maxRateBuckets+10; i++ {
		r.allow(identity.AgentID("did:agent:k"+string(rune(i))), now)
	}
	if len(r.buckets) > maxRateBuckets {
		t.Fatalf("%d buckets", len(r.buckets))
	}
}

// A peer holds at most max slots; released slots are reusable and
// forgotten.
func TestPeerSlots(t *testing.T) {
	s := peerSlots{max: 2}
	id := peer.ID("p")
	first, second, third := s.acquire(id), s.acquire(id), s.acquire(id)
	if !first || !second || third {
		t.Fatal("limit of 2 not enforced")
	}
	if !s.acquire("q") {
		t.Fatal("another peer refused")
	}
	s.release(id)
	if !s.acquire(id) {
		t.Fatal("released slot not reusable")
	}
	s.release(id)
	s.release(id)
	s.release("q")
	if len(s.n) != 0 {
		t.Fatalf("slots not forgotten: %v", s.n)
	}
}

// Property: a peer's pull budget gives it at most its requests, bytes and
// ids per window on the injected clock, all or nothing per take, refills
// evenly, leaves other peers alone, and keeps a bounded bucket map.
func TestPullBudget(t *testing.T) {
	now := time.Unix(1000, 0)
	p := newPullBudget(PullLimits{Window: time.Minute, Requests: 10, Bytes: 1000, IDs: 100}, func() time.Time { return now })
	if p.take("a", 1, 1001, 0) || p.take("a", 0, 0, 101) || p.take("a", 11, 0, 0) {
		t.Fatal("a take beyond the window's budget passed")
	}
	if !p.take("a", 1, 600, 60) {
		t.Fatal("a take within the budget refused")
	}
	if p.take("a", 1, 500, 0) {
		t.Fatal("bytes overspent")
	}
	if !p.take("a", 1, 400, 40) {
		t.Fatal("a failed take spent something")
	}
	if p.take("a", 0, 1, 0) || p.take("a", 0, 0, 1) {
		t.Fatal("an empty bucket gave more")
	}
	if !p.take("b", 1, 1000, 100) {
		t.Fatal("another peer was limited")
	}
	now = now.Add(30 * time.Second) // half a window: half the budget
	if !p.take("a", 0, 500, 50) || p.take("a", 0, 1, 0) {
		t.Fatal("half a window did not refill half the budget exactly")
	}
	now = now.Add(time.Hour)
	if !p.take("a", 10, 1000, 100) || p.take("a", 1, 0, 0) {
		t.Fatal("a long pause refilled more than one window's budget")
	}
	for i := 0; i < maxPullBuckets+10; i++ {
		p.take(peer.ID("k"+string(rune(i))), 1, 0, 0)
	}
	if len(p.m) > maxPullBuckets {
		t.Fatalf("%d buckets", len(p.m))
	}
}
