package main

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/spf13/cobra"

	"github.com/adpnode/adpnode/adp/identity"
	"github.com/adpnode/adpnode/adp/receipt"
	"github.com/adpnode/adpnode/adp/record"
	"github.com/adpnode/adpnode/adp/rounds"
	"github.com/adpnode/adpnode/client"
)

// roundCmd is `adpnode round`: the turns of a coordination round
// (adpnode:coordination/1.0). Every turn is checked against the round's
// derived state before it is sent, so the CLI never sends a turn readers
// would ignore; re-running a turn that already took effect is a no-op.
func roundCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "round", Short: "Coordination rounds: propose, counter, accept, confirm, deliver, complete, cancel, show"}
	cmd.AddCommand(roundProposeCmd(), roundShowCmd())
	for _, typ := range []string{rounds.Counter, rounds.Accept, rounds.Confirm, rounds.Deliver, rounds.Complete, rounds.Cancel} {
		cmd.AddCommand(roundTurnCmd(typ))
	}
	return cmd
}

// turnFlags are the payload flags of a turn.
type turnFlags struct {
	goal, choice, onTimeout, brief, recommend, due, options string
	opts, refs, reviews, fields                             []string
}

func (tf *turnFlags) add(cmd *cobra.Command, typ string) {
	f := cmd.Flags()
	switch typ {
	case rounds.Propose, rounds.Counter, rounds.Deliver, rounds.Complete:
		f.StringArrayVar(&tf.opts, "option", nil, "an option (deliverable for deliver) as id=Title; repeatable")
		f.StringArrayVar(&tf.refs, "ref", nil, "a URI for an option as id=URI (files by reference only); repeatable")
		f.StringArrayVar(&tf.fields, "field", nil, "a field of an option as id.name=value; repeatable")
		f.StringArrayVar(&tf.reviews, "review", nil, "a review of an option as id=approve|reject|unsure[:reason]; repeatable")
		f.StringVar(&tf.options, "options", "", "the options as a JSON array or @file (instead of --option)")
	}
	switch typ {
	case rounds.Propose, rounds.Counter:
		f.StringVar(&tf.due, "due", "", "deadline: a duration from now (24h) or epoch seconds")
		f.StringVar(&tf.onTimeout, "on-timeout", "", "what readers report when due passes: hold, cancel or escalate")
		f.StringVar(&tf.recommend, "recommend", "", "the option id you recommend")
		f.StringVar(&tf.brief, "brief", "", "a longer brief")
	}
	if typ == rounds.Propose {
		f.StringVar(&tf.goal, "goal", "", "what the round is to achieve (required)")
	}
	if typ == rounds.Accept {
		f.StringVar(&tf.choice, "choice", "", "the option id accepted (required)")
	}
}

