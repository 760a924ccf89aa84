//go:build linux && e2e

package attention_test

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/adpnode/adpnode/adp/identity"
	"github.com/adpnode/adpnode/attention"
	"github.com/adpnode/adpnode/internal/adptest"
	"github.com/adpnode/adpnode/internal/testwait"
	"github.com/adpnode/adpnode/node"
)

// Property: whatever moment a node process is killed at (SIGKILL), after
// every restart each mention of every acknowledged record is in each
// mentioned inbox exactly once, no record's mention is there twice, the
// inbox seqs run 1..head without a gap, and a second restart adds nothing.
//
// A child process writes mentions in four rooms at once while attention
// follows the node's change feed, with every buffer that remains at one
// slot: a commit of derived items holds at most seven operations, a
// little more than one feed entry's five (two mentions and the position),
// so commits would end at every offset inside an entry were an entry not
// one unit; and a live stream of one item is open (and falls behind). The parent kills it
// several times on the same data dir: in "held" rounds while a batch of
// derived items has stored only its first commit, in the other rounds
// after a random number of acknowledgements. Each mention is followed by
// a run of messages without mentions, which derive nothing (their
// position waits in memory), so kills also follow such runs.
func TestKillDerivationProperty(t *testing.T) {
	if dir := os.Getenv("ATTENTION_KILL_CHILD"); dir != "" {
		killChild(t, dir, os.Getenv("ATTENTION_KILL_MODE"), os.Getenv("ATTENTION_KILL_ROUND"))
		return
	}
	dir := t.TempDir()
	bob, carol := adptest.NewAgent("bob"), adptest.NewAgent("carol")
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 34))
	acked := map[string]bool{} // room/seq, over every round
	const rounds = 4
	for round := 0; round < rounds; round++ {
		mode := "random"
		if round%2 == 0 {
			mode = "held"
		}
		killAt := 1 + rng.IntN(rooms*perRoom)
		cmd := exec.Command(os.Args[0], "-test.run", "^TestKillDerivationProperty$")
		cmd.Env = append(os.Environ(), "ATTENTION_KILL_CHILD="+dir, "ATTENTION_KILL_MODE="+mode, "ATTENTION_KILL_ROUND="+strconv.Itoa(round))
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		var stderr strings.Builder
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// A child that never gets there is killed, and the test fails below.
		timer := time.AfterFunc(2*time.Minute, func() { cmd.Process.Kill() })
		held, written, acks := false, false, 0
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			switch {
			case len(f) == 3 && f[0] == "ACK":
				acked[f[1]+"/"+f[2]] = true
				acks++
			case len(f) == 1 && f[0] == "HELD":
				held = true
			case len(f) == 1 && f[0] == "WRITTEN":
				written = true
			}
			if mode == "held" && held && written || mode == "random" && (acks >= killAt || written) {
				break
			}
		}
		timer.Stop()
		if mode == "held" && !(held && written) || mode == "random" && acks < killAt && !written {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("round %d: child ended early (held %v, written %v, %d acks): %v\n%s", round, held, written, acks, sc.Err(), stderr.String())
		}
		if err := cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		cmd.Wait()
		if mode == "held" {
			// What the disk held at the kill: some acknowledged mention
			// was not derived yet (the kill hit mid-derivation).
			n := openNode(t, dir)
			cfg := attention.ForNode(n, nil, nil)
			cfg.Local = nil // no following
			a, err := attention.Open(cfg)
			if err != nil {
				t.Fatal(err)
			}
			before := len(inboxItems(t, a, bob.ID)) + len(inboxItems(t, a, carol.ID))
			a.Close()
			n.Close()
			if before >= 2*len(acked) {
				t.Fatalf("round %d: at the kill the inboxes held %d items for %d acknowledged mentions of two agents: the kill did not hit a derivation", round, before, len(acked))
			}
		}
		for restart := 0; restart < 2; restart++ {
			n := openNode(t, dir)
			a, err := attention.Open(attention.ForNode(n, nil, nil))
			if err != nil {
				t.Fatal(err)
			}
			testwait.Until(t, 30*time.Second, "every acknowledged mention derived", func() bool {
				return len(inboxItems(t, a, bob.ID)) >= len(acked) && len(inboxItems(t, a, carol.ID)) >= len(acked)
			})
			a.Close()
			for _, who := range []identity.AgentID{bob.ID, carol.ID} {
				items := inboxItems(t, a, who)
				seen := map[string]int{}
				for i, it := range items {
					if it.Seq != int64(i+1) {
						t.Fatalf("round %d restart %d: inbox item %d has seq %d", round, restart, i, it.Seq)
					}
					k := fmt.Sprintf("%s/%d", it.RoomID, it.RoomSeq)
					if seen[k]++; seen[k] > 1 {
						t.Fatalf("round %d restart %d: %s is in the inbox twice", round, restart, k)
					}
				}
				for k := range acked {
					if seen[k] != 1 {
						t.Fatalf("round %d restart %d: acknowledged %s is in the inbox %d times", round, restart, k, seen[k])
					}
				}
			}
			n.Close()
		}
		t.Logf("round %d (%s): %d acknowledged records so far", round, mode, len(acked))
	}
}

