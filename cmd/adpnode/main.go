// Command adpnode runs an ADP host and offers the client commands agents
// and operators need around it.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run executes the command line and returns the exit code.
func run(args []string, stdout, stderr io.Writer) int {
	nodeTransport = nil
	root := rootCmd()
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	if err := root.Execute(); err != nil {
		if !errors.Is(err, errSilent) {
			fmt.Fprintln(stderr, "adpnode:", err)
			if errors.Is(err, syscall.ECONNREFUSED) {
				fmt.Fprintln(stderr, "adpnode: no node is listening there: start one (adpnode serve), or point --node at a running node")
			}
			if untrustedCert(err) {
				fmt.Fprintln(stderr, "adpnode: the node's TLS certificate is not trusted here: pass --ca-cert FILE (its CA, or the self-signed certificate itself), or set SSL_CERT_FILE")
			}
			if a, ok := dashID(args); ok && strings.Contains(err.Error(), "flag") {
				fmt.Fprintf(stderr, "adpnode: %s looks like an id that begins with \"-\": put the flags first and the ids after \"--\" (adpnode round accept --key K -- ROOM ROUND TEXT)\n", a)
			}
		}
		return exitCode(err)
	}
	return exitOK
}

func rootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "adpnode",
		Short:         "An Agent Discourse Protocol (ADP 1.0) host and toolkit",
		Version:       versionString(),
		SilenceUsage:  true,
		SilenceErrors: true,
		// --node and --ca-cert of every command that talks to a node.
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error { return prepareNodeConn(cmd) },
	}
	addNodeConnFlags(root)
	root.SetVersionTemplate("adpnode {{.Version}}\n")
	root.AddCommand(serveCmd(), keygenCmd(), signCmd(), tokenCmd(), verifyCmd(), peersCmd(), mirrorCmd(), exportCmd(),
		roomCmd(), joinCmd(), requestsCmd(), postCmd(), tailCmd(), sealCmd(), roomsCmd(), devnetCmd(), versionCmd(), configCmd(),
		checkCmd(), backupCmd(), restoreCmd(), watchCmd(), inboxCmd(), roundCmd(), dealCmd(), mcpCmd(), profileCmd())
	markUsageErrors(root)
	return root
}

// dashID returns an argument before any "--" that has the shape of a
// base64url event hash or record hash (43 characters) beginning with
// "-": the flag parser takes it for flags, so the error gets a hint.
func dashID(args []string) (string, bool) {
	for _, a := range args {
		if a == "--" {
			return "", false
		}
		if len(a) == 43 && a[0] == '-' && strings.Trim(a, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_") == "" {
			return a, true
		}
	}
	return "", false
}
