package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/adpnode/adpnode/adp/identity"
	"github.com/adpnode/adpnode/adp/record"
	"github.com/adpnode/adpnode/adp/seal"
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
	k, err := loadAgentKey(f.key)
	if err != nil {
		return nil, err
	}
	c := newClient(f.node, k)
	// Sealing keys for member-only rooms live beside the agent key, made
	// on first use (0600).
	c.SealPath = client.SealKeyPath(f.key)
	c.OnBadWrap = reportBadWrap
	return c, nil
}

// readerClient is a client for reads: with the key when --key was given or
// the default key file exists, anonymous otherwise (public rooms need no
// key).
func (f *agentFlags) readerClient(cmd *cobra.Command) (*client.Client, error) {
	if !cmd.Flags().Changed("key") {
		if _, err := os.Stat(f.key); errors.Is(err, os.ErrNotExist) {
			return newClient(f.node, nil), nil
		}
	}
	return f.client()
}

// splitRef accepts a room ID or a Room URL (whose origin then overrides
// --node) and returns the room ID. For a room ID, the node is asked first:
// one that does not host the room but lists it in its federated directory
// says where it is (hosted_elsewhere), and the command talks to that host.
func (f *agentFlags) splitRef(ref string) (string, error) {
	if !strings.Contains(ref, "://") {
		f.locate(ref)
		return ref, nil
	}
	u, err := url.Parse(ref)
	if err != nil {
		return "", usageErrorf("room URL: %v", err)
	}
	f.node = u.Scheme + "://" + u.Host
	return u.Path[strings.LastIndex(u.Path, "/")+1:], nil
}

