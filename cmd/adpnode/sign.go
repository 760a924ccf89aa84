package main

import (
	"fmt"

	"net/url"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/adpnode/adpnode/adp/identity"
	"github.com/adpnode/adpnode/client"
)

func signCmd() *cobra.Command {
	var keyPath, typ, payload, roomURL, mentions string
	var baseSeq int64
	var baseHash string
	cmd := &cobra.Command{
		Use:   "sign",
		Short: "Build and sign an ADP event envelope and print it (pipe it to curl)",
		Long: `sign builds an event, signs it with the agent key and prints the envelope.
For room events give --room (the Room URL): sign reads the room's current
head from it and uses it as base_seq/base_hash, unless --base-seq and
--base-hash are given.`,
		Example: `  adpnode sign --key alice.key --type room.create --payload @create.json
  adpnode sign --key alice.key --room http://127.0.0.1:8080/v1/rooms/ID \
      --type message.create --payload '{"content_type":"text/plain","content":"hello"}'`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			k, err := loadAgentKey(keyPath)
			if err != nil {
				return err
			}
			pv, err := readPayload(payload)
			if err != nil {
				return err
			}
			c := client.New("", k)
			var roomID string
			var head client.Head
			if typ != "room.create" {
				if roomURL == "" {
					return fmt.Errorf("--room (the Room URL) is required for %s", typ)
				}
				u, err := url.Parse(roomURL)
				if err != nil {
					return err
				}
				roomID = u.Path[strings.LastIndex(u.Path, "/")+1:]
				head = client.Head{Seq: baseSeq, Hash: baseHash}
				if !cmd.Flags().Changed("base-seq") {
					rc := newClient(u.Scheme+"://"+u.Host, k)
					r, err := rc.Room(cmd.Context(), roomID)
					if err != nil {
						return err
					}
					head = r.Head
				}
			}
			ev, err := c.Event(typ, roomID, head, pv, parseMentions(mentions)...)
			if err != nil {
				return err
			}
			env, err := c.Sign(ev)
			if err != nil {
				return err
			}
			fmt.Println(string(env))
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&keyPath, "key", "agent.key", "agent key file")
	f.StringVar(&typ, "type", "message.create", "event type")
	f.StringVar(&payload, "payload", "{}", "payload JSON, or @file")
	f.StringVar(&roomURL, "room", "", "Room URL (for every event but room.create)")
	f.Int64Var(&baseSeq, "base-seq", 0, "base_seq (default: the room's current head)")
	f.StringVar(&baseHash, "base-hash", "", "base_hash (with --base-seq)")
	f.StringVar(&mentions, "mentions", "", "comma-separated Agent IDs to mention")
	return cmd
}

func tokenCmd() *cobra.Command {
	var keyPath, nodeURL, aud string
	var ttl time.Duration
	cmd := &cobra.Command{
		Use:     "token",
		Short:   "Print a request JWT for a host (Authorization: Bearer ...)",
		Long:    "token prints a request JWT whose audience is the node's origin (--node), valid for --ttl.",
		Example: "  curl -H \"Authorization: Bearer $(adpnode token --key alice.key --node http://127.0.0.1:8080)\" ...",
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cmd.Flags().Changed("aud") {
				if cmd.Flags().Changed("node") && strings.TrimSuffix(aud, "/") != strings.TrimSuffix(nodeURL, "/") {
					return usageErrorf("--aud is a deprecated alias of --node; give one of them")
				}
				nodeURL = aud
			}
			u, err := url.Parse(nodeURL)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") {
				return usageErrorf("--node must be the node's origin, like http://127.0.0.1:8080 (got %q)", nodeURL)
			}
			if ttl <= 0 || ttl > 300*time.Second {
				return usageErrorf("--ttl must be in (0, 300s]")
			}
			k, err := loadAgentKey(keyPath)
			if err != nil {
				return err
			}
			now := time.Now().Unix()
			tok, err := identity.SignJWT(k.Private(), u.Scheme+"://"+u.Host, now, now+int64(ttl.Seconds()))
			if err != nil {
				return err
			}
			fmt.Println(tok)
			return nil
		},
	}
	cmd.Flags().StringVar(&keyPath, "key", "agent.key", "agent key file")
	cmd.Flags().StringVar(&nodeURL, "node", "http://127.0.0.1:8080", "the host's origin (the JWT audience)")
	cmd.Flags().StringVar(&aud, "aud", "", "deprecated alias of --node")
	_ = cmd.Flags().MarkDeprecated("aud", "use --node")
	cmd.Flags().DurationVar(&ttl, "ttl", 120*time.Second, "token lifetime (at most 300s)")
	return cmd
}
