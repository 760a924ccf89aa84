package main

import (
	"bytes"
	"os"

	"github.com/spf13/cobra"

	"github.com/adpnode/adpnode/client"
	"github.com/adpnode/adpnode/cmd/adpnode/internal/verifycmd"
)

func verifyCmd() *cobra.Command {
	var key, archivePath string
	cmd := &cobra.Command{
		Use:   "verify <archive, evidence or deal receipt file>",
		Short: "Verify an archive (JSON or JSONL) or a piece of misbehaviour evidence offline, kernel only",
		Long: `verify runs the five ADP §19 steps on an archive file with nothing but the
protocol kernel: every envelope hash and signature, a full replay of the room
with the type definitions in force at each seq, the pre_hash chain, last_hash
and events_sha3_256, and extra.host_log: the host log's inclusion proof of the
last record, its checkpoint signed by the host key and the cosignature/v1
line of every witness key it lists (each printed with its key: which
witnesses to trust is yours to decide). It prints OK with counts, or the
first failing seq and why. extra.witnesses, the checkpoint.cosign entries of
archives made before the host log was witnessed, is counted, not checked.

A JSON file whose "type" is "adp.record-proof" (GET /v1/log/inclusion) is
checked as one record's proof: the same checks as extra.host_log.

A JSON file whose "type" is "adp.evidence" (as a mirror stores and gossips
it, GET /v1/mirrors/evidence) is checked instead as proof that a host
misbehaved: host-signed checkpoints, agent-signed records and a replay.

Every field the archive shows a reader must follow from the verified chain:
the room resource and the pack documents must equal what the replay
produces, and the manifest's url and format links must be this room's on
manifest.host. The host and URL themselves are printed as host-asserted:
no signature in the archive covers them (extra.host_log binds extra.host_key).

A JSON file whose "type" is "adpnode.deal.receipt/1" is checked as a
co-signed deal receipt (pack adpnode:deal/1.0): its shape and both
parties' signatures. A receipt counts only in the room it names, for a
round of that room that was agreed, signed by that round's two parties:
with --archive FILE (the room's archive; with --key too for a member-only
room) verify checks the archive and then that the receipt counts in it.
In an archive, every deal.receipt event is checked that way after the
chain (the round agreed before the receipt's seq); one receipt that fails
makes verify fail (exit 2) even though the chain verifies.

In a member-only room the chain covers the sealed records' ciphertext, so
they verify like any other; their content is reported as not checked. With
--key FILE (an agent key, its sealing keys beside it in FILE.seal) verify
opens the sealed records of the epochs that member was given, checks each
opened event against the room's types and roles at its seq, and checks both
signatures of each sealed deal receipt; a failing one makes verify exit 2.
It prints no sealed content.

Markdown transcripts (archive.md) are for reading and cannot be verified.

Exit status (verify's own): 0 when the file verifies; 2 when it does not,
or is not a verifiable archive (Markdown, malformed JSON); 1 on other
errors (for example an unreadable file).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			b, err := os.ReadFile(args[0])
			if err != nil {
				return withCode(exitFailure, err)
			}
			var m verifycmd.Member
			if key != "" {
				k, err := loadAgentKey(key)
				if err != nil {
					return err
				}
				ks, err := client.LoadSealKeys(client.SealKeyPath(key), k.ID)
				if err != nil {
					return err
				}
				m = verifycmd.Member{ID: k.ID, Find: ks.Find}
			}
			var ok bool
			if archivePath != "" {
				if !verifycmd.IsReceipt(b) {
					return usageErrorf("--archive checks a deal receipt file against its room's archive; %s is not a deal receipt", args[0])
				}
				ab, rerr := os.ReadFile(archivePath)
				if rerr != nil {
					return withCode(exitFailure, rerr)
				}
				ok, err = verifycmd.ReceiptIn(cmd.OutOrStdout(), bytes.TrimSpace(b), archivePath, ab, m)
			} else {
				ok, err = verifycmd.FileAs(cmd.OutOrStdout(), args[0], b, m)
			}
			if err != nil {
				return withCode(exitVerifyFailed, err)
			}
			if !ok {
				return &exitError{code: exitVerifyFailed, err: errSilent}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&archivePath, "archive", "", "check a deal receipt file against the archive of the room it names (JSON or JSONL)")
	cmd.Flags().StringVar(&key, "key", "", "open a member-only room's sealed events as this agent (key file; sealing keys in FILE.seal)")
	return cmd
}
