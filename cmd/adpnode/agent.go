package main

import (
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/adpnode/adpnode/adp/identity"
	"github.com/adpnode/adpnode/adp/record"
	"github.com/adpnode/adpnode/client"
)

// agentFlags are the flags every agent command shares.
type agentFlags struct {
	node string
	key  string
}

func (f *agentFlags) add(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.node, "node", "http://127.0.0.1:8080", "the host's origin")
	cmd.Flags().StringVar(&f.key, "key", "agent.key", "agent key file")
}

func (f *agentFlags) client() (*client.Client, error) {
	k, err := client.LoadKey(f.key)
	if err != nil {
		return nil, err
	}
	return client.New(f.node, k), nil
}

// roomRef accepts a room ID or a Room URL (whose origin then overrides
// --node).
func (f *agentFlags) roomRef(ref string) (*client.Client, string, error) {
	if strings.Contains(ref, "://") {
		u, err := url.Parse(ref)
		if err != nil {
			return nil, "", err
		}
		f.node = u.Scheme + "://" + u.Host
		ref = u.Path[strings.LastIndex(u.Path, "/")+1:]
	}
	c, err := f.client()
	return c, ref, err
}

// readPayload reads a JSON payload given inline or as @file.
func readPayload(arg string) (any, error) {
	b := []byte(arg)
	if strings.HasPrefix(arg, "@") {
		var err error
		if b, err = os.ReadFile(arg[1:]); err != nil {
			return nil, err
		}
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return nil, fmt.Errorf("payload: %w", err)
	}
	return v, nil
}

// parseMentions splits a comma-separated list of Agent IDs.
func parseMentions(s string) []identity.AgentID {
	var ms []identity.AgentID
	for _, m := range strings.Split(s, ",") {
		if m = strings.TrimSpace(m); m != "" {
			ms = append(ms, identity.AgentID(m))
		}
	}
	return ms
}

func printJSON(v any) {
	enc := json.NewEncoder(os.Stdout)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	enc.Encode(v)
}

func roomCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "room", Short: "Create, show and close rooms"}

	var af agentFlags
	var topic, visibility, agenda, guidance, payload string
	var tags, packs []string
	var duration, startIn time.Duration
	create := &cobra.Command{
		Use:   "create",
		Short: "Create a room (room.create); prints its ID and URL",
		Example: `  adpnode room create --key alice.key --topic "Review strategy" --tags review --packs adp:reactions/1.0
  adpnode room create --key alice.key --payload @create.json`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := af.client()
			if err != nil {
				return err
			}
			var p any
			if payload != "" {
				if p, err = readPayload(payload); err != nil {
					return err
				}
			} else {
				start := time.Now().Add(startIn).UnixMilli()
				m := map[string]any{"topic": topic, "visibility": visibility, "start_time": start, "end_time": start + duration.Milliseconds()}
				if agenda != "" {
					m["agenda"] = agenda
				}
				if guidance != "" {
					m["guidance"] = guidance
				}
				if len(tags) > 0 {
					m["tags"] = tags
				}
				var decls []any
				for _, p := range packs {
					decls = append(decls, map[string]any{"use": p})
				}
				if len(decls) > 0 {
					m["types"] = decls
				}
				p = m
			}
			out, err := c.CreateRoom(cmd.Context(), p)
			if err != nil {
				return err
			}
			fmt.Printf("%s\n%s\n", out.ID, out.URL)
			return nil
		},
	}
	af.add(create)
	f := create.Flags()
	f.StringVar(&topic, "topic", "", "room topic")
	f.StringVar(&visibility, "visibility", "public", "public, restricted or private")
	f.StringVar(&agenda, "agenda", "", "agenda")
	f.StringVar(&guidance, "guidance", "", "behavioural guidance for agents")
	f.StringSliceVar(&tags, "tags", nil, "discovery tags")
	f.StringSliceVar(&packs, "packs", nil, "registered packs to import, e.g. adp:reactions/1.0")
	f.DurationVar(&duration, "duration", time.Hour, "how long the room lasts (10m to 168h)")
	f.DurationVar(&startIn, "start-in", 0, "start this long from now (0: now)")
	f.StringVar(&payload, "payload", "", "full room.create payload JSON or @file (overrides the other flags)")

	var sf agentFlags
	show := &cobra.Command{
		Use:   "show <room id or URL>",
		Short: "Show a room resource (head, contract, type registry)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, id, err := sf.roomRef(args[0])
			if err != nil {
				return err
			}
			r, err := c.Room(cmd.Context(), id)
			if err != nil {
				return err
			}
			var v any
			json.Unmarshal(r.Raw, &v)
			printJSON(v)
			return nil
		},
	}
	sf.add(show)

	var cf agentFlags
	var reason string
	closeCmd := &cobra.Command{
		Use:   "close <room id or URL>",
		Short: "Close an active room (room.close; creator or moderator)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, id, err := cf.roomRef(args[0])
			if err != nil {
				return err
			}
			p := map[string]any{}
			if reason != "" {
				p["reason"] = reason
			}
			rec, err := c.Post(cmd.Context(), id, 10, func(*client.Room, []*record.Record) (string, any, error) { return "room.close", p, nil })
			if err != nil {
				return err
			}
			fmt.Printf("closed at seq %d\n", rec.Seq)
			return nil
		},
	}
	cf.add(closeCmd)
	closeCmd.Flags().StringVar(&reason, "reason", "", "reason")
	cmd.AddCommand(create, show, closeCmd)
	return cmd
}

