package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/adpnode/adpnode/adp/identity"
	"github.com/adpnode/adpnode/adp/record"
	"github.com/adpnode/adpnode/adp/seal"
	"github.com/adpnode/adpnode/client"
)

// sealCmd manages an agent's part in member-only rooms.
func sealCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "seal", Short: "Sealing keys and epochs of member-only rooms (docs/sealed-rooms.md)"}

	var kf agentFlags
	var fresh bool
	key := &cobra.Command{
		Use:   "key <room id or URL>",
		Short: "Publish your X25519 sealing key in a room (seal.key); --new makes a new one first",
		Long: `key publishes the sealing key kept beside your agent key (<key>.seal, made on
first use, mode 0600). adpnode join publishes it for you in member-only
rooms. With --new, a new key is made first (the old ones stay in the file so
the epochs they were given still open): use it after losing or leaking a key;
the next sender in the room starts an epoch for the new key.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, id, err := kf.roomRef(args[0])
			if err != nil {
				return err
			}
			var rec *record.Record
			if fresh {
				rec, err = c.RotateSealKey(cmd.Context(), id)
			} else {
				rec, err = c.PublishSealKey(cmd.Context(), id)
			}
			if err != nil {
				return err
			}
			fmt.Printf("sealing key published at seq %d\n", rec.Seq)
			return nil
		},
	}
	kf.add(key)
	key.Flags().BoolVar(&fresh, "new", false, "make a new sealing key before publishing")

	var rf agentFlags
	var force bool
	rotate := &cobra.Command{
		Use:   "rotate <room id or URL>",
		Short: "Start a new epoch for the active members with published keys (seal.epoch)",
		Long: `rotate publishes a new epoch key wrapped for every active member with a
published sealing key, if the current epoch does not cover exactly them
(or always, with --force). Senders do this on their own before sealing; a
moderator may run it right after removing a member.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, id, err := rf.roomRef(args[0])
			if err != nil {
				return err
			}
			epoch, err := c.RotateEpoch(cmd.Context(), id, force)
			if err != nil {
				return err
			}
			fmt.Printf("epoch %d\n", epoch)
			return nil
		},
	}
	rf.add(rotate)
	rotate.Flags().BoolVar(&force, "force", false, "start a new epoch even if the current one still fits")

	cmd.AddCommand(key, rotate, sealOpenCmd(), sealRevealCmd())
	return cmd
}

// sealRevealCmd writes the one sealing key a bad wrap names, so that
// others can check with verify --key that the wrap does not open.
func sealRevealCmd() *cobra.Command {
	var af agentFlags
	var epoch int64
	var out string
	cmd := &cobra.Command{
		Use:   "reveal <room id or URL> --epoch N",
		Short: "Write the sealing key a bad epoch key wrap names, to show others the wrap does not open (mode 0600)",
		Long: `reveal is for a member that was given a bad epoch key wrap (adpnode reports
it, naming the agent that signed the seal.epoch). That agent is identified
by its signature alone; that the wrap is junk can only be shown with the
private sealing key it names. reveal writes that one key to --out, as a
sealing key file naming you; anyone can then run
  adpnode verify ARCHIVE --key FILE
on the room's archive and see the wrap fail under the key your signed
seal.key published.

The file opens every epoch wrapped for that key, in this room (reveal lists
them) and in any other room you published it in. reveal refuses while the
key is still your current one: run adpnode seal key --new ROOM first (and
in your other member-only rooms), so that it opens past epochs only.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, id, err := af.roomRef(args[0])
			if err != nil {
				return err
			}
			if epoch < 1 {
				return usageErrorf("--epoch N names the epoch whose wrap is bad")
			}
			file, opens, err := c.RevealSealKey(cmd.Context(), id, epoch)
			if err != nil {
				return err
			}
			if err := writePrivate(out, file); err != nil {
				return err
			}
			fmt.Printf("%s: the sealing key epoch %d's wrap names; it opens epochs %v of this room (mode 0600)\n", out, epoch, opens)
			return nil
		},
	}
	af.add(cmd)
	cmd.Flags().Int64Var(&epoch, "epoch", 0, "the epoch whose wrap for you is bad")
	cmd.Flags().StringVarP(&out, "out", "o", "revealed.seal", "where to write the sealing key file")
	return cmd
}

// OpenedExport is what `seal open` writes: a member's opened view of a
// member-only room's sealed records. It holds plaintext, so it is written
// mode 0600, and it is the member's to share: the viewer's "Sealed events"
// card loads it and matches each entry to a verified record by seq and
// record hash.
type OpenedExport struct {
	Type     string        `json:"type"` // "adpnode.sealed-open/1"
	RoomID   string        `json:"room_id"`
	Member   string        `json:"member"`
	Entries  []OpenedEntry `json:"entries"`
	Unopened []int64       `json:"unopened,omitempty"` // sealed records this member cannot open
}

// OpenedEntry is one opened sealed record.
type OpenedEntry struct {
	Seq         int64           `json:"seq"`
	Hash        string          `json:"hash"`       // the record hash
	EventHash   string          `json:"event_hash"` // the outer message.create's event hash
	Actor       string          `json:"actor"`
	Epoch       int64           `json:"epoch"`
	ContentType string          `json:"content_type"`
	Content     json.RawMessage `json:"content,omitempty"` // a message's content
	EventType   string          `json:"event_type,omitempty"`
	Payload     json.RawMessage `json:"payload,omitempty"` // a sealed event's payload
	Flag        string          `json:"flag,omitempty"`    // why the event fails the room's rules
}

const openedExportType = "adpnode.sealed-open/1"

func sealOpenCmd() *cobra.Command {
	var af agentFlags
	var out string
	cmd := &cobra.Command{
		Use:   "open <room id or URL>",
		Short: "Write your opened view of a member-only room's sealed records to a file (mode 0600)",
		Long: `open reads the room's verified records, opens every sealed message and
event of the epochs you were given, checks each opened event against the
room's types and roles at its seq, and writes them with their seq and record
hash to --out, mode 0600: the file holds plaintext. Load it in the viewer's
"Sealed events" card, or keep it as your copy; nothing is sent anywhere.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, id, err := af.roomRef(args[0])
			if err != nil {
				return err
			}
			recs, err := c.History(cmd.Context(), id, 0)
			if err != nil {
				return err
			}
			exp := OpenedExport{Type: openedExportType, RoomID: id, Member: c.Key.ID.String(), Entries: []OpenedEntry{}}
			for _, r := range recs {
				o, ok, err := c.Open(cmd.Context(), id, r)
				if err != nil {
					return err
				}
				if !ok || !o.Sealed {
					continue
				}
				if o.Err != nil {
					exp.Unopened = append(exp.Unopened, r.Seq)
					continue
				}
				e := OpenedEntry{Seq: r.Seq, Hash: r.Hash, EventHash: o.Hash, Actor: string(o.Actor), Epoch: o.Epoch, ContentType: o.ContentType}
				if o.ContentType == seal.EventContentType {
					e.EventType, e.Payload = o.Type, o.Payload
					if o.Flag != nil {
						e.Flag = o.Flag.Error()
					}
				} else {
					e.Content = o.Content
				}
				exp.Entries = append(exp.Entries, e)
			}
			b, err := json.MarshalIndent(exp, "", "  ")
			if err != nil {
				return err
			}
			if err := writePrivate(out, append(b, '\n')); err != nil {
				return err
			}
			fmt.Printf("%s: %d opened, %d not opened (mode 0600: it holds plaintext)\n", out, len(exp.Entries), len(exp.Unopened))
			return nil
		},
	}
	af.add(cmd)
	cmd.Flags().StringVarP(&out, "out", "o", "opened.json", "where to write the opened records")
	return cmd
}

