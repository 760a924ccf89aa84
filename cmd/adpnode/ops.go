package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/adpnode/adpnode/cmd/adpnode/internal/settings"
	"github.com/adpnode/adpnode/internal/optoken"
	"github.com/adpnode/adpnode/node"
)

func checkCmd() *cobra.Command {
	var data string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "check",
		Short: "Verify a stopped node's storage: every hosted and mirrored room's chain, every stored value",
		Long: `check opens the data dir read-only (the node must not be running) and replays
every hosted room's chain and every mirrored room's chain as recovery does
(strict parse, hashes, signatures, chain links, room state machine). It
prints one line per room: ok, or broken at seq N with the reason, and any
storage-level fault with its file. Exit code: 0 all ok, 1 something is
broken, 2 usage error or a dir that cannot be checked (locked, not a data dir).`,
		Example: `  adpnode check --data ./data
  adpnode check --data ./data --json`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) > 0 {
				return &exitError{2, fmt.Errorf("check takes no arguments (use --data DIR)")}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			rep, err := node.Check(data)
			if err != nil {
				return &exitError{2, err}
			}
			if asJSON {
				enc := json.NewEncoder(os.Stdout)
				enc.SetIndent("", "  ")
				_ = enc.Encode(map[string]any{"ok": rep.OK(), "report": rep})
			} else {
				printCheck(rep)
			}
			if !rep.OK() {
				return &exitError{1, errors.New("storage check found problems (see above); restore from a backup or remove the broken rooms")}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&data, "data", "./data", "data directory (Badger)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the report as JSON")
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &exitError{2, err} })
	return cmd
}

func printCheck(rep *node.CheckReport) {
	w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "KIND\tROOM\tHOST\tSEQ\tSTATE")
	line := func(kind string, r node.RoomCheck) {
		state := "ok"
		if !r.OK {
			state = fmt.Sprintf("broken at seq %d: %s", r.BrokenAt, r.Reason)
		}
		host := r.Host
		if host == "" {
			host = "-"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%s\n", kind, r.Room, host, r.Seq, state)
	}
	for _, r := range rep.Rooms {
		line("hosted", r)
	}
	for _, r := range rep.Mirrors {
		line("mirror", r)
	}
	w.Flush()
	for _, f := range rep.Storage {
		file := f.File
		if file == "" {
			file = "(file unknown)"
		}
		fmt.Printf("storage fault in %s: %s\n", file, f.Error)
	}
	if rep.Note != "" {
		fmt.Println("note:", rep.Note)
	}
	fmt.Printf("%d hosted rooms, %d mirrored rooms, %d storage faults\n", len(rep.Rooms), len(rep.Mirrors), len(rep.Storage))
}

func backupCmd() *cobra.Command {
	var data, out, nodeURL string
	cmd := &cobra.Command{
		Use:   "backup",
		Short: "Write a consistent backup of a data dir (asks the running node when there is one)",
		Long: `backup writes a consistent snapshot of the node's database to a file. When no
node is running on the data dir it is read directly; when a node holds the
dir, the running node streams the backup (GET /v1/admin/backup, an operator
endpoint: the request carries the operator token from DIR/operator.token)
while it keeps serving. That node is found at the URL it records in
DIR/serve.url while it serves; --node names it instead.`,
		Example: `  adpnode backup --data ./data -o adpnode.backup
  adpnode backup --data ./data --node http://127.0.0.1:8080 -o adpnode.backup`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if out == "" {
				return &exitError{2, errors.New("-o FILE is required")}
			}
			tmp, err := os.CreateTemp(filepath.Dir(out), ".adpnode-backup-*")
			if err != nil {
				return err
			}
			defer os.Remove(tmp.Name())
			via := "data dir"
			err = node.BackupDir(data, tmp)
			if errors.Is(err, node.ErrLocked) {
				if !cmd.Flags().Changed("node") {
					if nodeURL, err = servingURL(data); err != nil {
						return err
					}
				}
				via = "running node " + nodeURL
				if _, serr := tmp.Seek(0, io.SeekStart); serr != nil {
					return serr
				}
				if serr := tmp.Truncate(0); serr != nil {
					return serr
				}
				err = onlineBackup(nodeURL, data, tmp)
			}
			if err == nil {
				err = tmp.Sync()
			}
			if cerr := tmp.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
			if err := os.Rename(tmp.Name(), out); err != nil {
				return err
			}
			fi, _ := os.Stat(out)
			fmt.Fprintf(os.Stderr, "wrote %s (%d bytes, from the %s)\n", out, fi.Size(), via)
			return nil
		},
	}
	cmd.Flags().StringVar(&data, "data", "./data", "data directory (Badger)")
	cmd.Flags().StringVarP(&out, "output", "o", "", "backup file to write")
	cmd.Flags().StringVar(&nodeURL, "node", "", "the running node's HTTP origin, when the dir is locked (default: the URL in DIR/serve.url)")
	return cmd
}