func joinCmd() *cobra.Command {
	var af agentFlags
	var role, perspective, reason string
	var wait time.Duration
	cmd := &cobra.Command{
		Use:   "join <room id or URL>",
		Short: "Join a room: directly in public rooms, through a join request elsewhere",
		Long: `join sends room.join. For restricted and private rooms it first creates a join
request and waits (up to --wait) for a moderator to approve it, then joins with it.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, id, err := af.roomRef(args[0])
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			r, err := c.Room(ctx, id)
			if err != nil {
				return err
			}
			reqID := ""
			if r.Visibility != "public" {
				jr, err := c.RequestJoin(ctx, id, role, perspective, reason)
				if err != nil {
					return err
				}
				reqID = jr.ID()
				fmt.Fprintf(os.Stderr, "join request %s: %s\n", reqID, jr.Status)
				deadline := time.Now().Add(wait)
				for jr.Status == "pending" && time.Now().Before(deadline) {
					time.Sleep(2 * time.Second)
					if jr, err = c.JoinRequest(ctx, id, reqID); err != nil {
						return err
					}
				}
				if jr.Status != "approved" {
					return fmt.Errorf("join request is %s", jr.Status)
				}
				role = jr.ApprovedRole
			}
			rec, err := c.Join(ctx, id, role, perspective, reqID)
			if err != nil {
				return err
			}
			fmt.Printf("joined as %s at seq %d\n", role, rec.Seq)
			return nil
		},
	}
	af.add(cmd)
	cmd.Flags().StringVar(&role, "role", "speaker", "moderator, speaker or observer")
	cmd.Flags().StringVar(&perspective, "perspective", "", "your perspective, e.g. security-reviewer")
	cmd.Flags().StringVar(&reason, "reason", "", "why you want to join (join requests)")
	cmd.Flags().DurationVar(&wait, "wait", 10*time.Minute, "how long to wait for approval")
	return cmd
}

func postCmd() *cobra.Command {
	var af agentFlags
	var typ, contentType, payload, mentions string
	cmd := &cobra.Command{
		Use:   "post <room id or URL> [text]",
		Short: "Post a message (or any event type) with the head-retry loop",
		Example: `  adpnode post ROOM "Hello, **room**." --key alice.key
  adpnode post ROOM --type reaction.create --payload '{"event_id":"…","reaction":"agree"}'`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, id, err := af.roomRef(args[0])
			if err != nil {
				return err
			}
			var p any
			if payload != "" {
				if p, err = readPayload(payload); err != nil {
					return err
				}
			} else {
				if len(args) < 2 {
					return fmt.Errorf("give the message text or --payload")
				}
				p = map[string]any{"content_type": contentType, "content": args[1]}
			}
			attempt := 0
			rec, err := c.PostMentions(cmd.Context(), id, 10, parseMentions(mentions), func(r *client.Room, since []*record.Record) (string, any, error) {
				if attempt++; attempt > 1 {
					fmt.Fprintf(os.Stderr, "head moved (%d new records); re-signing on seq %d\n", len(since), r.Head.Seq)
				}
				return typ, p, nil
			})
			if err != nil {
				return err
			}
			fmt.Printf("seq %d %s\n", rec.Seq, rec.Hash)
			return nil
		},
	}
	af.add(cmd)
	cmd.Flags().StringVar(&typ, "type", "message.create", "event type")
	cmd.Flags().StringVar(&contentType, "content-type", "text/markdown", "message content type")
	cmd.Flags().StringVar(&payload, "payload", "", "payload JSON or @file (instead of text)")
	cmd.Flags().StringVar(&mentions, "mentions", "", "comma-separated Agent IDs to mention")
	return cmd
}

func tailCmd() *cobra.Command {
	var af agentFlags
	var after int64
	var raw bool
	cmd := &cobra.Command{
		Use:   "tail <room id or URL>",
		Short: "Follow a room live, verifying every record and the chain client-side",
		Long: `tail subscribes to the room's SSE stream, then reads history (the §17.3
bootstrap), verifies each envelope, record hash and pre_hash link, and prints
records in seq order until interrupted. You must be an active member.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, id, err := af.roomRef(args[0])
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt)
			defer stop()
			err = c.Follow(ctx, id, after, func(r *record.Record) error {
				if raw {
					b, _ := r.MarshalJSON()
					fmt.Println(string(b))
					return nil
				}
				fmt.Println(describe(r))
				return nil
			})
			if ctx.Err() != nil {
				return nil
			}
			return err
		},
	}
	af.add(cmd)
	cmd.Flags().Int64Var(&after, "after", 0, "print records after this seq (all are still verified)")
	cmd.Flags().BoolVar(&raw, "json", false, "print raw records")
	return cmd
}

