package adptest

import (
	"testing"

	"github.com/adpnode/adpnode/adp/identity"
	"github.com/adpnode/adpnode/client"
)

// SeededClient returns a Go client of the host at url whose agent key is
// derived from seed (the same seed, the same agent) and whose clock is
// clock.
func SeededClient(t testing.TB, url string, clock *Clock, seed string) *client.Client {
	t.Helper()
	s := make([]byte, 32)
	copy(s, seed)
	priv, err := identity.KeyFromSeed(s)
	if err != nil {
		t.Fatal(err)
	}
	c := client.New(url, client.KeyFromPrivate(priv))
	c.Now = clock.Now
	return c
}