// servingURL reads the URL the node serving the data dir recorded there
// (serve.url).
func servingURL(data string) (string, error) {
	path := filepath.Join(data, serveURLFile)
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("the data dir %s is locked by a running node, and it names no URL (%w): pass that node's --node URL", data, err)
	}
	u := strings.TrimSpace(string(b))
	if err := checkNodeOrigin(u); err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	return u, nil
}

// nodeOfData is the URL of the node serving data when the command was not
// given --node and the dir names one (serve.url); otherwise nodeURL.
func nodeOfData(cmd *cobra.Command, nodeURL, data string) string {
	if cmd.Flags().Changed("node") || !cmd.Flags().Changed("data") {
		return nodeURL
	}
	if u, err := servingURL(data); err == nil {
		return u
	}
	return nodeURL
}

func onlineBackup(nodeURL, data string, w io.Writer) error {
	tok, err := optoken.Read(filepath.Join(data, optoken.FileName))
	if err != nil {
		return fmt.Errorf("the data dir is locked by a running node, and its operator token is unreadable: %w", err)
	}
	req, err := http.NewRequest(http.MethodGet, strings.TrimSuffix(nodeURL, "/")+"/v1/admin/backup", nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := nodeHTTP().Do(req)
	if err != nil {
		return fmt.Errorf("the data dir is locked by a running node, and asking it failed: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		return fmt.Errorf("GET /v1/admin/backup: %s: %s", resp.Status, strings.TrimSpace(string(b)))
	}
	_, err = io.Copy(w, resp.Body)
	return err
}

func restoreCmd() *cobra.Command {
	var data, in string
	cmd := &cobra.Command{
		Use:   "restore",
		Short: "Load a backup file into a new (empty) data dir",
		Long: `restore verifies a backup file (format, size of every frame, SHA-256 trailer)
and loads it into the data dir, which must not exist or be empty. Start the
node on the dir afterwards: recovery replays every room's chain. The host log
is rebuilt to the backup's tree and publishes nothing beyond it until every
witness of the log has cosigned that tree (a witness that saw more of the log
would call anything else a fork; docs/operations.md, "Backup and restore").`,
		Example: `  adpnode restore --data ./data-restored -i adpnode.backup`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if in == "" {
				return &exitError{2, errors.New("-i FILE is required")}
			}
			f, err := os.Open(in)
			if err != nil {
				return err
			}
			defer f.Close()
			if err := node.RestoreDir(data, f); err != nil {
				return err
			}
			fmt.Fprintf(os.Stderr, "restored %s into %s; the host log waits for its witnesses to confirm the backup's tree before it grows\n", in, data)
			return nil
		},
	}
	cmd.Flags().StringVar(&data, "data", "./data", "data directory to create (must be empty)")
	cmd.Flags().StringVarP(&in, "input", "i", "", "backup file to read")
	return cmd
}

// parseSize reads a byte count: a plain number of bytes, or a number with
// a unit (KiB, MiB, GiB, KB, MB, GB; case-insensitive). "0" disables.
func parseSize(s string) (int64, error) { return settings.ParseSize(s) }
