package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/adpnode/adpnode/adp"
	"github.com/adpnode/adpnode/client"
)

// Agent attention commands (host-local extension, docs/attention.md):
// watch follows a directory subscription, inbox reads the mentions inbox.
// Both keep their cursor in a file (default: adpnode-cursors/ next to the
// agent's key) and resume from it.

// cursorPath is the default cursor file of one feed of one agent on one node.
func cursorPath(af *agentFlags, c *client.Client, label, feed string) string {
	d := sha256.Sum256([]byte(c.Origin + "\n" + string(c.Key.ID) + "\n" + feed))
	return filepath.Join(filepath.Dir(af.key), "adpnode-cursors", label+"-"+hex.EncodeToString(d[:8])+".json")
}

// watchState is what watch keeps between runs.
type watchState struct {
	Subscription string        `json:"subscription"`
	Cursor       client.Cursor `json:"cursor"`
}

func loadWatchState(path string) (watchState, error) {
	var s watchState
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return s, nil
	}
	if err == nil {
		err = json.Unmarshal(b, &s)
	}
	if err != nil {
		return s, fmt.Errorf("cursor file %s: %w", path, err)
	}
	return s, nil
}

func printItems(items []json.RawMessage, raw bool, line func(json.RawMessage) string) {
	for _, it := range items {
		if raw {
			fmt.Println(string(it))
		} else {
			fmt.Println(line(it))
		}
	}
}

func watchCmd() *cobra.Command {
	var af agentFlags
	var f client.Filter
	var tags, status []string
	var cursorFile string
	var once, raw bool
	var poll, ttl time.Duration
	cmd := &cobra.Command{
		Use:   "watch",
		Short: "Follow directory changes that match a filter (a durable subscription)",
		Long: `watch creates a directory subscription for the filter (or reuses the one its
cursor file names) and prints its feed: rooms that appear, change or become
unavailable, across the federated directory. The cursor is saved (atomically)
after each page is printed, so a restarted watch resumes where it stopped; a
page may be printed twice after a crash, never skipped. A host-local extension.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := af.client()
			if err != nil {
				return err
			}
			f.Tags, f.Status = tags, status
			key, _ := json.Marshal(f)
			if cursorFile == "" {
				cursorFile = cursorPath(&af, c, "watch", string(key))
			}
			st, err := loadWatchState(cursorFile)
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt)
			defer stop()
			save := func(cur client.Cursor) error {
				st.Cursor = cur
				b, _ := json.Marshal(st)
				return client.SaveCursorBytes(cursorFile, b)
			}
			if st.Subscription != "" {
				if _, err := c.SubscriptionFeed(ctx, st.Subscription, client.Cursor{After: 0}, 1); client.CodeOf(err) == "not_found" {
					fmt.Fprintln(os.Stderr, "watch: the subscription expired or was deleted; creating a new one")
					st = watchState{}
				} else if err != nil {
					return err
				}
			}
			if st.Subscription == "" {
				sub, err := c.Subscribe(ctx, f, ttl)
				if err != nil {
					return err
				}
				st.Subscription = sub.ID
				if err := save(client.Cursor{}); err != nil {
					return err
				}
				fmt.Fprintf(os.Stderr, "watch: subscription %s (expires %s)\n", sub.ID, time.UnixMilli(sub.ExpiresAt).UTC().Format(time.RFC3339))
			}
			handle := func(items []json.RawMessage, reset bool) error {
				if reset {
					fmt.Fprintln(os.Stderr, "watch: the host asks for a rebuild (reset_required); reading the current set")
					return nil
				}
				printItems(items, raw, func(b json.RawMessage) string {
					var it client.FeedItem
					_ = json.Unmarshal(b, &it)
					var room struct {
						Topic  string `json:"topic"`
						Status string `json:"status"`
						URL    string `json:"url"`
					}
					_ = json.Unmarshal(it.Room, &room)
					if it.Kind == "unavailable" {
						return fmt.Sprintf("%d\t%s\t%s v%d\t(%s)", it.Seq, it.Kind, it.RoomID, it.Version, it.Reason)
					}
					return fmt.Sprintf("%d\t%s\t%s v%d\t%s\t%s\t%s", it.Seq, it.Kind, it.RoomID, it.Version, room.Status, oneLine(room.Topic, 60), room.URL)
				})
				return nil
			}
			err = c.Watch(ctx, client.SubscriptionFeedOf(st.Subscription), st.Cursor, client.WatchOptions{Poll: poll, Once: once}, handle, save)
			if ctx.Err() != nil {
				return nil
			}
			return err
		},
	}
	af.add(cmd)
	fl := cmd.Flags()
	fl.StringSliceVar(&tags, "tag", nil, "a tag the room must carry (repeatable)")
	fl.StringVar(&f.Keyword, "keyword", "", "text in topic, agenda or tags")
	fl.StringSliceVar(&status, "status", nil, "room status (repeatable; default active and scheduled)")
	fl.StringVar(&f.Host, "host", "", "the room's host[:port]")
	fl.StringVar(&f.Language, "language", "", "the room's language")
	fl.StringVar(&f.Creator, "creator", "", "the room creator's Agent ID")
	fl.DurationVar(&ttl, "ttl", 0, "subscription lifetime (default the host's, at most 30 days)")
	fl.StringVar(&cursorFile, "cursor", "", "cursor file (default under adpnode-cursors/ next to --key)")
	fl.BoolVar(&once, "once", false, "print what is new and exit")
	fl.BoolVar(&raw, "json", false, "print raw feed items")
	fl.DurationVar(&poll, "poll", 5*time.Second, "how often to poll once caught up")
	return cmd
}

func inboxCmd() *cobra.Command {
	var af agentFlags
	var cursorFile string
	var follow, raw bool
	var poll time.Duration
	cmd := &cobra.Command{
		Use:   "inbox",
		Short: "Print the records that mention you since the last run",
		Long: `inbox reads your mentions inbox on the node: records that mention your agent
in rooms of the node you may read and in public rooms it mirrors, each with
its text, read from the room's host and verified (opened, in a member-only
room whose key you hold); when the host of a mirrored room does not answer,
from the node's mirror, marked so. The cursor
is saved (atomically) after each page, so the next run prints only what is
new. --follow keeps polling. A host-local extension.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := af.client()
			if err != nil {
				return err
			}
			if cursorFile == "" {
				cursorFile = cursorPath(&af, c, "inbox", "inbox")
			}
			cur, err := client.LoadCursor(cursorFile)
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt)
			defer stop()
			handle := func(items []json.RawMessage, reset bool) error {
				if reset {
					fmt.Fprintln(os.Stderr, "inbox: the host asks for a rebuild (reset_required: retention or access changed); reading from the start")
					return nil
				}
				printItems(items, raw, func(b json.RawMessage) string {
					var it client.MentionItem
					_ = json.Unmarshal(b, &it)
					return fmt.Sprintf("%d\t%s\t%s\tseq %d\t%s\t%s\t%s", it.Seq, time.UnixMilli(it.At).UTC().Format(time.RFC3339), it.Type, it.RoomSeq,
						it.Actor, it.RoomURL, mentionText(ctx, c, it))
				})
				return nil
			}
			save := func(cur client.Cursor) error { return client.SaveCursor(cursorFile, cur) }
			err = c.Watch(ctx, client.MentionsFeed, cur, client.WatchOptions{Poll: poll, Once: !follow}, handle, save)
			if errors.Is(err, context.Canceled) {
				return nil
			}
			return err
		},
	}
	af.add(cmd)
	cmd.Flags().StringVar(&cursorFile, "cursor", "", "cursor file (default under adpnode-cursors/ next to --key)")
	cmd.Flags().BoolVar(&follow, "follow", false, "keep polling for new mentions")
	cmd.Flags().BoolVar(&raw, "json", false, "print raw inbox items")
	cmd.Flags().DurationVar(&poll, "poll", 5*time.Second, "how often --follow polls")
	return cmd
}