// payload builds the turn payload.
func (tf *turnFlags) payload(typ, text, ref string) (rounds.Payload, error) {
	p := rounds.Payload{Type: typ, Text: text, Ref: ref, Goal: tf.goal, Choice: tf.choice, OnTimeout: tf.onTimeout, Brief: tf.brief, Recommend: tf.recommend}
	if text == "" {
		return p, usageErrorf("give the turn's text (the human-readable message every turn carries)")
	}
	if typ == rounds.Propose && p.Goal == "" {
		return p, usageErrorf("propose needs --goal")
	}
	if typ == rounds.Accept && p.Choice == "" {
		return p, usageErrorf("accept needs --choice (an option id)")
	}
	if tf.due != "" {
		if d, err := time.ParseDuration(tf.due); err == nil {
			v := time.Now().Add(d).Unix()
			p.Due = &v
		} else if v, err := strconv.ParseInt(tf.due, 10, 64); err == nil && v >= 0 {
			p.Due = &v
		} else {
			return p, usageErrorf("--due: a duration (24h) or epoch seconds, not %q", tf.due)
		}
	}
	if tf.options != "" {
		b := []byte(tf.options)
		if strings.HasPrefix(tf.options, "@") {
			var err error
			if b, err = os.ReadFile(tf.options[1:]); err != nil {
				return p, err
			}
		}
		if err := json.Unmarshal(b, &p.Options); err != nil {
			return p, usageErrorf("--options: %v", err)
		}
	}
	idx := map[string]int{}
	for i, o := range p.Options {
		idx[o.ID] = i
	}
	for _, o := range tf.opts {
		id, title, ok := strings.Cut(o, "=")
		if !ok || id == "" || title == "" {
			return p, usageErrorf("--option %q: want id=Title", o)
		}
		idx[id] = len(p.Options)
		p.Options = append(p.Options, rounds.Option{ID: id, Title: title})
	}
	opt := func(flag, s string) (*rounds.Option, string, error) {
		id, v, ok := strings.Cut(s, "=")
		i, known := idx[id]
		if !ok || !known {
			return nil, "", usageErrorf("--%s %q: want id=value for an option given with --option", flag, s)
		}
		return &p.Options[i], v, nil
	}
	for _, r := range tf.refs {
		o, v, err := opt("ref", r)
		if err != nil {
			return p, err
		}
		o.Refs = append(o.Refs, v)
	}
	for _, fl := range tf.fields {
		id, rest, _ := strings.Cut(fl, ".")
		name, v, ok := strings.Cut(rest, "=")
		if !ok || name == "" {
			return p, usageErrorf("--field %q: want id.name=value", fl)
		}
		o, _, err := opt("field", id+"="+v)
		if err != nil {
			return p, err
		}
		if o.Fields == nil {
			o.Fields = map[string]any{}
		}
		if n, err := strconv.ParseInt(v, 10, 64); err == nil {
			o.Fields[name] = n
		} else {
			o.Fields[name] = v
		}
	}
	for _, r := range tf.reviews {
		o, v, err := opt("review", r)
		if err != nil {
			return p, err
		}
		verdict, reason, _ := strings.Cut(v, ":")
		o.Review = &rounds.Review{Verdict: verdict, Reason: reason}
	}
	return p, nil
}

func roundProposeCmd() *cobra.Command {
	var af agentFlags
	var tf turnFlags
	cmd := &cobra.Command{
		Use:   "propose <room> <text>",
		Short: "Open a round; prints the round id (the propose's event hash)",
		Example: `  adpnode round propose ROOM "Ten widgets by Friday?" --goal "10 widgets" \
    --option std="Standard, 5 EUR" --option fast="Express, 8 EUR" --due 24h --on-timeout cancel`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, roomID, err := af.roomRef(args[0])
			if err != nil {
				return err
			}
			p, err := tf.payload(rounds.Propose, args[1], "")
			if err != nil {
				return err
			}
			if len(p.Options) == 0 {
				return usageErrorf("propose needs at least one --option")
			}
			// Resumable: the same propose by the same agent (goal, text,
			// options; a relative --due differs by run) is not sent twice,
			// whatever state its round reached since.
			res, _, err := c.Rounds(cmd.Context(), roomID)
			if err != nil {
				return err
			}
			for _, r := range res.Rounds {
				if r.Proposer == c.Key.ID.String() && sameTurn(r.Steps[0].Payload, p) {
					fmt.Fprintf(os.Stderr, "this round was already proposed (state %s)\n", r.State)
					fmt.Println(r.ID)
					return nil
				}
			}
			// In a member-only room Send seals the turn (decision 23).
			rec, err := c.Send(cmd.Context(), roomID, 10, nil, func(*client.Room, []*record.Record) (string, any, error) {
				return rounds.EventType, p, nil
			})
			if err != nil {
				return err
			}
			env, err := identity.ParseEnvelope(rec.Envelope)
			if err != nil {
				return err
			}
			fmt.Println(env.Hash)
			return nil
		},
	}
	af.add(cmd)
	tf.add(cmd, rounds.Propose)
	return cmd
}

var turnTarget = map[string]rounds.State{rounds.Counter: rounds.Open, rounds.Accept: rounds.Agreed, rounds.Confirm: rounds.Confirmed,
	rounds.Deliver: rounds.Delivered, rounds.Complete: rounds.Completed, rounds.Cancel: rounds.Cancelled}

