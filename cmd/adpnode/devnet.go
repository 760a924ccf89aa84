package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/adpnode/adpnode/client"
	"github.com/adpnode/adpnode/mirror"
	"github.com/adpnode/adpnode/node"
)

func devnetCmd() *cobra.Command {
	var basePort, p2pPort int
	var dataDir string
	var keep bool
	var duration time.Duration
	cmd := &cobra.Command{
		Use:   "devnet",
		Short: "Run a local 3-node federation with demo agents talking in a public room",
		Long: `devnet starts three nodes in this process on 127.0.0.1 (HTTP on base-port..+2,
libp2p on p2p-port..+2), peers them, mirrors everything on nodes 2 and 3,
creates a public room on node 1 and has three demo agents talk in it. It
prints the URLs to look at and the replication progress. Ctrl-C stops it.`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			if dataDir == "" {
				d, err := os.MkdirTemp("", "adpnode-devnet-")
				if err != nil {
					return err
				}
				dataDir = d
				if !keep {
					defer os.RemoveAll(d)
				}
			}
			log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
			var stacks []*stack
			defer func() {
				for i := len(stacks) - 1; i >= 0; i-- {
					stacks[i].close()
				}
			}()
			var first string
			for i := 0; i < 3; i++ {
				listen := fmt.Sprintf("127.0.0.1:%d", basePort+i)
				fs := fedSettings{enabled: true, interval: 5 * time.Second, allowPrivatePeers: true,
					listen: []string{fmt.Sprintf("/ip4/127.0.0.1/tcp/%d", p2pPort+i)}}
				if first != "" {
					fs.peers = []string{first}
				}
				cfg := node.Config{PublicURL: "http://" + listen, DataDir: filepath.Join(dataDir, fmt.Sprintf("node%d", i+1)), Log: log,
					Packs: node.PackFetchConfig{AllowPrivate: true}} // everything is on 127.0.0.1
				s, err := startStack(cfg, listen, fs, log)
				if err != nil {
					return fmt.Errorf("node %d: %w", i+1, err)
				}
				stacks = append(stacks, s)
				if i == 0 {
					first = s.fed.Addrs()[0]
				} else if _, err := s.mir.AddTarget(mirror.TargetAll, ""); err != nil {
					return err
				}
				fmt.Printf("node %d  http://%s  (libp2p %s)\n", i+1, listen, s.fed.Addrs()[0])
			}

			// Demo agents: a moderator who creates the room, two speakers.
			host := stacks[0].n.Origin()
			names := []string{"moderator", "analyst", "skeptic"}
			agents := make([]*client.Client, len(names))
			for i := range agents {
				k, err := client.GenerateKey()
				if err != nil {
					return err
				}
				agents[i] = client.New(host, k)
			}
			now := time.Now().UnixMilli()
			room, err := agents[0].CreateRoom(ctx, map[string]any{
				"topic": "Devnet demo: is group commit worth it?", "visibility": "public",
				"agenda": "Agents debate durability and throughput.", "guidance": "Be brief; cite numbers.",
				"start_time": now, "end_time": now + duration.Milliseconds(), "tags": []string{"devnet", "demo"},
				"types": []any{map[string]any{"use": "adp:reactions/1.0"}, map[string]any{"use": "adp:deliberation/1.0"}},
			})
			if err != nil {
				return err
			}
			for i, a := range agents[1:] {
				if _, err := a.Join(ctx, room.ID, "speaker", names[i+1], ""); err != nil {
					return err
				}
			}
			fmt.Printf("\nroom     %s\n", room.URL)
			fmt.Printf("viewer   %s/#/rooms/%s\n", host, room.ID)
			for i, s := range stacks[1:] {
				fmt.Printf("mirror %d %s/v1/mirrors/rooms/%s\n", i+2, s.n.Origin(), room.ID)
			}
			fmt.Printf("directory (federated) on node 3: %s/v1/rooms/public\n\n", stacks[2].n.Origin())

			// The demo conversation runs once, paced within node 1's
			// per-agent limits; then the agents stay quiet.
			tctx, tcancel := context.WithCancel(ctx)
			talkDone := make(chan struct{})
			go func() {
				defer close(talkDone)
				err := runTalk(tctx, talkConfig{Agents: agents, Names: names, RoomID: room.ID, Script: demoScript,
					Interval: 4 * time.Second, Rates: stacks[0].n.Config().Rates, Now: time.Now, Sleep: sleepCtx,
					Out: os.Stdout, Err: os.Stderr})
				if err == nil {
					fmt.Println("demo script done; the agents stay quiet")
				}
			}()
			defer func() { tcancel(); <-talkDone }()
			progress := time.NewTicker(2 * time.Second)
			defer progress.Stop()
			sample := func() devnetProgress {
				var p devnetProgress
				for _, s := range stacks[0].n.Summaries() {
					if s.ID == room.ID {
						p.HostSeq, p.Ended = s.Seq, s.Status == "ended" || s.Status == "cancelled"
					}
				}
				for _, s := range stacks[1:] {
					v := int64(-1)
					if r, ok := s.mir.Room(room.ID, ""); ok {
						v = r.Tip()
					}
					p.Mirrors = append(p.Mirrors, v)
				}
				return p
			}
			reportProgress(ctx, progress.C, sample, os.Stdout)
			fmt.Println("\nstopping devnet")
			return nil
		},
	}
	cmd.Flags().IntVar(&basePort, "base-port", 8081, "HTTP port of node 1 (nodes 2 and 3 use the next two)")
	cmd.Flags().IntVar(&p2pPort, "p2p-port", 4101, "libp2p TCP port of node 1")
	cmd.Flags().StringVar(&dataDir, "data", "", "data directory (default: a temporary one, removed at exit)")
	cmd.Flags().BoolVar(&keep, "keep", false, "keep the temporary data directory")
	cmd.Flags().DurationVar(&duration, "room-duration", time.Hour, "how long the demo room lasts")
	return cmd
}

// devnetProgress is what devnet reports: the host's seq of the demo room,
// whether the room has ended, and each mirror's verified seq (-1 while it
// waits for the room).
type devnetProgress struct {
	HostSeq int64
	Ended   bool
	Mirrors []int64
}

func (p devnetProgress) line() string {
	line := fmt.Sprintf("host seq %d", p.HostSeq)
	for i, v := range p.Mirrors {
		if v < 0 {
			line += fmt.Sprintf(" | node %d waiting", i+2)
		} else {
			line += fmt.Sprintf(" | node %d verified %d", i+2, v)
		}
	}
	return line
}

// settled reports whether the room has ended and every mirror holds its
// last record: nothing will change any more.
func (p devnetProgress) settled() bool {
	if !p.Ended {
		return false
	}
	for _, v := range p.Mirrors {
		if v != p.HostSeq {
			return false
		}
	}
	return true
}

// reportProgress prints the progress line at each tick when it differs
// from the last one printed, and once the room has ended and every mirror
// has caught up, says so once and prints nothing more. It returns when
// ctx ends.
func reportProgress(ctx context.Context, tick <-chan time.Time, sample func() devnetProgress, out io.Writer) {
	last, done := "", false
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick:
			if done {
				continue
			}
			p := sample()
			if line := p.line(); line != last {
				fmt.Fprintln(out, line)
				last = line
			}
			if p.settled() {
				fmt.Fprintf(out, "room ended at seq %d and every mirror holds it; Ctrl-C stops devnet\n", p.HostSeq)
				done = true
			}
		}
	}
}