// locate points f.node at the host of room id when the node names
// another host for it. Join requests are signed for the host's origin
// (the token's audience), so the command talks to the host itself rather
// than through the node; a node that cannot be asked changes nothing.
func (f *agentFlags) locate(id string) {
	if !record.ValidRoomID(id) {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(f.node, "/")+"/v1/rooms/"+id, nil)
	if err != nil {
		return
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		return
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var ce *client.Error
	if !errors.As(nodeError(resp.StatusCode, b), &ce) || ce.Data["reason"] != "hosted_elsewhere" {
		return
	}
	host, _ := ce.Data["host"].(string)
	u, err := url.Parse(host)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Path != "" {
		return
	}
	fmt.Fprintf(os.Stderr, "room %s is hosted by %s (listed in %s's directory); talking to it there\n", id, termSafe(host), f.node)
	f.node = u.Scheme + "://" + u.Host
}

// roomRef accepts a room ID or a Room URL (whose origin then overrides
// --node).
func (f *agentFlags) roomRef(ref string) (*client.Client, string, error) {
	id, err := f.splitRef(ref)
	if err != nil {
		return nil, "", err
	}
	c, err := f.client()
	return c, id, err
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
		return nil, usageErrorf("payload is not valid JSON: %v", err)
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
	_ = enc.Encode(v)
}

func roomCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "room", Short: "Create, show and close rooms"}

	var af agentFlags
	var topic, visibility, agenda, guidance, payload, confidentiality string
	var tags, packs []string
	var duration, startIn time.Duration
	create := &cobra.Command{
		Use:   "create",
		Short: "Create a room (room.create); prints its ID and URL",
		Example: `  adpnode room create --key alice.key --topic "Review strategy" --tags review --packs adp:reactions/1.0
  adpnode room create --key alice.key --topic "Pricing" --confidentiality member-only
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
					if d, err := client.BundledPack(af.node, p); err == nil {
						decls = append(decls, d) // adpnode's bundled packs, imported as external packs from --node
						continue
					}
					decls = append(decls, map[string]any{"use": p})
				}
				if len(decls) > 0 {
					m["types"] = decls
				}
				p = m
			}
			var out *client.Created
			switch confidentiality {
			case seal.MemberOnly:
				out, err = c.CreateSealedRoom(cmd.Context(), p)
			case seal.HubTrusted:
				out, err = c.CreateRoom(cmd.Context(), p)
			default:
				return usageErrorf("--confidentiality is hub-trusted or member-only")
			}
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
	f.StringSliceVar(&packs, "packs", nil, "packs to import: registered (adp:reactions/1.0) or bundled by adpnode (adpnode:coordination/1.0, adpnode:deal/1.0)")
	f.DurationVar(&duration, "duration", time.Hour, "how long the room lasts (10m to 168h)")
	f.DurationVar(&startIn, "start-in", 0, "start this long from now (0: now)")
	f.StringVar(&payload, "payload", "", "full room.create payload JSON or @file (overrides the other flags)")
	f.StringVar(&confidentiality, "confidentiality", seal.HubTrusted, "hub-trusted (the host reads messages) or member-only (messages sealed for members; see docs/sealed-rooms.md)")

	var sf agentFlags
	show := &cobra.Command{
		Use:   "show <room id or URL>",
		Short: "Show a room resource (head, contract, type registry)",
		Long: `show prints the room resource. Public rooms need no key; with --key (or an
agent.key in the current directory) the read is authenticated, as private
and restricted rooms need.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := sf.splitRef(args[0])
			if err != nil {
				return err
			}
			c, err := sf.readerClient(cmd)
			if err != nil {
				return err
			}
			r, err := c.Room(cmd.Context(), id)
			if err != nil {
				return err
			}
			var v any
			_ = json.Unmarshal(r.Raw, &v)
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

// joinResumeCommand is the command line that resumes a pending join request:
// it repeats --node (unless the room was given as a Room URL, which names the
// node) and --key when they were given, so it works as printed.
func joinResumeCommand(cmd *cobra.Command, ref, requestID string) string {
	parts := []string{"adpnode", "join", ref, "--request", requestID}
	if f := cmd.Flags().Lookup("node"); f != nil && f.Changed && !strings.Contains(ref, "://") {
		parts = append(parts, "--node", f.Value.String())
	}
	if f := cmd.Flags().Lookup("key"); f != nil && f.Changed {
		parts = append(parts, "--key", f.Value.String())
	}
	return strings.Join(parts, " ")
}

func joinCmd() *cobra.Command {
	var af agentFlags
	var role, perspective, reason, requestID string
	var wait, poll time.Duration
	cmd := &cobra.Command{
		Use:   "join <room id or URL>",
		Short: "Join a room through a join request (approved at once in public rooms)",
		Long: `join creates a join request (§11), waits up to --wait for it to be approved,
then joins with it (room.join with request_id). Public rooms approve at
once; restricted and private rooms wait for a creator or moderator
(adpnode requests approve). join never needs to read the room first, so it
works for private rooms you cannot see yet.

A request still pending when --wait runs out stays pending: run join again
(it resumes your pending request, or joins with it once it is approved) or
give --request ID.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, id, err := af.roomRef(args[0])
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			var jr *client.JoinRequest
			if requestID == "" {
				jr, err = c.RequestJoin(ctx, id, role, perspective, reason)
				var ce *client.Error
				if errors.As(err, &ce) && (ce.Data["reason"] == "pending_request" || ce.Data["reason"] == "approved_request") {
					requestID, _ = ce.Data["request_id"].(string)
					what := "pending"
					if ce.Data["reason"] == "approved_request" {
						what = "approved"
					}
					fmt.Fprintf(os.Stderr, "resuming your %s join request %s\n", what, requestID)
					err = nil
				}
				if err != nil {
					return err
				}
			}
			if requestID != "" {
				if jr, err = c.JoinRequest(ctx, id, requestID); err != nil {
					return err
				}
			}
			requestID = jr.ID()
			fmt.Fprintf(os.Stderr, "join request %s: %s\n", requestID, jr.Status)
			deadline := time.Now().Add(wait)
			for jr.Status == "pending" && time.Now().Before(deadline) {
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-time.After(poll):
				}
				if jr, err = c.JoinRequest(ctx, id, requestID); err != nil {
					return err
				}
			}
			switch jr.Status {
			case "approved":
			case "pending":
				return withCode(exitConflict, fmt.Errorf("join request %s is still pending after %s; resume with: %s",
					requestID, wait, joinResumeCommand(cmd, args[0], requestID)))
			case "rejected":
				msg := "join request " + requestID + " was rejected"
				if jr.ReviewReason != "" {
					msg += ": " + jr.ReviewReason
				}
				return withCode(exitDenied, errors.New(msg))
			default:
				return withCode(exitConflict, fmt.Errorf("join request %s is %s", requestID, jr.Status))
			}
			if jr.ApprovedRole != "" {
				role = jr.ApprovedRole
			}
			// Approved: the applicant may now read the room's head and join.
			rec, err := c.Join(ctx, id, role, perspective, requestID)
			if err != nil {
				return err
			}
			fmt.Printf("joined as %s at seq %d\n", role, rec.Seq)
			if mode, err := c.Confidentiality(ctx, id); err == nil && mode == seal.MemberOnly {
				krec, err := c.PublishSealKey(ctx, id)
				if err != nil {
					return fmt.Errorf("member-only room: publishing your sealing key failed (retry with adpnode seal key): %w", err)
				}
				fmt.Printf("sealing key published at seq %d\n", krec.Seq)
			}
			return nil
		},
	}
	af.add(cmd)
	cmd.Flags().StringVar(&role, "role", "speaker", "moderator, speaker or observer")
	cmd.Flags().StringVar(&perspective, "perspective", "", "your perspective, e.g. security-reviewer")
	cmd.Flags().StringVar(&reason, "reason", "", "why you want to join (join requests)")
	cmd.Flags().StringVar(&requestID, "request", "", "resume this join request instead of creating one")
	cmd.Flags().DurationVar(&wait, "wait", 10*time.Minute, "how long to wait for approval")
	cmd.Flags().DurationVar(&poll, "poll", 2*time.Second, "how often to check the request while waiting")
	return cmd
}

func requestsCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "requests", Short: "List, approve and reject join requests (creator or moderator)"}

	var lf agentFlags
	var status string
	var asJSON bool
	list := &cobra.Command{
		Use:   "list <room id or URL>",
		Short: "List a room's join requests (pending by default)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, id, err := lf.roomRef(args[0])
			if err != nil {
				return err
			}
			st := status
			if st == "all" {
				st = ""
			}
			reqs, err := c.JoinRequests(cmd.Context(), id, st)
			if err != nil {
				return err
			}
			if asJSON {
				printJSON(map[string]any{"result": reqs})
				return nil
			}
			w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "REQUEST\tSTATUS\tROLE\tAPPLICANT\tPERSPECTIVE\tREASON")
			for _, r := range reqs {
				var f struct {
					Applicant, Role, Perspective, Reason string
				}
				_ = json.Unmarshal(r.Request, &f)
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", r.ID(), r.Status, f.Role, f.Applicant, f.Perspective, oneLine(f.Reason, 60))
			}
			return w.Flush()
		},
	}
	lf.add(list)
	list.Flags().StringVar(&status, "status", "pending", "pending, approved, rejected, expired or all")
	list.Flags().BoolVar(&asJSON, "json", false, "print the requests as JSON")

	review := func(approve bool) *cobra.Command {
		var rf agentFlags
		var role, reason string
		use, short := "reject <room id or URL> <request id>", "Reject a join request (signed room.join.review)"
		if approve {
			use, short = "approve <room id or URL> <request id>", "Approve a join request with a role (signed room.join.review)"
		}
		c := &cobra.Command{
			Use:   use,
			Short: short,
			Args:  cobra.ExactArgs(2),
			RunE: func(cmd *cobra.Command, args []string) error {
				c, id, err := rf.roomRef(args[0])
				if err != nil {
					return err
				}
				jr, err := c.JoinRequest(cmd.Context(), id, args[1])
				if err != nil {
					return err
				}
				if approve && role == "" {
					var f struct{ Role string }
					_ = json.Unmarshal(jr.Request, &f)
					role = f.Role
				}
				// The review carries the request object exactly as the host
				// issued it.
				rec, err := c.Review(cmd.Context(), id, jr, approve, role, reason)
				if err != nil {
					return err
				}
				verb := "rejected"
				if approve {
					verb = "approved as " + role
				}
				fmt.Printf("%s %s at seq %d\n", args[1], verb, rec.Seq)
				return nil
			},
		}
		rf.add(c)
		if approve {
			c.Flags().StringVar(&role, "role", "", "role to approve (default: the role requested)")
		}
		c.Flags().StringVar(&reason, "reason", "", "reason, shown to the applicant")
		return c
	}
	cmd.AddCommand(list, review(true), review(false))
	return cmd
}

// oneLine shortens s to n runes on one line.
func oneLine(s string, n int) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n]) + "…"
	}
	return s
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
			// Send seals in member-only rooms: message content, and custom
			// types of kind message as sealed events (decision 23).
			// (Send may ask twice on the same head: once to learn that the
			// event must be sealed, once to seal it; only a moved head is news.)
			lastHead := int64(-1)
			rec, err := c.Send(cmd.Context(), id, 10, parseMentions(mentions), func(r *client.Room, since []*record.Record) (string, any, error) {
				if lastHead >= 0 && r.Head.Seq != lastHead {
					fmt.Fprintf(os.Stderr, "head moved (%d new records); re-signing on seq %d\n", len(since), r.Head.Seq)
				}
				lastHead = r.Head.Seq
				return typ, p, nil
			})
			if err != nil {
				return err
			}
			if isSealedRecord(rec) {
				fmt.Printf("seq %d %s (sealed)\n", rec.Seq, rec.Hash)
				return nil
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
	var raw, noNames bool
	var poll time.Duration
	cmd := &cobra.Command{
		Use:   "tail <room id or URL>",
		Short: "Follow a room live, verifying every record and the chain client-side",
		Long: `tail prints a room's records in seq order, verifying each envelope, record
hash and pre_hash link from seq 1. Active members follow the SSE stream
(subscribe first, then history: the §17.3 bootstrap). Anyone else, with or
without a key, follows a room it may read (any public room) by polling its
events every --poll.

tail ends when the room ends or is cancelled, when the host ends the stream,
or on Ctrl-C, and says why on stderr. Exit 0 for an ended, cancelled or
interrupted room.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := af.splitRef(args[0])
			if err != nil {
				return err
			}
			c, err := af.readerClient(cmd)
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt)
			defer stop()
			// Actors are shown by their self-asserted profile name beside
			// their key's fragment (docs/profiles.md), or the fragment.
			var label func(identity.AgentID) string
			if !noNames {
				names := newAgentNames(c, id)
				label = func(a identity.AgentID) string { return names.label(ctx, a) }
			}
			print := func(r *record.Record) error {
				if raw {
					b, _ := r.MarshalJSON()
					fmt.Println(string(b))
					return nil
				}
				if line, ok := describeOpened(ctx, c, id, r, label); ok {
					fmt.Println(line)
					return nil
				}
				fmt.Println(describeNamed(r, label))
				return nil
			}
			if c.Key != nil {
				var last int64
				opt := client.FollowOptions{OnReconnect: func(n int, reason string, err error) {
					msg := fmt.Sprintf("tail: stream ended (%s); reconnecting, attempt %d", reason, n)
					if err != nil {
						msg += ": " + err.Error()
					}
					fmt.Fprintln(os.Stderr, msg)
				}}
				err = c.FollowWith(ctx, id, after, opt, func(r *record.Record) error { last = r.Seq; return print(r) })
				switch code := client.CodeOf(err); {
				case ctx.Err() != nil:
					fmt.Fprintln(os.Stderr, "tail: interrupted")
					return nil
				case code == "membership_required" || code == "permission_denied" || code == "room_ended":
					// Not an active member, or the room is over: read the events instead.
					if last > after {
						after = last
					}
				default:
					var end *client.StreamEnd
					if errors.As(err, &end) {
						return tailEnded(ctx, c, id, "the host ended the stream ("+end.Reason+")")
					}
					return err
				}
			}
			return pollRoom(ctx, c, id, after, poll, print)
		},
	}
	af.add(cmd)
	cmd.Flags().Int64Var(&after, "after", 0, "print records after this seq (all are still verified)")
	cmd.Flags().BoolVar(&raw, "json", false, "print raw records")
	cmd.Flags().BoolVar(&noNames, "no-names", false, "show agents by their IDs, without looking up their profiles")
	cmd.Flags().DurationVar(&poll, "poll", 2*time.Second, "how often non-members poll for new records")
	return cmd
}