func roundTurnCmd(typ string) *cobra.Command {
	var af agentFlags
	var tf turnFlags
	cmd := &cobra.Command{
		Use:   typ + " <room> <round> <text>",
		Short: fmt.Sprintf("Send a %s turn (the round moves to %s)", typ, turnTarget[typ]),
		Args:  cobra.ExactArgs(3),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, roomID, err := af.roomRef(args[0])
			if err != nil {
				return err
			}
			p, err := tf.payload(typ, args[2], args[1])
			if err != nil {
				return err
			}
			me := c.Key.ID.String()
			done := false
			rec, err := c.Send(cmd.Context(), roomID, 10, nil, func(*client.Room, []*record.Record) (string, any, error) {
				res, _, err := c.Rounds(cmd.Context(), roomID)
				if err != nil {
					return "", nil, err
				}
				r, ok := res.Round(args[1])
				if !ok {
					return "", nil, withCode(exitNotFound, fmt.Errorf("no round %s in room %s", args[1], roomID))
				}
				// Resumable: this agent's same turn already took effect (a
				// counter or deliver, which may repeat, with the same content).
				for _, s := range r.Steps {
					if s.Ignored || s.Actor != me || s.Payload.Type != typ {
						continue
					}
					if (typ != rounds.Counter && typ != rounds.Deliver) || sameTurn(s.Payload, p) {
						done = true
						return "", nil, errAlreadyDone
					}
				}
				if _, why := r.Next(rounds.Turn{Actor: me, Payload: p}); why != "" {
					return "", nil, withCode(exitConflict, fmt.Errorf("not sent: %s (round %s is %s)", why, r.ID, r.State))
				}
				return rounds.EventType, p, nil
			})
			if done {
				fmt.Printf("already done: round %s\n", args[1])
				return nil
			}
			if err != nil {
				return err
			}
			fmt.Printf("seq %d %s: round %s\n", rec.Seq, rec.Hash, turnTarget[typ])
			return nil
		},
	}
	af.add(cmd)
	tf.add(cmd, typ)
	return cmd
}

var errAlreadyDone = errors.New("already done")

// sameTurn reports whether two turn payloads say the same, due aside (a
// relative --due gives another deadline on every run).
func sameTurn(a, b rounds.Payload) bool {
	a.Due, b.Due = nil, nil
	ja, err1 := json.Marshal(a)
	jb, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && bytes.Equal(ja, jb)
}

// termSafe replaces control characters in agent-written text (goals,
// titles, reasons quoting a turn type) so that printing it cannot drive
// the terminal (escape sequences).
func termSafe(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return '\uFFFD'
		}
		return r
	}, s)
}

func roundShowCmd() *cobra.Command {
	var af agentFlags
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "show <room>",
		Short: "Show every round of a room: state, options, deadline, ignored turns, deal receipts",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			roomID, err := af.splitRef(args[0])
			if err != nil {
				return err
			}
			c, err := af.readerClient(cmd)
			if err != nil {
				return err
			}
			co, err := c.Coordination(cmd.Context(), roomID)
			if err != nil {
				return err
			}
			res := co.Rounds
			now := time.Now().Unix()
			if asJSON {
				printJSON(res)
				return nil
			}
			for _, r := range res.Rounds {
				fmt.Printf("round %s: %s — %s\n", r.ID, r.State, termSafe(r.Goal))
				for _, o := range r.Options {
					mark := " "
					if o.ID == r.Choice {
						mark = "*"
					}
					fmt.Printf("  %s option %s: %s\n", mark, termSafe(o.ID), termSafe(o.Title))
				}
				for _, o := range r.Delivered {
					fmt.Printf("    delivered %s: %s %s\n", termSafe(o.ID), termSafe(o.Title), termSafe(strings.Join(o.Refs, " ")))
				}
				if r.Due > 0 {
					fmt.Printf("    due %s (on_timeout %s)\n", time.Unix(r.Due, 0).UTC().Format(time.RFC3339), r.OnTimeout)
				}
				if n := r.Notice(now); n != "" {
					fmt.Printf("    %s\n", n)
				}
				for _, s := range r.Steps {
					if s.Ignored {
						fmt.Printf("    ignored seq %d %s by %s: %s\n", s.Seq, termSafe(s.Payload.Type), s.Actor, termSafe(s.Reason))
					}
				}
			}
			for _, s := range res.Orphans {
				fmt.Printf("ignored seq %d: %s\n", s.Seq, termSafe(s.Reason))
			}
			bad := printReceipts(co)
			if bad > 0 {
				return withCode(exitVerifyFailed, fmt.Errorf("%d deal receipts do not verify", bad))
			}
			return nil
		},
	}
	af.add(cmd)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the derived rounds as JSON")
	return cmd
}

