//go:build e2e

package client_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/adpnode/adpnode/adp/identity"
	"github.com/adpnode/adpnode/adp/record"
	"github.com/adpnode/adpnode/client"
	"github.com/adpnode/adpnode/internal/adptest"
	"github.com/adpnode/adpnode/internal/testwait"
	"github.com/adpnode/adpnode/node"
)

func newClient(t *testing.T, h *adptest.Host, name string) *client.Client {
	return adptest.SeededClient(t, h.URL, h.Clock, "client "+name)
}

// Ten concurrent writers on one room, using the retry loop, all land: no
// write lost, none duplicated, and the chain verifies client-side, both
// from history and through Follow.
func TestConcurrentWritersRetryLoop(t *testing.T) {
	h := adptest.StartHost(t, node.Config{})
	ctx := context.Background()
	owner := newClient(t, h, "owner")
	now := h.Clock.Ms()
	created, err := owner.CreateRoom(ctx, map[string]any{"topic": "busy", "visibility": "public", "start_time": now, "end_time": now + 3_600_000})
	if err != nil {
		t.Fatal(err)
	}
	id := created.ID

	// The owner follows from the start while the writers write.
	var mu sync.Mutex
	var followed []*record.Record
	fctx, stop := context.WithCancel(ctx)
	followDone := make(chan error, 1)
	go func() {
		followDone <- owner.Follow(fctx, id, 0, func(r *record.Record) error {
			mu.Lock()
			followed = append(followed, r)
			mu.Unlock()
			return nil
		})
	}()

	const writers, each = 10, 3
	var wg sync.WaitGroup
	errs := make(chan error, writers*each)
	for w := 0; w < writers; w++ {
		c := newClient(t, h, fmt.Sprint("writer", w))
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := c.Join(ctx, id, "speaker", "", ""); err != nil {
				errs <- err
				return
			}
			for i := 0; i < each; i++ {
				if _, err := c.Message(ctx, id, "text/plain", fmt.Sprintf("%s says %d", c.Key.ID, i)); err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	want := 1 + writers + writers*each
	hist, err := owner.History(ctx, id, 0)
	if err != nil {
		t.Fatal(err)
	}
	chain := client.NewChain(nil)
	seen := map[string]bool{}
	messages := 0
	for _, r := range hist {
		if err := chain.Add(r); err != nil {
			t.Fatal(err)
		}
		env, _ := identity.ParseEnvelope(r.Envelope)
		if seen[env.Hash] {
			t.Fatalf("envelope %s recorded twice", env.Hash)
		}
		seen[env.Hash] = true
		if env.Event.Type == "message.create" {
			messages++
		}
	}
	if len(hist) != want || messages != writers*each {
		t.Fatalf("history has %d records (%d messages), want %d (%d)", len(hist), messages, want, writers*each)
	}
	testwait.Until(t, 20*time.Second, fmt.Sprintf("Follow delivering all %d records", want), func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(followed) >= want
	})
	stop()
	<-followDone
	if len(followed) != want {
		t.Fatalf("Follow delivered %d records, want %d", len(followed), want)
	}
	for i, r := range followed {
		if r.Seq != int64(i+1) || r.Hash != hist[i].Hash {
			t.Fatalf("Follow delivered seq %d at position %d", r.Seq, i)
		}
	}
}

// The Max-Seen-Nonce bound: a key whose nonce fell behind the host's view
// resyncs from the header and the retry lands.
func TestNonceResync(t *testing.T) {
	h := adptest.StartHost(t, node.Config{})
	ctx := context.Background()
	a := newClient(t, h, "a")
	now := h.Clock.Ms()
	created, err := a.CreateRoom(ctx, map[string]any{"topic": "n", "visibility": "public", "start_time": now, "end_time": now + 3_600_000})
	if err != nil {
		t.Fatal(err)
	}
	// A second client with the same key but a fresh nonce memory, and a
	// clock 10 s behind: its clock-derived nonces are below what the host saw.
	b := client.New(h.URL, client.KeyFromPrivate(a.Key.Private()))
	b.Now = func() time.Time { return h.Clock.Now().Add(-10 * time.Second) }
	if _, err := b.Message(ctx, created.ID, "text/plain", "late clock"); err != nil {
		t.Fatalf("resync failed: %v", err)
	}
}