const rooms, perRoom = 4, 12

func openNode(t *testing.T, dir string) *node.Node {
	t.Helper()
	n, err := node.Open(node.Config{DataDir: dir, PublicURL: "http://127.0.0.1:1", Rates: node.Rates{AgentStatus: 60}, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// inboxItems reads who's whole inbox, page by page.
func inboxItems(t *testing.T, a *attention.Attention, who identity.AgentID) []attention.MentionItem {
	var out []attention.MentionItem
	c := attention.Cursor{}
	for {
		p, err := a.Mentions(who, c, 0)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, p.Items.([]attention.MentionItem)...)
		if !p.HasMore {
			return out
		}
		c.After = p.NextAfter
	}
}

// killChild runs in the child process: it writes mentions in four new
// rooms at once, acknowledged one by one on stdout, until the parent kills
// it. In "held" mode the first batch of derived items after the first
// mention that takes more than one commit stores its first commit and
// stops there.
func killChild(t *testing.T, dir, mode, round string) {
	n := openNode(t, dir)
	var mu sync.Mutex
	armed := false
	say := func(format string, args ...any) {
		mu.Lock()
		fmt.Printf(format+"\n", args...)
		mu.Unlock()
	}
	cfg := attention.ForNode(n, nil, nil)
	cfg.WatchBuffer = 1
	bob, carol := adptest.NewAgent("bob"), adptest.NewAgent("carol")
	var a *attention.Attention
	derived := func() int { return len(inboxItems(t, a, bob.ID)) }
	var heldAt int
	attention.SetCommits(&cfg, 7, 1<<20, func(i, _ int) {
		mu.Lock()
		hold := mode == "held" && armed && i == 1
		mu.Unlock()
		if hold {
			// The first commit is queued, not yet durable: HELD only
			// once it is (its items are past what was derived before).
			for derived() <= heldAt {
				time.Sleep(time.Millisecond)
			}
			say("HELD")
			select {} // the follower stops here until the kill
		}
	})
	a, err := attention.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Watch(bob.ID); err != nil { // one slot, never read
		t.Fatal(err)
	}
	type head struct {
		id   string
		seq  int64
		hash string
	}
	heads := make([]head, rooms)
	writers := make([]*adptest.Agent, rooms)
	now := time.Now().UnixMilli()
	for i := range heads {
		writers[i] = adptest.NewAgent(fmt.Sprintf("kill-writer-%s-%d", round, i))
		res, err := n.Submit(context.Background(), writers[i].Envelope(now, "room.create", "", 0, "", map[string]any{"topic": "kill", "visibility": "public",
			"start_time": now, "end_time": now + 3_600_000}), "")
		if err != nil {
			t.Fatal(err)
		}
		heads[i] = head{res.Record.RoomID, res.Record.Seq, res.Record.Hash}
	}
	mention := func(i int) {
		h := &heads[i]
		ev := writers[i].Event(time.Now().UnixMilli(), "message.create", h.id, h.seq, h.hash, map[string]any{"content_type": "text/plain", "content": "hi"})
		ev.Mentions = []string{string(bob.ID), string(carol.ID)}
		r, err := n.Submit(context.Background(), writers[i].Sign(ev), h.id)
		if err != nil {
			t.Error(err)
			return
		}
		h.seq, h.hash = r.Record.Seq, r.Record.Hash
		say("ACK %s %d", h.id, r.Record.Seq)
		// Then a run that derives nothing (no mention): its position is
		// not stored at once, and a kill may follow it.
		for k := 0; k < 3; k++ {
			ev := writers[i].Event(time.Now().UnixMilli(), "message.create", h.id, h.seq, h.hash, map[string]any{"content_type": "text/plain", "content": "plain"})
			r, err := n.Submit(context.Background(), writers[i].Sign(ev), h.id)
			if err != nil {
				t.Error(err)
				return
			}
			h.seq, h.hash = r.Record.Seq, r.Record.Hash
		}
	}
	before := derived()
	mention(0)
	for derived() <= before {
		time.Sleep(time.Millisecond)
	}
	mu.Lock()
	armed, heldAt = true, derived()
	mu.Unlock()
	var wg sync.WaitGroup
	for i := range heads {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := 0; k < perRoom; k++ {
				mention(i)
			}
		}()
	}
	wg.Wait()
	say("WRITTEN")
	select {} // killed by the parent
}
