//go:build e2e

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/adpnode/adpnode/adp/receipt"
	"github.com/adpnode/adpnode/client"
)

// The agent guide's deal example, run word for word with bash against a node on
// a random port (only the NODE line is substituted and the go build line
// replaced by a binary built here), with the node restarted between the
// accept and the confirm: the round is derived the same after the restart,
// and a re-run step is a no-op. Then a receipt with one bad signature is
// refused by deal post, accepted by the host (shape only), and flagged by
// deal receipts, round show, verify on the file and verify on the archive.
func TestREADMEDealExample(t *testing.T) {
	d := startDealExample(t, func(s string) string { return s })
	roomID, roundID, node, cli, bash := d.roomID, d.roundID, d.node, d.cli, d.bash
	before := cli(0, "round", "show", roomID, "--node", node, "--json")
	if !strings.Contains(before, `"State": "agreed"`) {
		t.Fatalf("before restart: %s", before)
	}

	// Restart on the same data dir mid-round: the same state is derived,
	// and re-running the accept is a no-op.
	d.restart()
	if after := cli(0, "round", "show", roomID, "--node", node, "--json"); after != before {
		t.Fatalf("round derived differently after restart:\n%s\nvs\n%s", before, after)
	}
	// Flags first and ids after "--", as the agent guide writes them: a round
	// id begins with "-" about one time in 64.
	if out := cli(0, "round", "accept", "--choice", "fast", "--node", node, "--key", "bob.key", "--", roomID, roundID, "Express, please."); !strings.Contains(out, "already done") {
		t.Fatalf("re-run accept: %s", out)
	}
	// A backward turn is refused before it is sent, with the reason.
	if out := cli(exitConflict, "round", "counter", "--option", "x=X", "--node", node, "--key", "bob.key", "--", roomID, roundID, "Wait"); !strings.Contains(out, "would move the round back from agreed to open") {
		t.Fatalf("counter after accept: %s", out)
	}

	out := bash(d.part2)
	t.Logf("second half of the example:\n%s", out)
	d.checkPart2(out)
	work := d.work
	if out := cli(0, "deal", "draft", "--terms", "terms.txt", "--node", node, "--key", "alice.key", "-o", "receipt.json", "--", roomID, roundID); !strings.Contains(out, "already drafted") {
		t.Fatalf("re-run draft: %s", out)
	}
	if out := cli(0, "deal", "sign", "receipt.json", "--terms", "terms.txt", "--key", "bob.key"); !strings.Contains(out, "already co-signed") {
		t.Fatalf("re-run sign: %s", out)
	}
	// Bob's copy of the terms must match the hash he signs.
	os.WriteFile(filepath.Join(work, "other-terms.txt"), []byte("11 widgets\n"), 0o644)
	os.WriteFile(filepath.Join(work, "other-terms.txt.salt"), mustRead(t, filepath.Join(work, "terms.txt.salt")), 0o600)
	if out := cli(exitVerifyFailed, "deal", "sign", "receipt.json", "--terms", "other-terms.txt", "--key", "bob.key"); !strings.Contains(out, "do not hash to the receipt's termsHash") {
		t.Fatalf("sign with other terms: %s", out)
	}
	if out := cli(0, "deal", "post", roomID, "receipt.json", "--node", node, "--key", "bob.key"); !strings.Contains(out, "already posted") {
		t.Fatalf("re-run post: %s", out)
	}

	// Hostile text cannot drive the terminal: control characters are replaced.
	cli(0, "round", "propose", roomID, "evil", "--goal", "\x1b[2Jwiped", "--option", "a=\x1b]0;title\x07A", "--node", node, "--key", "bob.key")
	if out := cli(0, "round", "show", roomID, "--node", node); strings.ContainsAny(out, "\x1b\x07") || !strings.Contains(out, "\uFFFD[2Jwiped") {
		t.Fatalf("round show printed control characters: %q", out)
	}

	// One bad signature: Bob's sigB over other content.
	writeBadReceipt(t, work)
	if out := cli(exitVerifyFailed, "deal", "post", roomID, "bad.json", "--node", node, "--key", "bob.key"); !strings.Contains(out, "not posted") || !strings.Contains(out, "sigB") {
		t.Fatalf("deal post of a bad receipt: %s", out)
	}
	if out := cli(exitVerifyFailed, "verify", "bad.json"); !strings.Contains(out, "FAIL deal receipt") || !strings.Contains(out, "sigB: signature does not verify") {
		t.Fatalf("verify bad.json: %s", out)
	}
	// The host checks shape only: a raw post of the bad receipt is accepted.
	posted := cli(0, "post", roomID, "--type", "deal.receipt", "--payload", "@bad.json", "--node", node, "--key", "bob.key")
	seq := strings.Fields(posted)[1]
	for _, args := range [][]string{{"deal", "receipts", roomID}, {"round", "show", roomID}} {
		out := cli(exitVerifyFailed, append(args, "--node", node)...)
		if !strings.Contains(out, "BAD deal receipt seq "+seq+": receipt: sigB: signature does not verify") || !strings.Contains(out, "deal receipt seq ") {
			t.Fatalf("%v: %s", args, out)
		}
	}
	// verify on the archive: the chain verifies, the good receipt is OK and
	// the bad one fails the run.
	cli(0, "room", "close", roomID, "--node", node, "--key", "alice.key")
	cli(0, "export", roomID, "--node", node, "--format", "json", "-o", "archive.json")
	cli(0, "export", roomID, "--node", node, "--format", "jsonl", "-o", "archive.jsonl")
	for _, f := range []string{"archive.json", "archive.jsonl"} {
		out := cli(exitVerifyFailed, "verify", f)
		if !strings.Contains(out, "OK room "+roomID) || !strings.Contains(out, "deal receipt at seq") ||
			!strings.Contains(out, "FAIL deal receipt at seq "+seq) || !strings.Contains(out, "FAIL 1 of 2 deal receipts") {
			t.Fatalf("verify %s: %s", f, out)
		}
	}
}

