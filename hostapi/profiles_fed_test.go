//go:build e2e

package hostapi_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/adpnode/adpnode/adp/profile"
	"github.com/adpnode/adpnode/adp/room"
	"github.com/adpnode/adpnode/internal/adptest"
	"github.com/adpnode/adpnode/internal/fedtest"
	"github.com/adpnode/adpnode/internal/testwait"
	"github.com/adpnode/adpnode/mirror"
)

// Property: a node shows the same names as the host for the agents of a
// room it mirrors, and of a room its federated directory lists: it
// fetches their profiles from the room's host, verifies them, serves them
// with the original envelope and the origin they came from, and answers
// later lookups from its cache; it asks nobody for a room it does not
// know.
func TestProfilesAcrossFederation(t *testing.T) {
	peers := fedtest.Network(t, 2, nil, fedtest.Options{Rates: highRates(), Mirror: true})
	pa, pb := peers[0], peers[1]
	alice, bob, carol := adptest.NewAgent("alice"), adptest.NewAgent("bob"), adptest.NewAgent("carol")
	now := pa.Clock.Ms()
	for _, a := range []*adptest.Agent{alice, bob, carol} {
		r := adptest.Do(t, http.MethodPost, pa.URL+"/v1/profiles", "", a.ProfileEnvelope(now, "Name of "+a.Name))
		if r.Status != http.StatusCreated {
			t.Fatalf("profile on A: %s", short(r))
		}
	}
	id := fedtest.CreateRoom(t, pa, alice, room.Public, "Mirrored names", "names")
	fedtest.MustSubmit(t, pa, bob, "room.join", id, map[string]any{"role": "speaker"})
	fedtest.MustSubmit(t, pa, bob, "message.create", id, msg("hello"))
	listed := fedtest.CreateRoom(t, pa, carol, room.Public, "Listed only", "names")

	// B knows neither room yet: it asks nobody.
	r := adptest.Do(t, http.MethodGet, pb.URL+"/v1/profiles/"+string(alice.ID)+"?room="+id, "", nil)
	if r.Status != http.StatusNotFound {
		t.Fatalf("B resolved a name for a room it does not know: %s", short(r))
	}

	if _, err := pb.Mir.AddTarget(mirror.TargetRoom, pa.URL+"/v1/rooms/"+id); err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, 10*time.Second, "B verified the room", func() bool {
		r, ok := pb.Mir.Room(id, "")
		return ok && r.Tip() == 3
	})
	r = adptest.Do(t, http.MethodGet, pb.URL+"/v1/profiles?ids="+string(alice.ID)+","+string(bob.ID)+"&room="+id, "", nil)
	expectStatus(t, r, http.StatusOK)
	got := decode[struct {
		Result []struct {
			profileView
			Source string `json:"source"`
		}
	}](t, r)
	if len(got.Result) != 2 {
		t.Fatalf("B's names of the mirrored room: %s", short(r))
	}
	for i, a := range []*adptest.Agent{alice, bob} {
		p := got.Result[i]
		host := checkProfileAt(t, pa.URL, a)
		if p.AgentID != string(a.ID) || p.Name != host.Name || p.Source != pa.URL {
			t.Fatalf("B shows %+v for %s, the host %q", p, a.Name, host.Name)
		}
		if v, err := profile.Open(p.Envelope); err != nil || v.ID != a.ID {
			t.Fatalf("B's envelope for %s does not verify: %v", a.Name, err)
		}
	}
	// Cached: answered without the room too.
	r = adptest.Do(t, http.MethodGet, pb.URL+"/v1/profiles/"+string(bob.ID), "", nil)
	if r.Status != http.StatusOK || decode[profileView](t, r).Name != "Name of bob" {
		t.Fatalf("B's cached name: %s", short(r))
	}

	// A room B's directory lists (announced over federation).
	testwait.Until(t, 20*time.Second, "A's second room in B's directory", func() bool {
		for _, e := range pb.Fed.Directory() {
			if e.ID == listed {
				return true
			}
		}
		return false
	})
	r = adptest.Do(t, http.MethodGet, pb.URL+"/v1/profiles/"+string(carol.ID)+"?room="+listed, "", nil)
	if r.Status != http.StatusOK || decode[profileView](t, r).Name != "Name of carol" {
		t.Fatalf("B's name for the creator of a listed room: %s", short(r))
	}
	if s := pb.Profiles.Stats(); s.Entries > 3 || s.Refused != 0 {
		t.Fatalf("B's cache: %+v", s)
	}

	// The mirror's Markdown transcript names the agents as the host's does.
	last := fedtest.MustSubmit(t, pa, alice, "room.close", id, map[string]any{"reason": "done"}).Record
	testwait.Until(t, 10*time.Second, "B verified the closed room", func() bool {
		r, ok := pb.Mir.Room(id, "")
		return ok && r.Tip() == last.Seq
	})
	hostMD := adptest.Do(t, http.MethodGet, pa.URL+"/v1/rooms/"+id+"/archive.md", "", nil)
	mirrorMD := adptest.Do(t, http.MethodGet, pb.URL+"/v1/mirrors/rooms/"+id+"/archive.md", "", nil)
	if hostMD.Status != http.StatusOK || string(hostMD.Body) != string(mirrorMD.Body) || !strings.Contains(string(hostMD.Body), "Name of bob _(self-asserted name)_") {
		t.Fatalf("transcripts differ or lack names:\n--- host\n%s\n--- mirror\n%s", hostMD.Body, mirrorMD.Body)
	}
}

// checkProfileAt reads a's profile from the node at url.
func checkProfileAt(t testing.TB, url string, a *adptest.Agent) profileView {
	t.Helper()
	r := adptest.Do(t, http.MethodGet, url+"/v1/profiles/"+string(a.ID), "", nil)
	expectStatus(t, r, http.StatusOK)
	return decode[profileView](t, r)
}
