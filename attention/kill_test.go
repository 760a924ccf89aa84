//go:build linux

package attention_test

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
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

// A pass's batch rides the node's group commit as one or more commits. A
// node in a child process is killed (SIGKILL) while a pass has stored only
// its first commit: the rest of its items, and every watermark of the
// pass, never reached the disk, and records kept coming after it. After
// the restart every acknowledged mention is in each mentioned inbox exactly
// once, the inbox seqs run 1..head without a gap, and a second restart
// adds nothing.
func TestKillDuringQueuedPass(t *testing.T) {
	if dir := os.Getenv("ATTENTION_KILL_CHILD"); dir != "" {
		killChild(t, dir)
		return
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run", "^TestKillDuringQueuedPass$")
	cmd.Env = append(os.Environ(), "ATTENTION_KILL_CHILD="+dir)
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
	timer := time.AfterFunc(time.Minute, func() { cmd.Process.Kill() })
	defer timer.Stop()
	acked := map[string]bool{} // room/seq
	held, written := false, false
	sc := bufio.NewScanner(out)
	for !(held && written) && sc.Scan() {
		f := strings.Fields(sc.Text())
		switch {
		case len(f) == 3 && f[0] == "ACK":
			acked[f[1]+"/"+f[2]] = true
		case len(f) == 1 && f[0] == "HELD":
			held = true
		case len(f) == 1 && f[0] == "WRITTEN":
			written = true
		}
	}
	if !held || !written {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("child ended early (held %v, written %v): %v\n%s", held, written, sc.Err(), stderr.String())
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()

	bob, carol := adptest.NewAgent("bob"), adptest.NewAgent("carol")
	inbox := func(a *attention.Attention, who identity.AgentID) []attention.MentionItem {
		p, err := a.Mentions(who, attention.Cursor{}, 0)
		if err != nil {
			t.Fatal(err)
		}
		return p.Items.([]attention.MentionItem)
	}
	// What the disk held at the kill (no catch-up): the first pass and
	// part of the held one.
	n, err := node.Open(node.Config{DataDir: dir, PublicURL: "http://127.0.0.1:1", Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	cfg := attention.ForNode(n, nil, nil)
	cfg.Local = nil // no following: what the disk held
	a, err := attention.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	before := len(inbox(a, bob.ID)) + len(inbox(a, carol.ID))
	a.Close()
	total := 2 * len(acked)
	if before <= 2 || before >= total {
		t.Fatalf("at the kill the inboxes held %d of %d items: want the first pass and part of the held one", before, total)
	}
	n.Close()

	for round := 0; round < 2; round++ {
		n, err := node.Open(node.Config{DataDir: dir, PublicURL: "http://127.0.0.1:1", Log: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		a, err := attention.Open(attention.ForNode(n, nil, nil))
		if err != nil {
			t.Fatal(err)
		}
		testwait.Until(t, 20*time.Second, "the condition", func() bool { return len(inbox(a, bob.ID)) >= len(acked) && len(inbox(a, carol.ID)) >= len(acked) })
		a.Close() // the catch-up has finished
		for _, who := range []identity.AgentID{bob.ID, carol.ID} {
			items := inbox(a, who)
			seen := map[string]int{}
			for i, it := range items {
				if it.Seq != int64(i+1) {
					t.Fatalf("round %d: inbox item %d has seq %d", round, i, it.Seq)
				}
				seen[fmt.Sprintf("%s/%d", it.RoomID, it.RoomSeq)]++
			}
			for k := range acked {
				if seen[k] != 1 {
					t.Errorf("round %d: acknowledged %s is in the inbox %d times", round, k, seen[k])
				}
			}
			if len(items) != len(acked) {
				t.Errorf("round %d: %d items for %d acknowledged mentions", round, len(items), len(acked))
			}
		}
		n.Close()
	}
	t.Logf("%d acknowledged records mentioning 2 agents; %d of %d items were on disk at the kill", len(acked), before, total)
}

// killChild runs in the child process: a first pass is stored, then the
// next pass that takes more than one commit stores its first commit and
// stops; the writes go on, acknowledged one by one on stdout.
func killChild(t *testing.T, dir string) {
	n, err := node.Open(node.Config{DataDir: dir, PublicURL: "http://127.0.0.1:1", Rates: node.Rates{AgentStatus: 60},
		Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	armed := false
	say := func(format string, args ...any) {
		mu.Lock()
		fmt.Printf(format+"\n", args...)
		mu.Unlock()
	}
	cfg := attention.ForNode(n, nil, nil)
	bob, carol := adptest.NewAgent("bob"), adptest.NewAgent("carol")
	var a *attention.Attention
	attention.SetCommits(&cfg, 11, 1<<20, func(i, _ int) {
		mu.Lock()
		hold := armed && i == 1
		mu.Unlock()
		if hold {
			// The first commit is queued, not yet durable: HELD only
			// once it is (its items are past the first pass's).
			for !inboxHolds(a, bob.ID, 2) && !inboxHolds(a, carol.ID, 2) {
				time.Sleep(time.Millisecond)
			}
			say("HELD")
			select {} // the owner stops here until the kill
		}
	})
	a, err = attention.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	const rooms, perRoom = 4, 12
	type head struct {
		id   string
		seq  int64
		hash string
	}
	heads := make([]head, rooms)
	writers := make([]*adptest.Agent, rooms)
	now := time.Now().UnixMilli()
	for i := range heads {
		writers[i] = adptest.NewAgent(fmt.Sprintf("kill-writer-%d", i))
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
	}
	mention(0)
	for !inboxHolds(a, bob.ID, 1) {
		time.Sleep(time.Millisecond)
	}
	mu.Lock()
	armed = true
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
