//go:build e2e

package client_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/adpnode/adpnode/adp/identity"
	"github.com/adpnode/adpnode/adp/seal"
	"github.com/adpnode/adpnode/client"
	"github.com/adpnode/adpnode/internal/adptest"
	"github.com/adpnode/adpnode/node"
)

// reports collects what a client's OnBadWrap is told.
type reports struct {
	mu  sync.Mutex
	got []client.BadWrapReport
}

func (r *reports) add(rep client.BadWrapReport) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, rep)
}

func (r *reports) take() []client.BadWrapReport {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.got
	r.got = nil
	return out
}

// roomSeal folds a room's seal records as the host does.
func roomSeal(t *testing.T, c *client.Client, roomID string) (st seal.RoomState, epochsBy map[identity.AgentID]int) {
	t.Helper()
	recs, err := c.History(context.Background(), roomID, 0)
	if err != nil {
		t.Fatal(err)
	}
	epochsBy = map[identity.AgentID]int{}
	for _, r := range recs {
		var env struct {
			Event struct {
				Type    string           `json:"type"`
				Actor   identity.AgentID `json:"actor"`
				Payload json.RawMessage  `json:"payload"`
			} `json:"event"`
		}
		json.Unmarshal(r.Envelope, &env)
		st.Apply(r.Seq, env.Event.Actor, env.Event.Type, env.Event.Payload)
		if env.Event.Type == seal.TypeEpoch {
			epochsBy[env.Event.Actor]++
		}
	}
	return st, epochsBy
}

// postJunkEpoch has from publish the next epoch with honest wraps for
// members but 80 random bytes for victim: a shape the host accepts.
func postJunkEpoch(t *testing.T, from *client.Client, roomID string, victim identity.AgentID, members ...identity.AgentID) int64 {
	t.Helper()
	st, _ := roomSeal(t, from, roomID)
	p, _, err := seal.NewEpoch(rand.Reader, roomID, st.Epoch+1, st.Recipients(members))
	if err != nil {
		t.Fatal(err)
	}
	junk := make([]byte, seal.WrapSize)
	rand.Read(junk)
	for i := range p.Wraps {
		if p.Wraps[i].Member == victim {
			p.Wraps[i].Wrap = identity.EncodeB64(junk)
		}
	}
	if err := post(t, from, roomID, seal.TypeEpoch, p); err != nil {
		t.Fatal(err)
	}
	return p.Epoch
}