// printReceipts prints a room's deal receipts (the sealed ones this agent
// opened among them) and returns how many fail.
func printReceipts(co *client.Coordination) int {
	bad := 0
	for _, rc := range co.Receipts {
		sealed := ""
		if rc.Sealed {
			sealed = " (sealed)"
		}
		if rc.Err != nil {
			bad++
			fmt.Printf("BAD deal receipt seq %d%s: %s\n", rc.Seq, sealed, termSafe(rc.Err.Error()))
			continue
		}
		fmt.Printf("deal receipt seq %d%s: co-signed by %s and %s, terms hash %s\n", rc.Seq, sealed, rc.Receipt.PartyA, rc.Receipt.PartyB, rc.Receipt.TermsHash)
	}
	for _, e := range co.Flagged {
		if e.Type != rounds.EventType && e.Type != receipt.EventType { // those are listed above
			fmt.Printf("FLAGGED sealed event seq %d by %s: %s\n", e.Seq, e.Actor, termSafe(e.Flag.Error()))
		}
	}
	if co.Unopened > 0 {
		fmt.Printf("%d sealed records not opened (epochs this agent was not given): their turns and receipts are not shown\n", co.Unopened)
	}
	return bad
}

// dealCmd is `adpnode deal`: co-signed deal receipts (adpnode:deal/1.0).
func dealCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "deal", Short: "Co-signed deal receipts: draft, sign, post, receipts"}
	cmd.AddCommand(dealDraftCmd(), dealSignCmd(), dealPostCmd(), dealReceiptsCmd())
	return cmd
}

func readSalt(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	salt, err := identity.DecodeB64Len(strings.TrimSpace(string(b)), receipt.SaltBytes)
	if err != nil {
		return nil, usageErrorf("%s: not a base64url %d-byte salt", path, receipt.SaltBytes)
	}
	return salt, nil
}

// writeReceipt replaces path with the receipt's JSON, atomically: an
// interrupted write leaves the old file or the new one.
func writeReceipt(path string, r *receipt.Receipt) error {
	var buf bytes.Buffer
	if err := json.Indent(&buf, r.Marshal(), "", "  "); err != nil {
		return err
	}
	buf.WriteByte('\n')
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, buf.Bytes(), 0o644); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}

