package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/adpnode/adpnode/adp/identity"
	"github.com/adpnode/adpnode/client"
	"github.com/adpnode/adpnode/cmd/adpnode/internal/verifycmd"
)

func verifyCmd() *cobra.Command {
	var key, archivePath string
	var allowUnproven bool
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
It prints no sealed content. Every epoch key wrapped for that member must
open with the sealing key it names: a bad wrap fails (exit 2) and names the
agent that signed it. FILE may also be a sealing key file itself (it names
its agent): what a member hands others to show a bad wrap
(docs/sealed-rooms.md).

Markdown transcripts (archive.md) are for reading and cannot be verified.
A file that is not an archive at all is named for what it is (empty, HTML,
text, a JSON object without a manifest such as a node's error answer or
the room resource, JSON Lines without the manifest line), with exit 2.

An archive must also be proven complete: its chain cannot show that no
records were dropped from its end, so verify requires extra.host_log to
prove the last record in the log of manifest.host (the origin the signed
log names), the room's final state to be ended or cancelled, and the room
to have ended no later than the proof's checkpoint is known to be: at its
last record, so a room closed (or cancelled) by its last record. A room
that ran out at its end_time is never proven complete: nothing in the log
marks its end. An archive whose chain verifies but is not proven
complete fails; --allow-unproven reads it anyway, with a warning, and
exits 3.

Exit status (verify's own): 0 when the file verifies; 2 when it does not,
or is not a verifiable archive (Markdown, malformed JSON), or is an
archive not proven complete; 3 when --allow-unproven read such an archive
(its chain verifies); 4 when the key given with --key cannot be used (no
such file, no FILE.seal beside an agent key, a malformed file, or a sealing
key file others can read); 1 on other errors (for example an unreadable
file). verify --key never creates a file.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			b, err := os.ReadFile(args[0])
			if err != nil {
				return withCode(exitFailure, err)
			}
			var m verifycmd.Member
			if key != "" {
				if m, err = verifyMember(key); err != nil {
					return err
				}
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
				ok, err = verifycmd.FileOpts(cmd.OutOrStdout(), args[0], b, m, verifycmd.Options{AllowUnproven: allowUnproven})
				if ok && errors.Is(err, verifycmd.ErrUnproven) {
					fmt.Fprintf(cmd.ErrOrStderr(), "adpnode verify: WARNING: %s is NOT PROVEN COMPLETE: records may be missing from its end (exit %d)\n", args[0], exitVerifyUnproven)
					return &exitError{code: exitVerifyUnproven, err: errSilent}
				}
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
	cmd.Flags().BoolVar(&allowUnproven, "allow-unproven", false, "read an archive whose chain verifies but which is not proven complete (warns; exit 3)")
	cmd.Flags().StringVar(&archivePath, "archive", "", "check a deal receipt file against the archive of the room it names (JSON or JSONL)")
	cmd.Flags().StringVar(&key, "key", "", "open a member-only room's sealed events as this agent (agent key file with its sealing keys in FILE.seal, or a sealing key file)")
	return cmd
}

// verifyMember loads the member --key names: an agent key file, whose
// sealing keys are in FILE.seal, or a sealing key file itself, which names
// its agent (what a member hands others to show a bad wrap). It only reads;
// every failure exits with exitVerifyKey.
func verifyMember(path string) (verifycmd.Member, error) {
	fail := func(err error) (verifycmd.Member, error) {
		return verifycmd.Member{}, withCode(exitVerifyKey, fmt.Errorf("--key: %w", err))
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return fail(err)
	}
	var probe map[string]json.RawMessage
	if json.Unmarshal(b, &probe) == nil && probe["x25519"] != nil {
		ks, err := client.LoadSealKeys(path, "")
		if err != nil {
			return fail(err)
		}
		if _, err := identity.ParseAgentID(string(ks.Agent())); err != nil {
			return fail(fmt.Errorf("%s: the sealing key file names no agent_id", path))
		}
		return verifycmd.Member{ID: ks.Agent(), Find: ks.Find}, nil
	}
	k, err := client.LoadKey(path)
	if err != nil {
		return fail(err)
	}
	sp := client.SealKeyPath(path)
	ks, err := client.LoadSealKeys(sp, k.ID)
	if errors.Is(err, os.ErrNotExist) {
		return fail(fmt.Errorf("no sealing key file %s beside %s: agent %s holds no sealing key here", sp, path, k.ID))
	}
	if err != nil {
		return fail(err)
	}
	return verifycmd.Member{ID: k.ID, Find: ks.Find}, nil
}
