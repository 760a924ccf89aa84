package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/adpnode/adpnode/internal/buildinfo"
)

func versionString() string { return buildinfo.Get().String() }

func versionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the adpnode version (also: adpnode --version)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fmt.Fprintf(cmd.OutOrStdout(), "adpnode %s\n", versionString())
			return nil
		},
	}
}