func dealDraftCmd() *cobra.Command {
	var af agentFlags
	var terms, salt, out string
	cmd := &cobra.Command{
		Use:   "draft <room> <round>",
		Short: "Draft and sign (as partyA) the receipt of an agreed round; the other party of the round is partyB",
		Long: `draft reads the round, takes you as partyA and the round's other party as
partyB, hashes the terms file with a fresh 32-byte salt (written to --salt:
give it to partyB with the terms, never to the room), and writes the
receipt with your signature to --out. The round must have been agreed, and
not be cancelled.

Re-running it keeps a draft in --out that you signed for the same room,
round, parties and terms (hashed with the salt in --salt), and does
nothing. Otherwise it never reuses a salt: if --salt already exists (the
salt of another receipt, or of these terms before they changed), it
refuses; keep that file with its receipt and give --salt a new file, or
remove it if no receipt uses it. It never overwrites an --out that holds
another receipt, only a draft of yours for the same round that partyB has
not signed.`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, roomID, err := af.roomRef(args[0])
			if err != nil {
				return err
			}
			tb, err := os.ReadFile(terms)
			if err != nil {
				return withCode(exitNotFound, err)
			}
			if salt == "" {
				salt = terms + ".salt"
			}
			res, _, err := c.Rounds(cmd.Context(), roomID)
			if err != nil {
				return err
			}
			r, ok := res.Round(args[1])
			if !ok {
				return withCode(exitNotFound, fmt.Errorf("no round %s in room %s", args[1], roomID))
			}
			offerer, acceptor, agreed := r.Parties()
			if !agreed || r.State == rounds.Cancelled {
				return withCode(exitConflict, fmt.Errorf("round %s is %s: a receipt needs an agreed round", r.ID, r.State))
			}
			me := c.Key.ID.String()
			other := acceptor
			if other == me {
				other = offerer
			}
			if me != acceptor && me != offerer {
				return withCode(exitDenied, fmt.Errorf("you (%s) are not a party of round %s", me, r.ID))
			}
			// Resumable: a draft already signed by this agent for the same
			// room, round, parties and terms with this salt is kept (its ts
			// and any sigB too).
			if b, err := os.ReadFile(out); err == nil {
				have, _ := receipt.ParseUnsigned(bytes.TrimSpace(b))
				mine := have != nil && have.PartyA == me && have.PartyB == other && have.Ref == r.ID && have.Context == roomID && have.Verify().A == nil
				if mine {
					if s, err := readSalt(salt); err == nil {
						if th, _ := receipt.TermsHash(tb, s); th == have.TermsHash {
							fmt.Printf("%s: already drafted and signed by partyA %s\n", out, me)
							return nil
						}
					}
				}
				if !mine || have.SigB != "" {
					return withCode(exitConflict, fmt.Errorf("%s holds another receipt (or other content): not overwritten; give --out a new file", out))
				}
				// Else a draft of this round that partyB has not signed, of
				// other terms or without its salt: replaced below.
			} else if !errors.Is(err, os.ErrNotExist) {
				return err
			}
			// A new receipt: a fresh salt, and an existing salt file is
			// never reused nor overwritten.
			if _, err := os.Lstat(salt); err == nil {
				return withCode(exitConflict, fmt.Errorf("%s exists and is not the salt of a draft of these terms in %s: a salt is never reused for another receipt; "+
					"keep it with its receipt and give --salt a new file, or remove it if no receipt uses it", salt, out))
			}
			s := make([]byte, receipt.SaltBytes)
			if _, err := rand.Read(s); err != nil {
				return err
			}
			th, _ := receipt.TermsHash(tb, s)
			rc := &receipt.Receipt{Type: receipt.Type, PartyA: me, PartyB: other, TermsHash: th, Context: roomID, Ref: r.ID, TS: time.Now().Unix()}
			if err := rc.Sign(c.Key.Private()); err != nil {
				return err
			}
			// The receipt first, then the salt: interrupted in between, a
			// re-run finds no salt and replaces this draft of its own.
			if err := writeReceipt(out, rc); err != nil {
				return err
			}
			f, err := os.OpenFile(salt, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
			if err != nil {
				return err
			}
			if _, err := f.WriteString(identity.EncodeB64(s) + "\n"); err != nil {
				f.Close()
				return err
			}
			if err := f.Close(); err != nil {
				return err
			}
			fmt.Printf("%s: signed by partyA %s; partyB %s signs next (send them %s, %s and %s)\n", out, me, other, out, terms, salt)
			return nil
		},
	}
	af.add(cmd)
	cmd.Flags().StringVar(&terms, "terms", "terms.txt", "the terms file (stays with the parties)")
	cmd.Flags().StringVar(&salt, "salt", "", "the salt file (default <terms>.salt; created, never overwritten)")
	cmd.Flags().StringVarP(&out, "out", "o", "receipt.json", "where to write the receipt")
	return cmd
}

