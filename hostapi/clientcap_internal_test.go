package hostapi

import (
	"net/http"
	"testing"
)

// The per-client viewer cap counts per remote IP: one client at its cap
// leaves every other client its own slots, and releases give slots back
// without leaving empty entries behind.
func TestClientCounterIsolatesClients(t *testing.T) {
	c := newClientCounter()
	for i := 0; i < 16; i++ {
		if !c.acquire("127.0.0.1", 16) {
			t.Fatalf("slot %d refused", i)
		}
	}
	if c.acquire("127.0.0.1", 16) {
		t.Fatal("17th slot granted to one client")
	}
	for i := 0; i < 16; i++ {
		if !c.acquire("192.0.2.7", 16) {
			t.Fatalf("another client refused at %d while the first is at its cap", i)
		}
	}
	for i := 0; i < 16; i++ {
		c.release("127.0.0.1")
		c.release("192.0.2.7")
	}
	if len(c.m) != 0 {
		t.Fatalf("%d entries left after every release", len(c.m))
	}
	r := &http.Request{RemoteAddr: "[::1]:5555"}
	if k := clientKey(r); k != "::1" {
		t.Fatalf("clientKey = %q", k)
	}
}