// tailEnded explains on stderr why a followed room's stream ended, reading
// the room's status: an ended or cancelled room is a normal end.
func tailEnded(ctx context.Context, c *client.Client, id, what string) error {
	r, err := c.Room(ctx, id)
	if err == nil && (r.Status == "ended" || r.Status == "cancelled") {
		fmt.Fprintf(os.Stderr, "tail: room %s at seq %d\n", r.Status, r.Seq)
		return nil
	}
	return withCode(exitUnavailable, errors.New("tail: "+what))
}

// pollRoom follows a room by reading its events every interval, verifying
// the chain from seq 1, until the room ends or ctx is done.
func pollRoom(ctx context.Context, c *client.Client, id string, after int64, every time.Duration, fn func(*record.Record) error) error {
	chain := client.NewChain(nil)
	for {
		recs, err := c.History(ctx, id, chain.Seq())
		if ctx.Err() != nil {
			fmt.Fprintln(os.Stderr, "tail: interrupted")
			return nil
		}
		if err != nil {
			return err
		}
		for _, r := range recs {
			if err := chain.Add(r); err != nil {
				return fmt.Errorf("chain verification failed: %w", err)
			}
			if r.Seq > after {
				if err := fn(r); err != nil {
					return err
				}
			}
		}
		if len(recs) == 0 {
			room, err := c.Room(ctx, id)
			if ctx.Err() != nil {
				fmt.Fprintln(os.Stderr, "tail: interrupted")
				return nil
			}
			if err != nil {
				return err
			}
			if (room.Status == "ended" || room.Status == "cancelled") && room.Seq <= chain.Seq() {
				fmt.Fprintf(os.Stderr, "tail: room %s at seq %d\n", room.Status, room.Seq)
				return nil
			}
		}
		select {
		case <-ctx.Done():
			fmt.Fprintln(os.Stderr, "tail: interrupted")
			return nil
		case <-time.After(every):
		}
	}
}