func dealSignCmd() *cobra.Command {
	var key, terms, salt string
	cmd := &cobra.Command{
		Use:   "sign <receipt.json>",
		Short: "Check a receipt against your copy of the terms and the other party's signature, then add yours",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			k, err := loadAgentKey(key)
			if err != nil {
				return err
			}
			b, err := os.ReadFile(args[0])
			if err != nil {
				return withCode(exitNotFound, err)
			}
			rc, err := receipt.ParseUnsigned(bytes.TrimSpace(b))
			if err != nil {
				return usageErrorf("%s: %v", args[0], err)
			}
			tb, err := os.ReadFile(terms)
			if err != nil {
				return withCode(exitNotFound, err)
			}
			if salt == "" {
				salt = terms + ".salt"
			}
			s, err := readSalt(salt)
			if err != nil {
				return err
			}
			if th, _ := receipt.TermsHash(tb, s); th != rc.TermsHash {
				return withCode(exitVerifyFailed, fmt.Errorf("not signed: %s and %s do not hash to the receipt's termsHash", terms, salt))
			}
			me := k.ID.String()
			v := rc.Verify()
			mine, theirs := v.A, v.B
			if me == rc.PartyB {
				mine, theirs = v.B, v.A
			} else if me != rc.PartyA {
				return withCode(exitDenied, fmt.Errorf("you (%s) are neither partyA nor partyB", me))
			}
			if theirs != nil {
				return withCode(exitVerifyFailed, fmt.Errorf("not signed: the other party's signature: %v", theirs))
			}
			if mine == nil {
				fmt.Printf("%s: already co-signed\n", args[0])
				return nil
			}
			if err := rc.Sign(k.Private()); err != nil {
				return err
			}
			if err := writeReceipt(args[0], rc); err != nil {
				return err
			}
			fmt.Printf("%s: co-signed by %s and %s\n", args[0], rc.PartyA, rc.PartyB)
			return nil
		},
	}
	cmd.Flags().StringVar(&key, "key", "agent.key", "agent key file")
	cmd.Flags().StringVar(&terms, "terms", "terms.txt", "your copy of the terms file")
	cmd.Flags().StringVar(&salt, "salt", "", "the salt file (default <terms>.salt)")
	return cmd
}

func dealPostCmd() *cobra.Command {
	var af agentFlags
	cmd := &cobra.Command{
		Use:   "post <room> <receipt.json>",
		Short: "Post a co-signed receipt to the room (refused unless both signatures verify; once only)",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, roomID, err := af.roomRef(args[0])
			if err != nil {
				return err
			}
			b, err := os.ReadFile(args[1])
			if err != nil {
				return withCode(exitNotFound, err)
			}
			raw := bytes.TrimSpace(b)
			if _, err := receipt.Check(raw); err != nil {
				return withCode(exitVerifyFailed, fmt.Errorf("not posted: %v", err))
			}
			co, err := c.Coordination(cmd.Context(), roomID)
			if err != nil {
				return err
			}
			// It must count in this room once posted: its room, an agreed
			// round of it, that round's two parties.
			rc, err := receipt.CheckIn(roomID, math.MaxInt64, co.Rounds, raw)
			if err != nil {
				return withCode(exitVerifyFailed, fmt.Errorf("not posted: %v", termSafe(err.Error())))
			}
			// Once only: a receipt of the same deal (room, round, parties,
			// terms hash) that counts here is already posted.
			for _, have := range co.Receipts {
				if have.Err == nil && sameDeal(have.Receipt, rc) {
					fmt.Printf("already posted: seq %d\n", have.Seq)
					return nil
				}
			}
			rec, err := c.Send(cmd.Context(), roomID, 10, nil, func(*client.Room, []*record.Record) (string, any, error) {
				return receipt.EventType, json.RawMessage(rc.Marshal()), nil
			})
			if err != nil {
				return err
			}
			fmt.Printf("seq %d %s: deal receipt posted\n", rec.Seq, rec.Hash)
			return nil
		},
	}
	af.add(cmd)
	return cmd
}

// sameDeal reports whether two receipts record the same deal: the same
// room, round and terms hash between the same two parties (a re-drafted
// receipt differs in ts and signatures only).
func sameDeal(a, b *receipt.Receipt) bool {
	return a.Context == b.Context && a.Ref == b.Ref && a.TermsHash == b.TermsHash &&
		((a.PartyA == b.PartyA && a.PartyB == b.PartyB) || (a.PartyA == b.PartyB && a.PartyB == b.PartyA))
}

func dealReceiptsCmd() *cobra.Command {
	var af agentFlags
	cmd := &cobra.Command{
		Use:   "receipts <room>",
		Short: "Check every deal receipt in a room (exit 2 when one does not verify)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			roomID, err := af.splitRef(args[0])
			if err != nil {
				return err
			}
			c, err := af.readerClient(cmd)
			if err != nil {
				return err
			}
			co, err := c.Coordination(cmd.Context(), roomID)
			if err != nil {
				return err
			}
			if bad := printReceipts(co); bad > 0 {
				return withCode(exitVerifyFailed, fmt.Errorf("%d deal receipts do not verify", bad))
			}
			return nil
		},
	}
	af.add(cmd)
	return cmd
}
