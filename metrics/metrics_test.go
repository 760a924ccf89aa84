//go:build e2e

package metrics_test

import (
	"bufio"
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/adpnode/adpnode/adp/room"
	"github.com/adpnode/adpnode/internal/adptest"
	"github.com/adpnode/adpnode/internal/fedtest"
	"github.com/adpnode/adpnode/internal/testwait"
	"github.com/adpnode/adpnode/mirror"
)

// scrape returns every sample of /metrics as "name{labels}" -> value.
func scrape(t *testing.T, url string) map[string]float64 {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("bad sample %q", line)
		}
		out[line[:i]] = v
	}
	return out
}

// /metrics exposes accepts and rejects by code, write latency, SSE
// subscribers, peers, gossip in/out and mirror lag after some traffic.
func TestMetricsAfterTraffic(t *testing.T) {
	peers := fedtest.Network(t, 2, nil, fedtest.Options{Mirror: true})
	a, b := peers[0], peers[1]
	if _, err := b.Mir.AddTarget(mirror.TargetAll, ""); err != nil {
		t.Fatal(err)
	}
	alice := adptest.NewAgent("alice")
	id := fedtest.CreateRoom(t, a, alice, room.Public, "measured")
	// Two accepted writes over HTTP, one rejected (stale head), one SSE stream.
	head, _ := a.Node.Room(id, "")
	post := func(text string) *adptest.Response {
		return adptest.Do(t, http.MethodPost, a.URL+"/v1/rooms/"+id, "", alice.Envelope(a.Clock.Ms(), "message.create", id,
			head.Head.Seq, head.Head.Hash, map[string]any{"content_type": "text/plain", "content": text}))
	}
	if r := post("one"); r.Status != http.StatusCreated {
		t.Fatal(r)
	}
	if r := post("stale"); r.ErrorCode() != "room_head_mismatch" {
		t.Fatal(r)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, a.URL+"/v1/rooms/"+id+"/events/live", nil)
	req.Header.Set("Authorization", "Bearer "+alice.Token(a.URL, a.Clock.Ms()))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	testwait.Until(t, 10*time.Second, "B mirrored the room", func() bool {
		r, ok := b.Mir.Room(id, "")
		return ok && r.Tip() == 2
	})
	// The record publisher follows the change feed on its own goroutine:
	// B may hold the room (announcement, pull) before A has published both.
	testwait.Until(t, 10*time.Second, "A published both records", func() bool {
		return scrape(t, a.URL)["adp_gossip_published_total"] >= 2
	})

	ma := scrape(t, a.URL)
	for name, min := range map[string]float64{
		`adp_writes_total{code="",result="accepted"}`:                   1,
		`adp_writes_total{code="room_head_mismatch",result="rejected"}`: 1,
		`adp_write_duration_seconds_count{result="accepted"}`:           1,
		`adp_sse_subscribers`:        1,
		`adp_p2p_peers`:              1,
		`adp_gossip_published_total`: 2,
		`adp_p2p_bytes_out_total`:    1,
	} {
		if ma[name] < min {
			t.Errorf("A: %s = %v, want ≥ %v", name, ma[name], min)
		}
	}
	head, _ = a.Node.Room(id, "")
	if r := post("live"); r.Status != http.StatusCreated {
		t.Fatal(r)
	}
	testwait.Until(t, 10*time.Second, "B mirrored the live record", func() bool {
		r, ok := b.Mir.Room(id, "")
		return ok && r.Tip() == 3 && scrape(t, b.URL)[`adp_mirror_lag_seconds_count`] >= 1
	})
	mb := scrape(t, b.URL)
	for name, min := range map[string]float64{
		`adp_mirror_lag_seconds_count`: 1,
		`adp_mirror_verified_total`:    3,
		`adp_gossip_accepted_total`:    1,
		`adp_p2p_bytes_in_total`:       1,
		`adp_mirror_rooms`:             1,
	} {
		if mb[name] < min {
			t.Errorf("B: %s = %v, want ≥ %v", name, mb[name], min)
		}
	}
}

// TestMirrorLagLiveOnly: replication lag counts records that arrived on the
// live stream only; a mirror added late backfills the history without
// counting its age as lag (which would trip any lag alert).
func TestMirrorLagLiveOnly(t *testing.T) {
	peers := fedtest.Network(t, 2, nil, fedtest.Options{Mirror: true})
	a, b := peers[0], peers[1]
	alice := adptest.NewAgent("alice")
	id := fedtest.CreateRoom(t, a, alice, room.Public, "late mirror")
	post := func(text string) {
		t.Helper()
		head, _ := a.Node.Room(id, "")
		r := adptest.Do(t, http.MethodPost, a.URL+"/v1/rooms/"+id, "", alice.Envelope(a.Clock.Ms(), "message.create", id,
			head.Head.Seq, head.Head.Hash, map[string]any{"content_type": "text/plain", "content": text}))
		if r.Status != http.StatusCreated {
			t.Fatal(r)
		}
	}
	for i := 0; i < 4; i++ {
		post("before the mirror")
	}
	a.Clock.Advance(10 * time.Minute) // the history is old by the time it is mirrored
	if _, err := b.Mir.AddTarget(mirror.TargetRoom, a.Node.RoomURL(id)); err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, 10*time.Second, "B backfilled the room", func() bool {
		r, ok := b.Mir.Room(id, "")
		return ok && r.Tip() == 5
	})
	if n := scrape(t, b.URL)[`adp_mirror_lag_seconds_count`]; n != 0 {
		t.Fatalf("backfilled records counted as lag: %v", n)
	}
	post("live")
	testwait.Until(t, 10*time.Second, "B took the live record", func() bool {
		return scrape(t, b.URL)[`adp_mirror_lag_seconds_count`] == 1
	})
}