// describeNamed renders a verified record on one line, its actor shown by
// label (nil: its ID, shortened).
func describeNamed(r *record.Record, label func(identity.AgentID) string) string {
	env, err := identity.ParseEnvelope(r.Envelope)
	if err != nil {
		return fmt.Sprintf("#%d ?", r.Seq)
	}
	ev := env.Event
	actor := string(ev.Actor)
	if label != nil {
		actor = label(ev.Actor)
	} else if len(actor) > 18 {
		actor = actor[:18] + "…"
	}
	body := string(ev.Payload)
	if ev.Type == "message.create" {
		var p struct {
			ContentType string          `json:"content_type"`
			Content     json.RawMessage `json:"content"`
		}
		_ = json.Unmarshal(ev.Payload, &p)
		var s string
		var sd seal.Sealed
		switch {
		case p.ContentType == seal.ContentType && json.Unmarshal(p.Content, &sd) == nil:
			body = fmt.Sprintf("sealed (epoch %d)", sd.Epoch)
		case json.Unmarshal(p.Content, &s) == nil:
			body = s
		}
	}
	if ev.Type == seal.TypeEpoch {
		if p, err := seal.ParseEpoch(ev.Payload); err == nil {
			body = fmt.Sprintf("epoch %d for %d members", p.Epoch, len(p.Wraps))
		}
	}
	if len(body) > 200 {
		body = body[:200] + "…"
	}
	return fmt.Sprintf("#%d %s %s %s ✓ %s", r.Seq, time.UnixMilli(r.ReceivedAt).Format("15:04:05"), ev.Type, actor, strings.ReplaceAll(body, "\n", " "))
}

