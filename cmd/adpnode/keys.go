package main

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/adpnode/adpnode/adp/identity"
)

// keyFile is an agent key on disk. The seed never leaves the agent's
// machine (ADP §22); last_nonce keeps clock-derived nonces monotonic.
type keyFile struct {
	AgentID   identity.AgentID `json:"agent_id"`
	Seed      string           `json:"seed"` // base64url, 32 bytes
	LastNonce int64            `json:"last_nonce"`
	path      string
	priv      ed25519.PrivateKey
}

func loadKey(path string) (*keyFile, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var k keyFile
	if err := json.Unmarshal(b, &k); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	seed, err := identity.DecodeB64Len(k.Seed, 32)
	if err != nil {
		return nil, fmt.Errorf("%s: bad seed", path)
	}
	if k.priv, err = identity.KeyFromSeed(seed); err != nil {
		return nil, err
	}
	if identity.AgentIDFromKey(k.priv.Public().(ed25519.PublicKey)) != k.AgentID {
		return nil, fmt.Errorf("%s: agent_id does not match the seed", path)
	}
	k.path = path
	return &k, nil
}

func (k *keyFile) save() error {
	b, _ := json.MarshalIndent(k, "", "  ")
	tmp := k.path + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, k.path)
}

// nextNonce returns max(last+1, now) and records it (Identity §8).
func (k *keyFile) nextNonce() (int64, error) {
	n := identity.NextNonce(k.LastNonce, time.Now().UnixMilli())
	k.LastNonce = n
	return n, k.save()
}

func keygenCmd() *cobra.Command {
	var out string
	var force bool
	cmd := &cobra.Command{
		Use:     "keygen",
		Short:   "Generate an agent key (Ed25519) and print its Agent ID",
		Example: "  adpnode keygen --out alice.key",
		RunE: func(cmd *cobra.Command, _ []string) error {
			if _, err := os.Stat(out); err == nil && !force {
				return fmt.Errorf("%s exists (use --force to overwrite)", out)
			}
			priv, err := identity.GenerateKey(rand.Reader)
			if err != nil {
				return err
			}
			k := &keyFile{AgentID: identity.AgentIDFromKey(priv.Public().(ed25519.PublicKey)),
				Seed: identity.EncodeB64(priv.Seed()), path: out}
			if err := k.save(); err != nil {
				return err
			}
			fmt.Println(k.AgentID)
			return nil
		},
	}
	cmd.Flags().StringVar(&out, "out", "agent.key", "where to write the key file (mode 0600)")
	cmd.Flags().BoolVar(&force, "force", false, "overwrite an existing key file")
	return cmd
}
