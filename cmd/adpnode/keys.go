package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/adpnode/adpnode/client"
)

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
			k, err := client.GenerateKey()
			if err != nil {
				return err
			}
			if err := k.Save(out); err != nil {
				return err
			}
			fmt.Println(k.ID)
			return nil
		},
	}
	cmd.Flags().StringVar(&out, "out", "agent.key", "where to write the key file (mode 0600)")
	cmd.Flags().BoolVar(&force, "force", false, "overwrite an existing key file")
	return cmd
}
