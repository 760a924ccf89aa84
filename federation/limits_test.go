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
	if !s.acquire(id) || !s.acquire(id) || s.acquire(id) {
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