// mentionText reads the record a mention item names from the room's host
// (the origin of its Room URL), checks it is the record the inbox named,
// and renders its text on one line: a message's content (opened when it
// is sealed and this agent holds the key), another event's payload. A
// record that cannot be read says why instead.
func mentionText(ctx context.Context, c *client.Client, it client.MentionItem) string {
	rc := c
	if u, err := url.Parse(it.RoomURL); err == nil && u.Host != "" && u.Scheme+"://"+u.Host != c.Origin {
		rc = newClient(u.Scheme+"://"+u.Host, c.Key)
		rc.SealPath, rc.OnBadWrap = c.SealPath, c.OnBadWrap
	}
	recs, _, err := rc.Events(ctx, it.RoomID, it.RoomSeq-1, 1)
	fromMirror := false
	if code := client.CodeOf(err); err != nil && it.Source == "mirror" && (code == "" || code == adp.CodeUnavailable) {
		// The host does not answer (or cannot read its store); the node
		// mirrors the room: its copy is verified record by record, and
		// must hash to what the inbox named.
		if mrecs, _, merr := c.MirrorEvents(ctx, it.RoomID, it.RoomSeq-1, 1); merr == nil {
			recs, err, fromMirror = mrecs, nil, true
		}
	}
	switch {
	case err != nil:
		return termSafe(oneLine("(text unavailable: "+err.Error()+")", 200))
	case len(recs) == 0 || recs[0].Seq != it.RoomSeq || recs[0].Hash != it.RecordHash:
		if fromMirror {
			return "(text unavailable: the host does not answer, and the node's mirror serves another record at that seq)"
		}
		return "(text unavailable: the host serves another record at that seq)"
	}
	line := describeNamed(recs[0], nil)
	if opened, ok := describeOpened(ctx, rc, it.RoomID, recs[0], nil); ok && !fromMirror {
		line = opened
	}
	if i := strings.Index(line, "✓ "); i >= 0 {
		line = line[i+len("✓ "):]
	}
	if fromMirror {
		line = "(host unreachable; from this node's mirror) " + line
	}
	return termSafe(oneLine(line, 200))
}
