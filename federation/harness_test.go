//go:build e2e

package federation_test

import (
	"testing"

	"github.com/adpnode/adpnode/directory"
	"github.com/adpnode/adpnode/hostport"
	"github.com/adpnode/adpnode/internal/adptest"
	"github.com/adpnode/adpnode/internal/fedtest"
)

// Thin names over internal/fedtest, which runs federated peers in this
// process on 127.0.0.1 only.

func network(t testing.TB, k int, edges [][2]int) []*fedtest.Peer {
	t.Helper()
	return fedtest.Network(t, k, edges, fedtest.Options{})
}

func networkWith(t testing.TB, k int, edges [][2]int, o fedtest.Options) []*fedtest.Peer {
	t.Helper()
	return fedtest.Network(t, k, edges, o)
}

func connect(t testing.TB, a, b *fedtest.Peer) { t.Helper(); fedtest.Connect(t, a, b) }

func submit(t testing.TB, p *fedtest.Peer, a *adptest.Agent, typ, roomID string, payload any) *hostport.Result {
	t.Helper()
	return fedtest.MustSubmit(t, p, a, typ, roomID, payload)
}

// createRoom creates an hour-long room tagged "fed".
func createRoom(t testing.TB, p *fedtest.Peer, a *adptest.Agent, vis, topic string) string {
	t.Helper()
	return fedtest.CreateRoom(t, p, a, vis, topic, "fed")
}

// listed returns the directory entry for roomID at p, if any.
func listed(p *fedtest.Peer, roomID string) (directory.Entry, bool) {
	for _, s := range p.Fed.Directory() {
		if s.ID == roomID {
			return s, true
		}
	}
	return directory.Entry{}, false
}