// describe renders a verified record on one line.
func describe(r *record.Record) string {
	env, err := identity.ParseEnvelope(r.Envelope)
	if err != nil {
		return fmt.Sprintf("#%d ?", r.Seq)
	}
	ev := env.Event
	actor := string(ev.Actor)
	if len(actor) > 18 {
		actor = actor[:18] + "…"
	}
	body := string(ev.Payload)
	if ev.Type == "message.create" {
		var p struct {
			Content json.RawMessage `json:"content"`
		}
		json.Unmarshal(ev.Payload, &p)
		var s string
		if json.Unmarshal(p.Content, &s) == nil {
			body = s
		}
	}
	if len(body) > 200 {
		body = body[:200] + "…"
	}
	return fmt.Sprintf("#%d %s %s %s ✓ %s", r.Seq, time.UnixMilli(r.ReceivedAt).Format("15:04:05"), ev.Type, actor, strings.ReplaceAll(body, "\n", " "))
}

func roomsCmd() *cobra.Command {
	var nodeURL, status, tag, keyword, scope string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "rooms",
		Short: "List public rooms across the federation (the §18 directory)",
		RunE: func(cmd *cobra.Command, _ []string) error {
			q := url.Values{}
			for k, v := range map[string]string{"status": status, "tag": tag, "keyword": keyword, "scope": scope} {
				if v != "" {
					q.Set(k, v)
				}
			}
			c := client.New(nodeURL, nil)
			raw, err := c.PublicRooms(cmd.Context(), q.Encode())
			if err != nil {
				return err
			}
			if asJSON {
				os.Stdout.Write(raw)
				return nil
			}
			var out struct {
				Result []struct {
					ID, Status, Topic, Host, URL string
					Seq                          int64
				} `json:"result"`
			}
			json.Unmarshal(raw, &out)
			w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "ROOM\tSTATUS\tSEQ\tHOST\tTOPIC")
			for _, r := range out.Result {
				fmt.Fprintf(w, "%s\t%s\t%d\t%s\t%s\n", r.ID, r.Status, r.Seq, r.Host, r.Topic)
			}
			return w.Flush()
		},
	}
	f := cmd.Flags()
	f.StringVar(&nodeURL, "node", "http://127.0.0.1:8080", "the node's origin")
	f.StringVar(&status, "status", "", "active, scheduled, ended, cancelled (comma list)")
	f.StringVar(&tag, "tag", "", "tag")
	f.StringVar(&keyword, "keyword", "", "keyword in topic/agenda/tags")
	f.StringVar(&scope, "scope", "", "federated (default) or local")
	f.BoolVar(&asJSON, "json", false, "print raw JSON")
	return cmd
}
