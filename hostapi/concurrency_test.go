//go:build e2e

package hostapi_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/adpnode/adpnode/adp"
	"github.com/adpnode/adpnode/internal/adptest"
	"github.com/adpnode/adpnode/internal/testwait"
	"github.com/adpnode/adpnode/node"
)

// TestHeadCASRace: N writers sign message.create on the same head and
// submit at once; exactly one wins, every other gets room_head_mismatch
// with the recovery data of §6.1.
func TestHeadCASRace(t *testing.T) {
	const N = 16
	h := adptest.StartHost(t, node.Config{})
	c := adptest.NewAgent("race-creator")
	id := createRoom(t, h, c, roomPayload("public", h.Clock.Ms(), time.Hour))
	agents := make([]*adptest.Agent, N)
	for i := range agents {
		agents[i] = adptest.NewAgent(fmt.Sprintf("race-%d", i))
		joinRoom(t, h, agents[i], id, "speaker")
	}
	// Joins are signals: the head is still room.create while seq is N+1.
	room := getRoom(t, h, nil, id)
	if room.Seq != N+1 || room.Head.Seq != 1 {
		t.Fatalf("before the race: %+v", room)
	}
	base := room.Head
	envs := make([][]byte, N)
	for i, a := range agents {
		envs[i] = a.Envelope(h.Clock.Ms(), "message.create", id, base.Seq, base.Hash, msg(fmt.Sprintf("claim by %d", i)))
	}
	resps := make([]*adptest.Response, N)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range envs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			r, err := tryDo(http.MethodPost, h.URL+"/v1/rooms/"+id, "", envs[i])
			if err != nil {
				r = &adptest.Response{Body: []byte(err.Error())}
			}
			resps[i] = r
		}()
	}
	close(start)
	wg.Wait()

	winner := -1
	for i, r := range resps {
		if r.Status == http.StatusCreated {
			if winner >= 0 {
				t.Fatalf("two writers won the head: %d and %d", winner, i)
			}
			winner = i
		}
	}
	if winner < 0 {
		t.Fatal("no writer won the head")
	}
	var won wire
	if err := resps[winner].JSON(&won); err != nil {
		t.Fatal(err)
	}
	if won.Seq != N+2 || won.PreHash == nil || *won.PreHash != room.Hash {
		t.Fatalf("winning record %+v", won)
	}
	roomURL := h.URL + "/v1/rooms/" + id
	for i, r := range resps {
		if i == winner {
			continue
		}
		expectCode(t, r, adp.CodeRoomHeadMismatch)
		d := r.ErrorData()
		if d["base_seq"] != float64(base.Seq) || d["base_hash"] != base.Hash ||
			d["current_seq"] != float64(won.Seq) || d["current_hash"] != won.Hash ||
			d["events_url"] != roomURL+"/events?after_seq="+fmtSeq(base.Seq) {
			t.Errorf("writer %d: mismatch data %v", i, d)
		}
	}
	// The recovery URL shows what beat the losers.
	loser := (winner + 1) % N
	r := adptest.Do(t, http.MethodGet, resps[loser].ErrorData()["events_url"].(string), "", nil)
	expectStatus(t, r, http.StatusOK)
	page := decode[eventsPage](t, r)
	var msgs []wire
	for _, rec := range page.Result {
		if typ, w := eventType(t, rec); typ == "message.create" {
			msgs = append(msgs, w)
		}
	}
	if len(msgs) != 1 || msgs[0].Hash != won.Hash {
		t.Fatalf("history after base has %d messages", len(msgs))
	}
	// None of the losing envelopes entered the chain; a loser re-signs on
	// the new head and succeeds.
	if got := getRoom(t, h, nil, id); got.Seq != N+2 || got.Head.Hash != won.Hash {
		t.Fatalf("after the race: %+v", got)
	}
	h.MustPost(t, agents[loser], id, "message.create", msg("retry on the new head"))
}

