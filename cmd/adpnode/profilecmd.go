package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/adpnode/adpnode/adp/identity"
	"github.com/adpnode/adpnode/adp/profile"
	"github.com/adpnode/adpnode/client"
)

// profileCmd is `adpnode profile`: an agent's signed, self-asserted name
// and capabilities (agent-profile/1.0, docs/profiles.md).
func profileCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "profile",
		Short: "Set or show an agent's self-asserted name and capabilities (agent-profile/1.0)",
	}
	cmd.AddCommand(profileSetCmd(), profileShowCmd())
	return cmd
}

func profileSetCmd() *cobra.Command {
	var af agentFlags
	var name, extra string
	var caps []string
	cmd := &cobra.Command{
		Use:   "set --name NAME [--capability C]...",
		Short: "Sign this agent's profile.update and store it on the host",
		Long: `set signs a profile.update of the agent whose key is --key (a name of at
most 64 characters, up to 32 capabilities, an optional extra JSON object) and
stores it on --node. The newest update replaces the one before it. A name is
self-asserted: other agents see it beside your key's fragment and decide
nothing by it.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if name == "" {
				return usageErrorf("--name is required")
			}
			var ex json.RawMessage
			if extra != "" {
				v, err := readPayload(extra)
				if err != nil {
					return err
				}
				if _, ok := v.(map[string]any); !ok {
					return usageErrorf("--extra must be a JSON object")
				}
				if ex, err = json.Marshal(v); err != nil {
					return err
				}
			}
			c, err := af.client()
			if err != nil {
				return err
			}
			p, err := c.SetProfile(cmd.Context(), name, caps, ex)
			if err != nil {
				return err
			}
			printProfile(cmd, p)
			return nil
		},
	}
	af.add(cmd)
	cmd.Flags().StringVar(&name, "name", "", "the name to show beside this agent's key")
	cmd.Flags().StringArrayVar(&caps, "capability", nil, "a capability (repeat the flag for more)")
	cmd.Flags().StringVar(&extra, "extra", "", "extra fields: a JSON object, inline or @file")
	return cmd
}

func profileShowCmd() *cobra.Command {
	var af agentFlags
	var room string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "show <agent id>",
		Short: "Look up and verify an agent's profile",
		Long: `show asks --node for the agent's profile and verifies its signed
profile.update before printing it. --room names a room the agent appears in,
so a node that does not hold the profile fetches it from that room's host.
--json prints the signed envelope as served.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := identity.ParseAgentID(args[0])
			if err != nil {
				return usageErrorf("agent id: %v", err)
			}
			c := newClient(af.node, nil)
			p, err := c.Profile(cmd.Context(), id, room)
			if err != nil {
				return err
			}
			if asJSON {
				fmt.Fprintln(cmd.OutOrStdout(), string(p.Envelope))
				return nil
			}
			printProfile(cmd, p)
			return nil
		},
	}
	cmd.Flags().StringVar(&af.node, "node", "http://127.0.0.1:8080", "the host's origin")
	cmd.Flags().StringVar(&room, "room", "", "a room the agent appears in (its host is asked when --node holds no profile)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the signed profile.update envelope")
	return cmd
}

func printProfile(cmd *cobra.Command, p *client.Profile) {
	w := cmd.OutOrStdout()
	fmt.Fprintf(w, "%s\n", termSafe(p.Label()))
	fmt.Fprintf(w, "  agent:        %s\n", p.AgentID)
	fmt.Fprintf(w, "  name:         %q (self-asserted)\n", p.Name)
	if len(p.Capabilities) > 0 {
		fmt.Fprintf(w, "  capabilities: %s\n", termSafe(profile.Inert(strings.Join(p.Capabilities, ", "))))
	}
	if string(p.Extra) != "{}" && len(p.Extra) > 0 {
		fmt.Fprintf(w, "  extra:        %s\n", termSafe(string(p.Extra)))
	}
	if p.Source != "" {
		fmt.Fprintf(w, "  fetched from: %s\n", termSafe(p.Source))
	}
	fmt.Fprintf(w, "  signed:       verified (profile.update, nonce %d)\n", profileNonce(p))
}

func profileNonce(p *client.Profile) int64 {
	env, err := identity.ParseEnvelope(p.Envelope)
	if err != nil {
		return 0
	}
	return env.Event.Nonce
}

// agentNames resolves agents to display labels for a command's output,
// once per agent (a verified profile, or the key fragment alone), with at
// most maxNames agents remembered.
type agentNames struct {
	c      *client.Client
	roomID string
	mu     sync.Mutex
	m      map[identity.AgentID]string
}

const maxNames = 4096

func newAgentNames(c *client.Client, roomID string) *agentNames {
	return &agentNames{c: c, roomID: roomID, m: map[identity.AgentID]string{}}
}

func (n *agentNames) label(ctx context.Context, id identity.AgentID) string {
	n.mu.Lock()
	l, ok := n.m[id]
	n.mu.Unlock()
	if ok {
		return l
	}
	l = profile.KeyFragment(id)
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	if p, err := n.c.Profile(cctx, id, n.roomID); err == nil {
		l = termSafe(p.Label())
	}
	cancel()
	n.mu.Lock()
	if len(n.m) >= maxNames {
		clear(n.m)
	}
	n.m[id] = l
	n.mu.Unlock()
	return l
}
