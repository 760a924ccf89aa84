package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/adpnode/adpnode/adp/archive"
)

func verifyCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "verify <archive file>",
		Short: "Verify an archive offline (JSON or JSONL), kernel only",
		Long: `verify runs the five ADP §19 steps on an archive file with nothing but the
protocol kernel: every envelope hash and signature, a full replay of the room
with the type definitions in force at each seq, the pre_hash chain, last_hash
and events_sha3_256. It prints OK with counts, or the first failing seq and why.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			b, err := os.ReadFile(args[0])
			if err != nil {
				return err
			}
			var rep *archive.Report
			if t := bytes.TrimSpace(b); len(t) > 0 && bytes.Contains(t[:bytes.IndexByte(append(t, '\n'), '\n')], []byte(`"manifest"`)) {
				a, perr := archive.ParseJSON(b)
				if perr != nil {
					return fmt.Errorf("%s: %w", args[0], perr)
				}
				rep, err = archive.Verify(a, archive.Options{})
			} else {
				m, packs, recs, perr := archive.ParseJSONL(b)
				if perr != nil {
					return fmt.Errorf("%s: %w", args[0], perr)
				}
				rep, err = archive.VerifyRecords(m, packs, recs, archive.Options{})
			}
			var f *archive.Failure
			if errors.As(err, &f) {
				fmt.Printf("FAIL %s\n", f.Error())
				os.Exit(2)
			}
			if err != nil {
				return err
			}
			fmt.Printf("OK room %s: %d records, last seq %d, last hash %s, %d members, %d types, status %s\n",
				rep.RoomID, rep.Records, rep.LastSeq, rep.LastHash, rep.Members, rep.Types, rep.Status)
			return nil
		},
	}
}