// TestSSEBootstrap runs the §17.3 gap-free bootstrap while writers post:
// subscribe first, then read history with after_seq, de-duplicate by seq.
func TestSSEBootstrap(t *testing.T) {
	const (
		writers   = 4
		perWriter = 12
		preload   = 6
	)
	h := adptest.StartHost(t, node.Config{Rates: highRates()})
	c := adptest.NewAgent("boot-creator")
	id := createRoom(t, h, c, roomPayload("public", h.Clock.Ms(), time.Hour))
	ws := make([]*adptest.Agent, writers)
	for i := range ws {
		ws[i] = adptest.NewAgent(fmt.Sprintf("boot-writer-%d", i))
		joinRoom(t, h, ws[i], id, "speaker")
	}
	for i := 0; i < preload; i++ {
		h.MustPost(t, c, id, "message.create", msg(fmt.Sprintf("before %d", i)))
	}
	subscribedAt := getRoom(t, h, nil, id).Seq // nothing writes until the stream is up
	stream := openSSE(t, h, c, id)

	// Writers: messages (head CAS, retried on mismatch) and reactions
	// (signals anchored on the room.create record).
	firstHash := ""
	{
		p := decode[eventsPage](t, get(t, h, nil, "/v1/rooms/"+id+"/events?limit=1"))
		var w wire
		json.Unmarshal(p.Result[0], &w)
		firstHash = w.Hash
	}
	var wg sync.WaitGroup
	errs := make(chan string, writers*perWriter)
	for i, a := range ws {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < perWriter; j++ {
				if j%2 == 1 {
					env := a.Envelope(h.Clock.Ms(), "reaction.create", id, 1, firstHash, map[string]any{"event_id": firstHash, "reaction": "agree"})
					if r, err := tryDo(http.MethodPost, h.URL+"/v1/rooms/"+id, "", env); err != nil || r.Status != http.StatusCreated {
						errs <- fmt.Sprintf("writer %d reaction: %s %v", i, short(r), err)
					}
					continue
				}
				for attempt := 0; ; attempt++ {
					if attempt > 200 {
						errs <- fmt.Sprintf("writer %d: head never free", i)
						return
					}
					head, err := tryHead(h, a, id)
					if err != nil {
						errs <- fmt.Sprintf("writer %d: %v", i, err)
						return
					}
					r, err := tryDo(http.MethodPost, h.URL+"/v1/rooms/"+id, "",
						a.Envelope(h.Clock.Ms(), "message.create", id, head.Seq, head.Hash, msg(fmt.Sprintf("w%d-%d", i, j))))
					if err != nil {
						errs <- fmt.Sprintf("writer %d: %v", i, err)
						return
					}
					if r.Status == http.StatusCreated {
						break
					}
					if r.ErrorCode() != string(adp.CodeRoomHeadMismatch) {
						errs <- fmt.Sprintf("writer %d message: %s", i, short(r))
						return
					}
				}
			}
		}()
	}

	// History while the writers run (some records already written after
	// the subscription), in small pages, following cursors.
	testwait.Until(t, 10*time.Second, "writers to get going", func() bool {
		hd, err := tryDo(http.MethodGet, h.URL+"/v1/rooms/"+id, "", nil)
		var rv roomView
		return err == nil && hd.JSON(&rv) == nil && rv.Seq >= subscribedAt+8
	})
	history := map[int64]json.RawMessage{}
	after := int64(0)
	for {
		r := get(t, h, c, fmt.Sprintf("/v1/rooms/%s/events?after_seq=%d&limit=7", id, after))
		expectStatus(t, r, http.StatusOK)
		p := decode[eventsPage](t, r)
		for _, raw := range p.Result {
			var w wire
			json.Unmarshal(raw, &w)
			if w.Seq != after+1 {
				t.Fatalf("history gap: seq %d after %d", w.Seq, after)
			}
			history[w.Seq] = raw
			after = w.Seq
		}
		if p.NextCursor == nil {
			break
		}
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	if t.Failed() {
		t.FailNow()
	}
	total := getRoom(t, h, nil, id).Seq
	wantTotal := int64(1 + writers + preload + writers*perWriter)
	if total != wantTotal {
		t.Fatalf("room has %d records, want %d", total, wantTotal)
	}

	// Live records: everything after the subscription, in order, no gaps.
	live := map[int64]json.RawMessage{}
	prev := int64(0)
	for prev < total {
		it, ok := stream.next(20 * time.Second)
		if !ok {
			t.Fatalf("stream ended or stalled after seq %d of %d", prev, total)
		}
		if it.Event != "room.event" {
			t.Fatalf("unexpected SSE item %s", it.Event)
		}
		var w wire
		if err := json.Unmarshal(it.Data, &w); err != nil {
			t.Fatal(err)
		}
		if w.Seq <= subscribedAt {
			t.Fatalf("SSE replayed seq %d from before the subscription (at %d)", w.Seq, subscribedAt)
		}
		if prev == 0 && w.Seq != subscribedAt+1 {
			t.Fatalf("first live record is seq %d, want %d", w.Seq, subscribedAt+1)
		}
		if prev != 0 && w.Seq != prev+1 {
			t.Fatalf("live gap: seq %d after %d", w.Seq, prev)
		}
		prev = w.Seq
		live[w.Seq] = it.Data
	}
	// Union, de-duplicated by seq, is exactly 1..total; overlapping
	// records are byte-identical.
	union := map[int64]json.RawMessage{}
	for s, raw := range history {
		union[s] = raw
	}
	overlap := 0
	for s, raw := range live {
		if old, ok := union[s]; ok {
			overlap++
			if string(old) != string(raw) {
				t.Errorf("seq %d differs between history and SSE", s)
			}
		}
		union[s] = raw
	}
	if int64(len(union)) != total {
		t.Fatalf("union has %d records, want %d", len(union), total)
	}
	all := make([]json.RawMessage, 0, total)
	for s := int64(1); s <= total; s++ {
		raw, ok := union[s]
		if !ok {
			t.Fatalf("seq %d missing from the union", s)
		}
		all = append(all, raw)
	}
	checkChain(t, all, 1)
	t.Logf("history %d records, live %d, overlap %d", len(history), len(live), overlap)
	if int64(len(history)) < subscribedAt {
		t.Fatalf("history missed records from before the subscription")
	}
}
