package adptest

import (
	"testing"

	"github.com/adpnode/adpnode/client"
)

// SeededClient returns a Go client of the host at url whose agent key is
// derived from seed (the same seed, the same agent) and whose clock is
// clock.
func SeededClient(t testing.TB, url string, clock *Clock, seed string) *client.Client {
	t.Helper()
	c := client.New(url, client.KeyFromPrivate(seededKey(seed)))
	c.Now = clock.Now
	return c
}
