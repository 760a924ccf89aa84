package main

import (
	"bytes"
	"context"
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

// The README's deal example, run word for word with bash against a node on
// a random port (only the NODE line is substituted and the go build line
// replaced by a binary built here), with the node restarted between the
// accept and the confirm: the round is derived the same after the restart,
// and a re-run step is a no-op. Then a receipt with one bad signature is
// refused by deal post, accepted by the host (shape only), and flagged by
// deal receipts, round show, verify on the file and verify on the archive.
func TestREADMEDealExample(t *testing.T) {
	script := readmeBlock(t, "**Worked example: a deal from proposal to co-signed receipt.**")
	const nodeLine = "NODE=http://127.0.0.1:8080\n"
	const buildLine = "go build -o adpnode ./cmd/adpnode\n"
	const split = "./adpnode round confirm "
	if !strings.HasPrefix(script, nodeLine) || !strings.Contains(script, buildLine) || strings.Count(script, split) != 1 {
		t.Fatalf("the deal example must start with %q, build with %q and confirm once:\n%s", nodeLine, buildLine, script)
	}
	addr := freeAddr(t)
	data, work := t.TempDir(), t.TempDir()
	nodeSet := "NODE=http://" + addr + "\n"
	script = strings.Replace(strings.Replace(script, nodeLine, nodeSet, 1), buildLine, "", 1)
	i := strings.Index(script, split)
	part1 := script[:i] + "declare -p ROOM ROUND > vars.sh\n"
	part2 := nodeSet + "source vars.sh\n" + script[i:]

	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "go", "build", "-o", filepath.Join(work, "adpnode"), ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	bash := func(s string) string {
		t.Helper()
		run := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", s)
		run.Dir = work
		run.WaitDelay = 5 * time.Second
		out, err := run.CombinedOutput()
		if err != nil {
			t.Fatalf("script failed: %v\n%s\n--- script:\n%s", err, out, s)
		}
		return string(out)
	}
	cli := func(want int, args ...string) string {
		t.Helper()
		run := exec.CommandContext(ctx, filepath.Join(work, "adpnode"), args...)
		run.Dir = work
		out, err := run.CombinedOutput()
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		if code != want {
			t.Fatalf("adpnode %s: exit %d, want %d\n%s", strings.Join(args, " "), code, want, out)
		}
		return string(out)
	}

	s := startTestStack(t, addr, data)
	defer func() { s.close() }()
	bash(part1)
	vars, _ := os.ReadFile(filepath.Join(work, "vars.sh"))
	room := regexp.MustCompile(`ROOM="([^"]+)"`).FindSubmatch(vars)
	round := regexp.MustCompile(`ROUND="([^"]+)"`).FindSubmatch(vars)
	if room == nil || round == nil {
		t.Fatalf("vars.sh: %s", vars)
	}
	roomID, roundID := string(room[1]), string(round[1])
	node := "http://" + addr
	before := cli(0, "round", "show", roomID, "--node", node, "--json")
	if !strings.Contains(before, `"State": "agreed"`) {
		t.Fatalf("before restart: %s", before)
	}

	// Restart on the same data dir mid-round: the same state is derived,
	// and re-running the accept is a no-op.
	if err := s.close(); err != nil {
		t.Fatal(err)
	}
	s = startTestStack(t, addr, data)
	if after := cli(0, "round", "show", roomID, "--node", node, "--json"); after != before {
		t.Fatalf("round derived differently after restart:\n%s\nvs\n%s", before, after)
	}
	if out := cli(0, "round", "accept", roomID, roundID, "Express, please.", "--choice", "fast", "--node", node, "--key", "bob.key"); !strings.Contains(out, "already done") {
		t.Fatalf("re-run accept: %s", out)
	}
	// A backward turn is refused before it is sent, with the reason.
	if out := cli(exitConflict, "round", "counter", roomID, roundID, "Wait", "--option", "x=X", "--node", node, "--key", "bob.key"); !strings.Contains(out, "would move the round back from agreed to open") {
		t.Fatalf("counter after accept: %s", out)
	}

	out := bash(part2)
	t.Logf("second half of the example:\n%s", out)
	for _, want := range []string{
		"round " + roundID + ": completed — 10 widgets",
		"* option fast: Express, 8 EUR",
		"delivered box: 10 widgets https://carrier.example/track/123",
		"co-signed by did:agent:",
		"deal receipt posted",
		"OK deal receipt co-signed by",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("deal example output lacks %q", want)
		}
	}
	if t.Failed() {
		t.Fatalf("output:\n%s", out)
	}
	if out := cli(0, "deal", "draft", roomID, roundID, "--terms", "terms.txt", "--node", node, "--key", "alice.key", "-o", "receipt.json"); !strings.Contains(out, "already drafted") {
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
	raw, _ := os.ReadFile(filepath.Join(work, "receipt.json"))
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
	os.WriteFile(filepath.Join(work, "bad.json"), bad.Marshal(), 0o644)
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