func roomsCmd() *cobra.Command {
	var nodeURL, status, tag, keyword, scope, cursor string
	var limit int
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "rooms",
		Short: "List public rooms across the federation (the §18 directory), a page at a time",
		Long: `rooms lists the directory of the node: its own public and restricted rooms and
those its federation peers announce (verified hosts only), --limit at a time
(1 to 100). When more rooms match, the last line gives the command for the
next page (--cursor).`,
		Example: `  adpnode rooms --node http://127.0.0.1:8081
  adpnode rooms --node http://127.0.0.1:8081 --limit 50 --cursor CURSOR`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if limit < 1 || limit > 100 {
				return usageErrorf("--limit must be from 1 to 100")
			}
			q := url.Values{}
			for k, v := range map[string]string{"status": status, "tag": tag, "keyword": keyword, "scope": scope, "cursor": cursor} {
				if v != "" {
					q.Set(k, v)
				}
			}
			q.Set("limit", strconv.Itoa(limit))
			c := newClient(nodeURL, nil)
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
					ID, Status, Topic, Host, URL, Visibility string
					Seq                                      int64
				} `json:"result"`
				Next string `json:"next_cursor"`
			}
			if err := json.Unmarshal(raw, &out); err != nil {
				return fmt.Errorf("directory: %w", err)
			}
			w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "ROOM\tSTATUS\tVISIBILITY\tSEQ\tTOPIC\tURL")
			for _, r := range out.Result {
				fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%s\t%s\n", r.ID, r.Status, r.Visibility, r.Seq, oneLine(r.Topic, 60), r.URL)
			}
			if err := w.Flush(); err != nil {
				return err
			}
			if len(out.Result) == 0 && cursor == "" && scope != "local" {
				fmt.Fprintf(os.Stderr, "no rooms listed; if a peer's rooms are missing, adpnode peers --node %s says why\n", nodeURL)
			}
			if out.Next != "" {
				fmt.Printf("next page: adpnode rooms --node %s --limit %d --cursor %s\n", nodeURL, limit, out.Next)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&nodeURL, "node", "http://127.0.0.1:8080", "the node's origin")
	f.StringVar(&status, "status", "", "active, scheduled, ended, cancelled (comma list)")
	f.StringVar(&tag, "tag", "", "tag")
	f.StringVar(&keyword, "keyword", "", "keyword in topic/agenda/tags")
	f.StringVar(&scope, "scope", "", "federated (default) or local")
	f.IntVar(&limit, "limit", 20, "rooms per page (1 to 100)")
	f.StringVar(&cursor, "cursor", "", "the next_cursor a previous page printed")
	f.BoolVar(&asJSON, "json", false, "print raw JSON")
	return cmd
}