// Property: a member that gives another a junk epoch key wrap is noticed
// at once by the victim's client, on its next read: it reports the
// wrapper (the signer of the seal.epoch), the epoch and the seq, and
// starts a new epoch itself, so it reads and sends again without anyone's
// help. The other members are never told of a bad wrap. A wrapper that
// keeps at it gets at most MaxBadWrapRecoveries rotations out of the
// victim (counted in the room's records, so a new process of the victim,
// after a host restart, starts none), after which the victim's sends fail
// naming the wrapper until someone rotates on purpose.
func TestSealedJunkWrapIsNoticedAndRecovered(t *testing.T) {
	h := adptest.StartHostAt(t, node.Config{DataDir: t.TempDir()}, adptest.NewClock())
	ctx := context.Background()
	alice, bob, mallory, carol := newClient(t, h, "jw-alice"), newClient(t, h, "jw-bob"), newClient(t, h, "jw-mallory"), newClient(t, h, "jw-carol")
	bobSeal := client.SealKeyPath(filepath.Join(t.TempDir(), "bob.key"))
	bob.SealPath = bobSeal
	var bobSaw reports
	bob.OnBadWrap = bobSaw.add
	for _, c := range []*client.Client{alice, mallory, carol} {
		c.OnBadWrap = func(r client.BadWrapReport) { t.Errorf("%s was told of a bad wrap: %+v", c.Key.ID, r.Bad) }
	}
	cr, err := alice.CreateSealedRoom(ctx, h.RoomPayload("public"))
	if err != nil {
		t.Fatal(err)
	}
	id := cr.ID
	for _, m := range []*client.Client{bob, mallory, carol} {
		if _, err := m.Join(ctx, id, "speaker", "", ""); err != nil {
			t.Fatal(err)
		}
		if _, err := m.PublishSealKey(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	members := []identity.AgentID{alice.Key.ID, bob.Key.ID, mallory.Key.ID, carol.Key.ID}
	if _, err := alice.Message(ctx, id, "text/plain", "epoch one"); err != nil {
		t.Fatal(err)
	}

	for round := 1; round <= client.MaxBadWrapRecoveries; round++ {
		bad := postJunkEpoch(t, mallory, id, bob.Key.ID, members...)
		// Bob's next read notices it and recovers.
		if _, err := bob.Messages(ctx, id, 0); err != nil {
			t.Fatal(err)
		}
		got := bobSaw.take()
		if len(got) != 1 {
			t.Fatalf("round %d: bob's reports: %+v", round, got)
		}
		r := got[0]
		if r.Bad.Wrapper != mallory.Key.ID || r.Bad.Epoch != bad || r.Bad.Member != bob.Key.ID || r.Room != id || r.Err != nil || r.Recovered != bad+1 {
			t.Fatalf("round %d: report %+v (bad %+v), want mallory's epoch %d replaced by %d", round, r, r.Bad, bad, bad+1)
		}
		st, by := roomSeal(t, alice, id)
		if st.Epoch != bad+1 || by[bob.Key.ID] != round {
			t.Fatalf("round %d: current epoch %d, bob started %d epochs", round, st.Epoch, by[bob.Key.ID])
		}
		// Everyone reads and sends in bob's epoch: no further rotation.
		text := "after round " + string(rune('0'+round))
		if _, err := alice.Message(ctx, id, "text/plain", text); err != nil {
			t.Fatal(err)
		}
		for _, m := range []*client.Client{bob, carol, mallory} {
			if o := opened(t, m, id)[text]; o.Err != nil || o.Epoch != bad+1 {
				t.Fatalf("round %d: %s opens %q: %+v", round, m.Key.ID, text, o)
			}
		}
		if _, err := bob.Message(ctx, id, "text/plain", "bob "+text); err != nil {
			t.Fatal(err)
		}
	}

	// One bad wrap too many: reported, no rotation, and bob's sends say why.
	bad := postJunkEpoch(t, mallory, id, bob.Key.ID, members...)
	if _, err := bob.Messages(ctx, id, 0); err != nil {
		t.Fatal(err)
	}
	got := bobSaw.take()
	if len(got) != 1 || got[0].Recovered != 0 || got[0].Err == nil || got[0].Bad.Epoch != bad ||
		!strings.Contains(got[0].Err.Error(), string(mallory.Key.ID)) {
		t.Fatalf("past the bound: %+v", got)
	}
	_, err = bob.Message(ctx, id, "text/plain", "stuck")
	var bw *seal.BadWrap
	if !errors.As(err, &bw) || bw.Wrapper != mallory.Key.ID || !errors.Is(err, seal.ErrOpen) {
		t.Fatalf("bob's send in a bad epoch past the bound: %v", err)
	}
	if len(bobSaw.take()) != 0 {
		t.Fatal("a bad wrap was reported twice")
	}
	st, by := roomSeal(t, alice, id)
	if st.Epoch != bad || by[bob.Key.ID] != client.MaxBadWrapRecoveries {
		t.Fatalf("past the bound: epoch %d, bob started %d epochs", st.Epoch, by[bob.Key.ID])
	}

	// A host restart and a new process of bob with its key file: it reads
	// the whole room, is told of every bad wrap again, and starts no epoch.
	h = h.Restart(t)
	bob2 := newClient(t, h, "jw-bob")
	bob2.SealPath = bobSeal
	var bob2Saw reports
	bob2.OnBadWrap = bob2Saw.add
	if _, err := bob2.Messages(ctx, id, 0); err != nil {
		t.Fatal(err)
	}
	got = bob2Saw.take()
	if len(got) != client.MaxBadWrapRecoveries+1 {
		t.Fatalf("bob's new process: %+v", got)
	}
	for i, r := range got {
		last := i == len(got)-1
		if r.Bad.Wrapper != mallory.Key.ID || r.Recovered != 0 || (r.Err != nil) != last {
			t.Fatalf("bob's new process, report %d: %+v", i, r)
		}
	}
	if st2, by2 := roomSeal(t, alice, id); st2.Epoch != st.Epoch || by2[bob.Key.ID] != by[bob.Key.ID] {
		t.Fatalf("bob's new process rotated: epoch %d, bob's epochs %d", st2.Epoch, by2[bob.Key.ID])
	}
	// A member that lost its sealing key is not told of a bad wrap for
	// the epochs it can no longer open.
	carol2 := newClient(t, h, "jw-carol")
	carol2.OnBadWrap = carol.OnBadWrap
	if _, err := carol2.RotateSealKey(ctx, id); err != nil {
		t.Fatal(err)
	}
	if _, err := carol2.Messages(ctx, id, 0); err != nil {
		t.Fatal(err)
	}
	// A rotation on purpose ends it.
	if _, err := bob2.RotateEpoch(ctx, id, true); err != nil {
		t.Fatal(err)
	}
	if _, err := bob2.Message(ctx, id, "text/plain", "unstuck"); err != nil {
		t.Fatal(err)
	}
	if o := opened(t, alice, id)["unstuck"]; o.Err != nil {
		t.Fatalf("alice opens bob's message after the forced rotation: %+v", o)
	}
}