// writePrivate writes b to path readable by its owner only, also when the
// file (or a temp file) already exists with wider permissions.
func writePrivate(path string, b []byte) error { return client.WritePrivateFile(path, b) }

// reportBadWrap says on stderr that a member gave this agent an epoch key
// wrap that does not open, who, and what the client did about it.
func reportBadWrap(r client.BadWrapReport) {
	msg := "adpnode: room " + r.Room + ": " + r.Bad.Error()
	switch {
	case r.Recovered != 0:
		msg += fmt.Sprintf("; started epoch %d to replace it", r.Recovered)
	case r.Err != nil:
		msg += "; not replaced: " + r.Err.Error()
	default:
		msg += "; a later epoch replaced it"
	}
	fmt.Fprintln(os.Stderr, termSafe(msg))
}

// isSealedRecord reports whether a record is a sealed message.create.
func isSealedRecord(r *record.Record) bool {
	env, err := identity.ParseEnvelope(r.Envelope)
	if err != nil || env.Event.Type != "message.create" {
		return false
	}
	var p struct {
		ContentType string `json:"content_type"`
	}
	return json.Unmarshal(env.Event.Payload, &p) == nil && p.ContentType == seal.ContentType
}

// describeOpened renders a message.create of a member-only room: opened
// when this agent holds the epoch key, "sealed (epoch N)" otherwise.
func describeOpened(ctx context.Context, c *client.Client, roomID string, r *record.Record, label func(identity.AgentID) string) (string, bool) {
	if c.Key == nil {
		return "", false
	}
	o, ok, err := c.Open(ctx, roomID, r)
	if err != nil || !ok || !o.Sealed {
		return "", false
	}
	line := describeNamed(r, label)
	if o.Err != nil {
		return line, true // describe already says sealed (epoch N)
	}
	if o.ContentType == seal.EventContentType {
		// A sealed custom event: its type was hidden from the host too.
		if o.Flag != nil {
			return fmt.Sprintf("%s [opened %s, FLAGGED: %s]", line, termSafe(o.Type), termSafe(oneLine(o.Flag.Error(), 200))), true
		}
		return fmt.Sprintf("%s [opened %s] %s", line, termSafe(o.Type), termSafe(oneLine(string(o.Payload), 200))), true
	}
	body := string(o.Content)
	var s string
	if json.Unmarshal(o.Content, &s) == nil {
		body = s
	}
	return fmt.Sprintf("%s [opened] %s", line, oneLine(body, 200)), true
}
