package main

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/adpnode/adpnode/adp/identity"
	"github.com/adpnode/adpnode/adp/record"
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

	cmd.AddCommand(key, rotate)
	return cmd
}

// postSealed posts a message.create payload (as built by post) sealed.
func postSealed(ctx context.Context, c *client.Client, roomID string, mentions []identity.AgentID, p any) (*record.Record, error) {
	m, ok := p.(map[string]any)
	if !ok {
		return nil, usageErrorf("message.create payload must be a JSON object")
	}
	ct, _ := m["content_type"].(string)
	if ct == "" {
		return nil, usageErrorf("message.create payload needs content_type")
	}
	var refs []string
	if rs, ok := m["references"].([]any); ok {
		for _, r := range rs {
			if s, ok := r.(string); ok {
				refs = append(refs, s)
			}
		}
	}
	return c.SendSealedMentions(ctx, roomID, mentions, ct, m["content"], refs...)
}

// describeOpened renders a message.create of a member-only room: opened
// when this agent holds the epoch key, "sealed (epoch N)" otherwise.
func describeOpened(ctx context.Context, c *client.Client, roomID string, r *record.Record) (string, bool) {
	if c.Key == nil {
		return "", false
	}
	o, ok, err := c.Open(ctx, roomID, r)
	if err != nil || !ok || !o.Sealed {
		return "", false
	}
	line := describe(r)
	if o.Err != nil {
		return line, true // describe already says sealed (epoch N)
	}
	body := string(o.Content)
	var s string
	if json.Unmarshal(o.Content, &s) == nil {
		body = s
	}
	return fmt.Sprintf("%s [opened] %s", line, oneLine(body, 200)), true
}