// dealExample is the agent guide's deal example running against a node on a
// random port: only the NODE line is substituted and the go build line
// replaced by a binary built here; edit may change the script first (the
// sealed variant adds one flag). The first part, up to the confirm, has
// run; part2 is the rest, to run after a restart.
type dealExample struct {
	t               *testing.T
	ctx             context.Context
	addr, node      string
	data, work      string
	s               *stack
	part2           string
	script          string // the whole example, as run
	roomID, roundID string
}

func startDealExample(t *testing.T, edit func(string) string) *dealExample {
	t.Helper()
	script := docBlock(t, "docs/agent.md", "**Worked example: a deal from proposal to co-signed receipt.**")
	const nodeLine = "NODE=http://127.0.0.1:8080\n"
	const buildLine = "go build -o adpnode ./cmd/adpnode\n"
	const split = "./adpnode round confirm "
	if !strings.HasPrefix(script, nodeLine) || !strings.Contains(script, buildLine) || strings.Count(script, split) != 1 {
		t.Fatalf("the deal example must start with %q, build with %q and confirm once:\n%s", nodeLine, buildLine, script)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	t.Cleanup(cancel)
	work := t.TempDir()
	// Build before choosing the port: a port found free and left unused
	// for the length of a build may be taken by then.
	if out, err := exec.CommandContext(ctx, "go", "build", "-o", filepath.Join(work, "adpnode"), ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	d := &dealExample{t: t, addr: freeAddr(t), data: t.TempDir(), work: work, ctx: ctx}
	d.node = "http://" + d.addr
	nodeSet := "NODE=" + d.node + "\n"
	script = edit(strings.Replace(strings.Replace(script, nodeLine, nodeSet, 1), buildLine, "", 1))
	d.script = script
	i := strings.Index(script, split)
	part1 := script[:i] + "declare -p ROOM ROUND > vars.sh\n"
	d.part2 = nodeSet + "source vars.sh\n" + script[i:]

	d.s = startTestStack(t, d.addr, d.data)
	t.Cleanup(func() { d.s.close() })
	d.bash(part1)
	vars, _ := os.ReadFile(filepath.Join(d.work, "vars.sh"))
	room := regexp.MustCompile(`ROOM="([^"]+)"`).FindSubmatch(vars)
	round := regexp.MustCompile(`ROUND="([^"]+)"`).FindSubmatch(vars)
	if room == nil || round == nil {
		t.Fatalf("vars.sh: %s", vars)
	}
	d.roomID, d.roundID = string(room[1]), string(round[1])
	return d
}

// restart stops the node and starts it again on the same data dir.
func (d *dealExample) restart() {
	d.t.Helper()
	if err := d.s.close(); err != nil {
		d.t.Fatal(err)
	}
	d.s = startTestStack(d.t, d.addr, d.data)
}

func (d *dealExample) bash(s string) string {
	d.t.Helper()
	run := exec.CommandContext(d.ctx, "bash", "-euo", "pipefail", "-c", s)
	run.Dir = d.work
	run.WaitDelay = 5 * time.Second
	out, err := run.CombinedOutput()
	if err != nil {
		d.t.Fatalf("script failed: %v\n%s\n--- script:\n%s", err, out, s)
	}
	return string(out)
}

func (d *dealExample) cli(want int, args ...string) string {
	d.t.Helper()
	run := exec.CommandContext(d.ctx, filepath.Join(d.work, "adpnode"), args...)
	run.Dir = d.work
	out, err := run.CombinedOutput()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		d.t.Fatal(err)
	}
	if code != want {
		d.t.Fatalf("adpnode %s: exit %d, want %d\n%s", strings.Join(args, " "), code, want, out)
	}
	return string(out)
}

// checkPart2 checks what the second half of the example prints.
func (d *dealExample) checkPart2(out string) {
	d.t.Helper()
	for _, want := range []string{
		"round " + d.roundID + ": completed — 10 widgets",
		"* option fast: Express, 8 EUR",
		"delivered box: 10 widgets https://carrier.example/track/123",
		"co-signed by did:agent:",
		"deal receipt posted",
		"OK deal receipt signatures: signed by partyA did:agent:",
	} {
		if !strings.Contains(out, want) {
			d.t.Errorf("deal example output lacks %q", want)
		}
	}
	if d.t.Failed() {
		d.t.Fatalf("output:\n%s", out)
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A round id is an event hash: about one in 64 begins with "-", which the
// flag parser reads as shorthand flags. After "--" it is a plain argument
// (the command then fails on what comes next, the missing key file);
// before it, the error names the id and says to use "--".
func TestDashLeadingRoundID(t *testing.T) {
	const id = "-a4caYk6LIhpRfTX_1lDFK-0ZgIGeRE7YcoykOF2Rn4"
	key := filepath.Join(t.TempDir(), "missing.key")
	var out, errb bytes.Buffer
	code := run([]string{"round", "accept", "--choice", "fast", "--node", "http://127.0.0.1:1", "--key", key, "--", "room", id, "ok"}, &out, &errb)
	if code == exitOK || strings.Contains(errb.String(), "shorthand") || strings.Contains(errb.String(), `begins with "-"`) {
		t.Fatalf("after --: exit %d, %q (want a failure past flag parsing)", code, errb.String())
	}
	errb.Reset()
	code = run([]string{"round", "accept", "room", id, "ok", "--node", "http://127.0.0.1:1", "--key", key}, &out, &errb)
	if code == exitOK || !strings.Contains(errb.String(), id+` looks like an id that begins with "-"`) {
		t.Fatalf("before --: exit %d, %q (want the hint)", code, errb.String())
	}
}

// The agent guide's deal example word for word in a member-only room: the one
// change is --confidentiality member-only on room create, as the agent guide
// says. Every turn and the receipt go out sealed and the same steps print
// the same results; a restart mid-round derives the same state; a reader
// without a key sees sealed records, not rounds; seal open writes the
// member's opened export mode 0600; a bad sealed receipt, and a co-signed
// one naming a missing round, fail deal receipts; tail shows [opened
// round.turn]; verify on the archive reports the sealed records as not
// checked, and with --key opens them and checks the sealed receipts;
// verify of the receipt file --archive needs --key to see its round.
func TestREADMEDealExampleSealed(t *testing.T) {
	const create = "./adpnode room create --node $NODE --key alice.key "
	d := startDealExample(t, func(s string) string {
		if strings.Count(s, create) != 1 {
			t.Fatalf("the deal example must create its room once with %q", create)
		}
		return strings.Replace(s, create, create+"--confidentiality member-only ", 1)
	})
	roomID, roundID, node, cli, work := d.roomID, d.roundID, d.node, d.cli, d.work
	show := []string{"round", "show", roomID, "--node", node, "--json", "--key", "alice.key"}
	before := cli(0, show...)
	if !strings.Contains(before, `"State": "agreed"`) {
		t.Fatalf("before restart: %s", before)
	}
	d.restart()
	if after := cli(0, show...); after != before {
		t.Fatalf("round derived differently after restart:\n%s\nvs\n%s", before, after)
	}
	if out := cli(0, "round", "accept", "--choice", "fast", "--node", node, "--key", "bob.key", "--", roomID, roundID, "Express, please."); !strings.Contains(out, "already done") {
		t.Fatalf("re-run accept: %s", out)
	}
	out := d.bash(d.part2)
	t.Logf("second half of the sealed example:\n%s", out)
	d.checkPart2(out)
	if !strings.Contains(out, "(sealed): co-signed by") {
		t.Fatalf("the receipt was not read sealed:\n%s", out)
	}
	// Without a key a reader sees that records are sealed, and no round.
	if out := cli(0, "round", "show", roomID, "--node", node); strings.Contains(out, "10 widgets") || !strings.Contains(out, "sealed records not opened") {
		t.Fatalf("round show without a member's key: %s", out)
	}
	// The member's opened export.
	cli(0, "seal", "open", roomID, "--node", node, "--key", "bob.key", "-o", "opened.json")
	if fi, err := os.Stat(filepath.Join(work, "opened.json")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("opened.json: %v %v", fi, err)
	}
	var exp OpenedExport
	if err := json.Unmarshal(mustRead(t, filepath.Join(work, "opened.json")), &exp); err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{}
	for _, e := range exp.Entries {
		kinds[e.EventType]++
		if e.Flag != "" {
			t.Errorf("entry %d flagged: %s", e.Seq, e.Flag)
		}
	}
	if kinds["round.turn"] != 5 || kinds["deal.receipt"] != 1 || exp.RoomID != roomID || len(exp.Unopened) != 0 {
		t.Fatalf("opened export: %v, %d entries, unopened %v", kinds, len(exp.Entries), exp.Unopened)
	}

	// One bad signature, posted raw: sealed by post, flagged by readers.
	writeBadReceipt(t, work)
	posted := cli(0, "post", roomID, "--type", "deal.receipt", "--payload", "@bad.json", "--node", node, "--key", "bob.key")
	if !strings.HasSuffix(strings.TrimSpace(posted), "(sealed)") {
		t.Fatalf("post --type deal.receipt in a member-only room: %s", posted)
	}
	seq := strings.Fields(posted)[1]
	// Co-signed by the round's parties but naming a round the room lacks:
	// sealed like any receipt, flagged once opened.
	writeSignedReceipt(t, work, "missing.json", roomID, "B"+strings.Repeat("A", 42), "alice.key", "bob.key")
	missing := strings.Fields(cli(0, "post", roomID, "--type", "deal.receipt", "--payload", "@missing.json", "--node", node, "--key", "alice.key"))[1]
	out = cli(exitVerifyFailed, "deal", "receipts", roomID, "--node", node, "--key", "alice.key")
	if !strings.Contains(out, "BAD deal receipt seq "+seq+" (sealed): receipt: sigB: signature does not verify") ||
		!strings.Contains(out, "BAD deal receipt seq "+missing+" (sealed): receipt: names no round of this room") || strings.Count(out, "co-signed by") != 1 {
		t.Fatalf("deal receipts: %s", out)
	}

	cli(0, "room", "close", roomID, "--node", node, "--key", "alice.key")
	if out := cli(0, "tail", roomID, "--node", node, "--key", "bob.key"); !strings.Contains(out, "[opened round.turn]") || !strings.Contains(out, "[opened deal.receipt]") {
		t.Fatalf("tail: %s", out)
	}
	cli(0, "export", roomID, "--node", node, "--format", "json", "-o", "archive.json")
	if out := cli(0, "verify", "archive.json"); !strings.Contains(out, "OK room "+roomID) || !strings.Contains(out, "not checked: ") || strings.Contains(out, "deal receipt at seq") {
		t.Fatalf("verify without a key: %s", out)
	}
	out = cli(exitVerifyFailed, "verify", "archive.json", "--key", "bob.key")
	if !strings.Contains(out, "OK room "+roomID) || !strings.Contains(out, "sealed deal receipt at seq") || !strings.Contains(out, "FAIL sealed deal receipt at seq "+seq) ||
		!strings.Contains(out, "FAIL sealed deal receipt at seq "+missing+" ") || strings.Contains(out, "10 widgets") {
		t.Fatalf("verify --key: %s", out)
	}
	// The receipt file against the archive: the round is sealed, so only
	// a member's key shows it.
	if out := cli(0, "verify", "receipt.json", "--archive", "archive.json", "--key", "bob.key"); !strings.Contains(out, "OK deal receipt co-signed by") {
		t.Fatalf("verify receipt.json --archive --key: %s", out)
	}
	if out := cli(exitVerifyFailed, "verify", "receipt.json", "--archive", "archive.json"); !strings.Contains(out, "names no round of this room") || !strings.Contains(out, "need --key") {
		t.Fatalf("verify receipt.json --archive without a key: %s", out)
	}
}

// writeBadReceipt writes work/bad.json: work/receipt.json with Bob's sigB
// replaced by his signature over other content (one bad signature).
func writeBadReceipt(t *testing.T, work string) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(work, "receipt.json"))
	if err != nil {
		t.Fatal(err)
	}
	good, err := receipt.Check([]byte(strings.TrimSpace(string(raw))))
	if err != nil {
		t.Fatal(err)
	}
	bob, err := client.LoadKey(filepath.Join(work, "bob.key"))
	if err != nil {
		t.Fatal(err)
	}
	other := *good
	other.TS++
	if err := other.Sign(bob.Private()); err != nil {
		t.Fatal(err)
	}
	bad := *good
	bad.SigB = other.SigB
	if err := os.WriteFile(filepath.Join(work, "bad.json"), bad.Marshal(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// writeReceipt writes work/name: a receipt for room ctx and round ref over
// a fixed terms hash, signed by the agents of the key files given (the
// first is partyA).
func writeSignedReceipt(t *testing.T, work, name, ctx, ref, keyA, keyB string) {
	t.Helper()
	a, err := client.LoadKey(filepath.Join(work, keyA))
	if err != nil {
		t.Fatal(err)
	}
	b, err := client.LoadKey(filepath.Join(work, keyB))
	if err != nil {
		t.Fatal(err)
	}
	rc := &receipt.Receipt{Type: receipt.Type, PartyA: a.ID.String(), PartyB: b.ID.String(), TermsHash: strings.Repeat("A", 43), Context: ctx, Ref: ref, TS: 1_900_000_000}
	if err := rc.Sign(a.Private()); err != nil {
		t.Fatal(err)
	}
	if err := rc.Sign(b.Private()); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(work, name), rc.Marshal(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// Property: a deal receipt counts only in the room it names, for a round
// that exists there and was agreed, signed by that round's two parties.
// After the agent guide's deal example, receipts with valid signatures that
// fail this — the room's co-signed receipt replayed into another room, one
// naming a missing round, one naming an open round, one signed by a third
// party — are refused by deal post, accepted by the host (shape only),
// flagged by deal receipts and round show (exit 2, never "co-signed"), and
// make verify of each room's archive exit 2; verify of a receipt file
// --archive checks it against the room's archive.
func TestDealReceiptCountsOnlyInItsRoom(t *testing.T) {
	d := startDealExample(t, func(s string) string { return s })
	roomID, roundID, node, cli := d.roomID, d.roundID, d.node, d.cli
	d.checkPart2(d.bash(d.part2))

	// Another room of the same two agents, with an agreed round of its own.
	cli(0, "keygen", "--out", "carol.key")
	other := strings.Fields(cli(0, "room", "create", "--node", node, "--key", "alice.key", "--topic", "Other order", "--packs", "adpnode:coordination/1.0,adpnode:deal/1.0"))[0]
	cli(0, "join", other, "--node", node, "--key", "bob.key")
	cli(0, "join", roomID, "--node", node, "--key", "carol.key")
	r2 := strings.TrimSpace(cli(0, "round", "propose", other, "Gadgets?", "--goal", "gadgets", "--option", "g=Gadget", "--node", node, "--key", "alice.key"))
	cli(0, "round", "accept", "--choice", "g", "--node", node, "--key", "bob.key", "--", other, r2, "Yes.")
	open := strings.TrimSpace(cli(0, "round", "propose", roomID, "Spare parts?", "--goal", "spares", "--option", "s=Spares", "--node", node, "--key", "alice.key"))

	writeSignedReceipt(t, d.work, "missing.json", roomID, "B"+strings.Repeat("A", 42), "alice.key", "bob.key")
	writeSignedReceipt(t, d.work, "open.json", roomID, open, "alice.key", "bob.key")
	writeSignedReceipt(t, d.work, "third.json", roomID, roundID, "alice.key", "carol.key")
	type hostile struct{ file, room, poster, why, seq string }
	cases := []*hostile{
		{"receipt.json", other, "bob.key", "names another room", ""},
		{"missing.json", roomID, "carol.key", "names no round of this room", ""},
		{"open.json", roomID, "carol.key", "names a round that was not agreed before it", ""},
		{"third.json", roomID, "carol.key", "is not signed by its round's two parties", ""},
	}
	for _, c := range cases {
		if out := cli(exitVerifyFailed, "deal", "post", c.room, c.file, "--node", node, "--key", c.poster); !strings.Contains(out, "not posted") || !strings.Contains(out, c.why) {
			t.Fatalf("deal post %s: %s", c.file, out)
		}
		// The host checks shape only: a raw post is accepted.
		c.seq = strings.Fields(cli(0, "post", c.room, "--type", "deal.receipt", "--payload", "@"+c.file, "--node", node, "--key", c.poster))[1]
	}
	for _, room := range []string{roomID, other} {
		for _, args := range [][]string{{"deal", "receipts", room}, {"round", "show", room}} {
			out := cli(exitVerifyFailed, append(args, "--node", node)...)
			for _, c := range cases {
				if c.room == room && !strings.Contains(out, "BAD deal receipt seq "+c.seq+": receipt: "+c.why) {
					t.Errorf("%v: %s lacks the flag\n%s", args, c.file, out)
				}
			}
			// Only the good receipt, in its own room, is shown co-signed.
			if n := strings.Count(out, "co-signed by"); (room == roomID) != (n == 1) || n > 1 {
				t.Errorf("%v: %d co-signed\n%s", args, n, out)
			}
		}
	}

	for _, room := range []string{roomID, other} {
		cli(0, "room", "close", room, "--node", node, "--key", "alice.key")
		for _, f := range []string{"json", "jsonl"} {
			cli(0, "export", room, "--node", node, "--format", f, "-o", room+"."+f)
		}
	}
	for _, f := range []string{"json", "jsonl"} {
		out := cli(exitVerifyFailed, "verify", roomID+"."+f)
		if !strings.Contains(out, "OK room "+roomID) || !strings.Contains(out, "FAIL 3 of 4 deal receipts") {
			t.Fatalf("verify %s.%s: %s", roomID, f, out)
		}
		out = cli(exitVerifyFailed, "verify", other+"."+f)
		if !strings.Contains(out, "OK room "+other) || !strings.Contains(out, "FAIL 1 of 1 deal receipts") {
			t.Fatalf("verify %s.%s: %s", other, f, out)
		}
		for _, c := range cases {
			if !strings.Contains(cli(exitVerifyFailed, "verify", c.room+"."+f), "FAIL deal receipt at seq "+c.seq+" ") {
				t.Errorf("verify %s.%s does not fail seq %s (%s)", c.room, f, c.seq, c.file)
			}
			out := cli(exitVerifyFailed, "verify", c.file, "--archive", c.room+"."+f)
			if !strings.Contains(out, "OK room "+c.room) || !strings.Contains(out, "FAIL deal receipt in room "+c.room+": receipt: "+c.why) {
				t.Errorf("verify %s --archive %s.%s: %s", c.file, c.room, f, out)
			}
		}
		// The good receipt counts in its own room's archive, even though
		// that archive holds failing receipts too.
		if out := cli(0, "verify", "receipt.json", "--archive", roomID+"."+f); !strings.Contains(out, "OK deal receipt co-signed by") {
			t.Fatalf("verify receipt.json --archive: %s", out)
		}
	}
	// Alone, a receipt file's signatures are checked and the rest is
	// reported as not checked; --archive takes a receipt file only.
	if out := cli(0, "verify", "third.json"); !strings.Contains(out, "OK deal receipt signatures") || strings.Contains(out, "co-signed") || !strings.Contains(out, "not checked") {
		t.Fatalf("verify third.json: %s", out)
	}
	cli(exitUsage, "verify", roomID+".json", "--archive", roomID+".json")
}

// steps returns the example's commands, one per shell command (lines
// continued with a backslash joined), comments and blank lines left out.
func (d *dealExample) steps() []string {
	var out []string
	for _, cmd := range strings.Split(strings.ReplaceAll(d.script, "\\\n", ""), "\n") {
		if cmd = strings.TrimSpace(cmd); cmd != "" && !strings.HasPrefix(cmd, "#") {
			out = append(out, cmd)
		}
	}
	return out
}

// lastSeq returns the seq of the room's last record.
func (d *dealExample) lastSeq() int64 {
	d.t.Helper()
	k, err := client.LoadKey(filepath.Join(d.work, "alice.key"))
	if err != nil {
		d.t.Fatal(err)
	}
	recs, err := client.New(d.node, k).History(d.ctx, d.roomID, 0)
	if err != nil || len(recs) == 0 {
		d.t.Fatalf("history: %v", err)
	}
	return recs[len(recs)-1].Seq
}

// Property: re-running a completed step of the agent guide's deal example does
// what the agent guide says — nothing, once it has taken effect: no second
// round, turn or receipt. Each round and deal step of the second half is
// run twice in a row (the second run adds no record), then, after a
// restart on the same data dir, every round and deal step of the example
// is run again over the completed round, propose and deliver included:
// the room gains no record, the propose prints the same round, and the
// room holds one round and one receipt.
func TestREADMEDealRerunIsIdempotent(t *testing.T) {
	d := startDealExample(t, func(s string) string { return s })
	cli, node, roomID := d.cli, d.node, d.roomID
	env := "NODE=" + node + "\nsource vars.sh\n"
	dealStep := func(cmd string) bool {
		return strings.Contains(cmd, "./adpnode round ") || strings.Contains(cmd, "./adpnode deal ")
	}
	var confirmed bool
	for _, cmd := range d.steps() {
		if strings.Contains(cmd, "./adpnode round confirm ") {
			confirmed = true // the first half ran in startDealExample
		}
		if !confirmed {
			continue
		}
		d.bash(env + cmd)
		before := d.lastSeq()
		out := d.bash(env + cmd)
		if after := d.lastSeq(); dealStep(cmd) && after != before {
			t.Fatalf("re-running %q added records %d..%d:\n%s", cmd, before+1, after, out)
		}
	}
	if !confirmed {
		t.Fatal("the example has no confirm step")
	}
	done := d.lastSeq()
	d.restart()
	for _, cmd := range d.steps() {
		if !dealStep(cmd) {
			continue
		}
		if strings.HasPrefix(cmd, "ROUND=$(") {
			cmd += "\necho \"round=$ROUND\""
		}
		out := d.bash(env + cmd)
		if strings.Contains(cmd, "round propose") && !strings.Contains(out, "round="+d.roundID+"\n") {
			t.Fatalf("re-run propose printed another round:\n%s", out)
		}
	}
	if after := d.lastSeq(); after != done {
		t.Fatalf("re-running the example over the completed round added records %d..%d", done+1, after)
	}
	var res struct{ Rounds []struct{ ID, State string } }
	if err := json.Unmarshal([]byte(cli(0, "round", "show", roomID, "--node", node, "--json")), &res); err != nil || len(res.Rounds) != 1 || res.Rounds[0].State != "completed" {
		t.Fatalf("rounds: %+v %v", res, err)
	}
	if out := cli(0, "deal", "receipts", roomID, "--node", node); strings.Count(out, "deal receipt seq ") != 1 {
		t.Fatalf("receipts: %s", out)
	}
}

// Property: deal draft never reuses a salt for a different receipt, and
// never overwrites a salt file or another receipt. After the agent guide's deal
// example, a draft of changed terms under the same file name is refused
// (into the co-signed receipt.json, and into a new file with the old salt)
// and writes nothing; other terms get a fresh salt; an explicit --salt of
// another receipt is refused; a draft interrupted before its salt was
// written is redone with a fresh salt, and partyB can sign it.
func TestDealDraftNeverReusesASalt(t *testing.T) {
	d := startDealExample(t, func(s string) string { return s })
	cli, node, roomID, work := d.cli, d.node, d.roomID, d.work
	d.checkPart2(d.bash(d.part2))
	// Changed terms under the same file name: refused, nothing written
	// (the salt stays the posted receipt's).
	salt, rc := mustRead(t, filepath.Join(work, "terms.txt.salt")), mustRead(t, filepath.Join(work, "receipt.json"))
	draft := func(want int, terms string, extra ...string) string {
		return cli(want, append([]string{"deal", "draft", "--terms", terms, "--node", node, "--key", "alice.key"}, append(extra, "--", roomID, d.roundID)...)...)
	}
	os.WriteFile(filepath.Join(work, "terms.txt"), []byte("12 express widgets for 8 EUR\n"), 0o644)
	if out := draft(exitConflict, "terms.txt"); !strings.Contains(out, "holds another receipt") {
		t.Fatalf("draft of changed terms into the co-signed receipt.json: %s", out)
	}
	if out := draft(exitConflict, "terms.txt", "-o", "new.json"); !strings.Contains(out, "a salt is never reused") {
		t.Fatalf("draft of changed terms with the old salt: %s", out)
	}
	if !bytes.Equal(mustRead(t, filepath.Join(work, "terms.txt.salt")), salt) || !bytes.Equal(mustRead(t, filepath.Join(work, "receipt.json")), rc) {
		t.Fatal("a refused draft changed the salt or the receipt")
	}
	if _, err := os.Stat(filepath.Join(work, "new.json")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a refused draft wrote new.json: %v", err)
	}
	// Other terms get a fresh salt; an explicit --salt of another receipt is refused.
	os.WriteFile(filepath.Join(work, "terms2.txt"), []byte("12 express widgets for 8 EUR\n"), 0o644)
	draft(0, "terms2.txt", "-o", "r2.json")
	salt2 := mustRead(t, filepath.Join(work, "terms2.txt.salt"))
	if bytes.Equal(salt2, salt) {
		t.Fatal("a second receipt reused the salt")
	}
	if out := draft(0, "terms2.txt", "-o", "r2.json"); !strings.Contains(out, "already drafted") {
		t.Fatalf("re-run draft r2: %s", out)
	}
	if out := draft(exitConflict, "terms.txt", "--salt", "terms2.txt.salt", "-o", "r3.json"); !strings.Contains(out, "a salt is never reused") {
		t.Fatalf("draft with another receipt's salt: %s", out)
	}
	// Interrupted between the draft and its salt: the re-run replaces its
	// own unsigned draft with a fresh salt.
	os.Remove(filepath.Join(work, "terms2.txt.salt"))
	draft(0, "terms2.txt", "-o", "r2.json")
	if s := mustRead(t, filepath.Join(work, "terms2.txt.salt")); bytes.Equal(s, salt2) || bytes.Equal(s, salt) {
		t.Fatal("the redraft reused a salt")
	}
	if out := cli(0, "deal", "sign", "r2.json", "--terms", "terms2.txt", "--key", "bob.key"); !strings.Contains(out, "co-signed by") {
		t.Fatalf("sign the redraft: %s", out)
	}
}
