// Command adpnode runs an ADP host and offers the client commands agents
// and operators need around it.
package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"
)

func main() {
	root := &cobra.Command{
		Use:           "adpnode",
		Short:         "An Agent Discourse Protocol (ADP 1.0) host and toolkit",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(serveCmd(), keygenCmd(), signCmd(), tokenCmd(), verifyCmd(), peersCmd(), mirrorCmd(), exportCmd(),
		roomCmd(), joinCmd(), postCmd(), tailCmd(), roomsCmd(), devnetCmd(), checkCmd(), backupCmd(), restoreCmd())
	if err := root.Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "adpnode:", err)
		var ee *exitError
		if errors.As(err, &ee) {
			os.Exit(ee.code)
		}
		os.Exit(1)
	}
}
